"""Converters by name: Connect's class names, simple names, short names or a Python path."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from daemon.config.problems import error, warning
from daemon.config.values import parse_header_converter
from daemon.connectors.converters.base import Converter, Side
from daemon.connectors.converters.batch import header_encoding
from daemon.connectors.converters.jsonconverter import JsonConverter
from daemon.connectors.converters.numbers import NUMBER_CONVERTERS
from daemon.connectors.converters.registry import (
    AvroConverter,
    JsonSchemaConverter,
    ProtobufConverter,
)
from daemon.connectors.converters.text import ByteArrayConverter, StringConverter
from daemon.errors import ConfigError
from daemon.structs import Problem


def _builtin_converters() -> dict[str, type[Converter]]:
    table: dict[str, type[Converter]] = {}
    builtins: list[tuple[type[Converter], tuple[str, ...]]] = [
        (StringConverter, ("string",)),
        (JsonConverter, ("json",)),
        (ByteArrayConverter, ("bytearray", "bytes")),
        (AvroConverter, ("avro",)),
        (JsonSchemaConverter, ("jsonschema",)),
        (ProtobufConverter, ("protobuf",)),
    ]
    builtins += [(cls, (cls.type_name,)) for cls in NUMBER_CONVERTERS]
    for cls, shorts in builtins:
        for name in (cls.connect_name, cls.__name__, *shorts):
            table[name.lower()] = cls
    return table


def list_converters() -> list[str]:
    """Connect class names of the built-in converters."""
    return sorted({cls.connect_name for cls in _builtin_converters().values()})


def converter_class(name: str) -> type[Converter]:
    """The converter class for a Connect class name, a short name or a ``module:Class`` path."""
    name = name.strip()
    builtin = _builtin_converters().get(name.lower())
    if builtin is not None:
        return builtin
    known = ", ".join(list_converters())
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"converter {name!r} cannot be loaded: {e}") from e
        if isinstance(obj, type) and issubclass(obj, Converter):
            return obj
        raise ConfigError(f"converter {name!r} is not a daemon.connectors.converters.Converter")
    raise ConfigError(f"converter {name!r} is not supported; use one of: {known}")


def make_converter(name: str, options: Mapping[str, str], *, is_key: bool) -> Converter:
    """A configured converter from a name and its options, as the config layer gives them
    (``daemon.config.effective_converter`` → ``(Converter.JSON, {"schemas.enable": "false"})``;
    pass the enum's value, ``"json"``)."""
    converter = converter_class(name)()
    converter.configure(options, is_key=is_key)
    return converter


def converter_from_config(
    config: Mapping[str, str], side: Side, *, default: str = "StringConverter"
) -> Converter:
    """The ``<side>.converter`` of ``config``, configured with its ``<side>.converter.*`` keys."""
    prefix = f"{side}.converter."
    options = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    return make_converter(config.get(f"{side}.converter", default), options, is_key=side == "key")


def converter_problems(config: Mapping[str, str]) -> list[Problem]:
    """The problems of the converters a connector's properties name themselves (``key.converter``
    / ``value.converter`` with their ``<side>.converter.*`` options), found by configuring them
    as a task would: a Schema Registry converter without ``schema.registry.url`` is refused when
    the connector is created, not when its first task starts; a key that is none of the
    converter's settings is a warning (``Converter.unused``). A value with a ``${...}``
    reference is left to the check at start (it is resolved there)."""
    found: list[Problem] = []
    kind = config.get("header.converter")
    if kind is not None and "${" not in kind:
        prefix = "header.converter."
        options = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
        try:
            header_reader(_header_kind(kind), options)
        except ConfigError as e:
            found.append(error("header.converter", str(e)))
    for side in ("key", "value"):
        name = config.get(f"{side}.converter")
        prefix = f"{side}.converter."
        options = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
        if name is None or any("${" in v for v in (name, *options.values())):
            continue
        try:
            made = make_converter(name, options, is_key=side == "key")
        except ConfigError as e:
            found.append(error(f"{side}.converter", str(e)))
            continue
        for key, near in made.unused.items():
            found.append(
                warning(
                    f"{prefix}{key}",
                    f"is not a setting of {made.connect_name or name}: unused",
                    f"{prefix}{near[0]}" if near else None,
                )
            )
    return found


#: The settings Connect's JsonConverter takes as a header converter.
_JSON_HEADER_SETTINGS = (
    "converter.type",
    "decimal.format",
    "replace.null.with.default",
    "schemas.cache.size",
    "schemas.enable",
)


def header_reader(
    kind: str | None, options: Mapping[str, str]
) -> tuple[str | None, JsonConverter | None]:
    """How the ``headers`` column's values are read under ``header.converter`` ``kind``
    (``daemon.config.values.HeaderConverter``'s values): the encoding of their text
    (``header_encoding``), or the JsonConverter that reads them as JSON (``json``); neither:
    their bytes. ``ConfigError`` naming the key for a setting the converter does not take."""
    if kind != "json":
        return header_encoding(kind, options), None
    for key in sorted(options):
        if key not in _JSON_HEADER_SETTINGS:
            raise ConfigError(
                f"header.converter.{key}: not a setting of the header converter (json); it"
                f" takes {', '.join(_JSON_HEADER_SETTINGS)}"
            )
    reader = JsonConverter()
    reader.configure(options, is_key=False)
    return None, reader


def _header_kind(name: str) -> str | None:
    try:
        kind = parse_header_converter(name or None)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return kind.value if kind is not None else None
