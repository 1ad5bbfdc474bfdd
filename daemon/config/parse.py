"""From a flat map of Connect keys to a validated model, with every problem found.

The file loaders (``.properties``, JSON, TOML) all end here: they turn their file into one flat
``{connect.key: value}`` map (and the line of each key when they know it), and ``parse_worker``
or ``parse_connector`` does the rest — sort the keys (setting, prefix setting, ignored JVM-only
key, unknown key), validate, and collect problems.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from daemon.config import ignored
from daemon.config.clients import is_security_key
from daemon.config.connector import ConnectorConfig
from daemon.config.definitions import ConnectorDefResolver
from daemon.config.fields import SettingInfo, parse_list, settings_of
from daemon.config.kafka import KafkaSettings
from daemon.config.modes import Mode, mode_problems
from daemon.config.problems import (
    Problem,
    Severity,
    error,
    raise_if_errors,
    suggest,
    unknown_key,
    warning,
)
from daemon.config.providers import Providers, has_reference, provider_specs, resolve_collect
from daemon.config.worker import WorkerConfig

M = TypeVar("M", bound=BaseModel)

CONNECTOR_MARKERS = ("connector.class", "name", "tasks.max", "topics", "topics.regex")
"""A ``.properties`` file with any of these keys is a connector's; without, a worker's."""


class Loaded(NamedTuple, Generic[M]):
    """A loaded configuration and the warnings found while loading it."""

    config: M
    warnings: list[Problem]


@dataclass
class _Split:
    data: dict[str, object] = field(default_factory=dict)
    unknown: dict[str, object] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _split(
    model: type[BaseModel],
    values: Mapping[str, object],
    ignored_keys: Mapping[str, str],
    ignored_prefixes: Mapping[str, str],
    refused: Mapping[str, str] | None = None,
) -> _Split:
    """Sort keys into the model's input (by alias), ignored keys (a warning each), refused keys
    (an error each) and unknown keys."""
    refused = refused or {}
    infos = settings_of(model)
    exact = {i.key: i for i in infos if i.prefix is None}
    prefixes: list[tuple[str, SettingInfo | str]] = [(i.prefix, i) for i in infos if i.prefix]
    prefixes += list(ignored_prefixes.items())
    prefixes.sort(key=lambda item: len(item[0]), reverse=True)
    out = _Split()
    for key, value in values.items():
        if key in exact:
            out.data[key] = value  # a deprecated key's warning comes from the model's validator
        elif key in ignored_keys:
            out.problems.append(warning(key, ignored_keys[key]))
        elif key in refused:
            out.problems.append(error(key, refused[key]))
        else:
            claim = next(
                ((p, c) for p, c in prefixes if key.startswith(p) and len(key) > len(p)), None
            )
            if claim is None:
                out.unknown[key] = value
            elif isinstance(claim[1], str):
                out.problems.append(warning(key, claim[1]))
            else:
                table = out.data.setdefault(claim[1].key, {})
                assert isinstance(table, dict)
                table[key[len(claim[0]) :]] = value
    return out


def _message(err: Mapping[str, object]) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required key is missing"
    ctx = err.get("ctx")
    if kind == "value_error" and isinstance(ctx, dict) and "error" in ctx:
        return str(ctx["error"])
    return f"{err.get('input')!r}: {err['msg']}"


def _validate(model: type[M], data: dict[str, object], problems: list[Problem]) -> M | None:
    """Validate ``data``; append every problem (errors and the validators' warnings)."""
    expected = {i.key: i.expected for i in settings_of(model)}
    try:
        return model.model_validate(data, context={"problems": problems})
    except ValidationError as exc:
        for err in exc.errors():
            loc = err["loc"]
            key = str(loc[0]) if loc else None
            if key is not None and key.endswith(".*") and len(loc) > 1:
                key = key[:-1] + str(loc[1])
            base = str(loc[0]) if loc else None
            problems.append(error(key, _message(err), expected.get(base) if base else None))
        return None


def _finish(
    config: M | None, problems: list[Problem], file: str | None, lines: Mapping[str, int] | None
) -> Loaded[M]:
    located = [p.located(file, lines) for p in problems]
    located.sort(key=lambda p: p.line if p.line is not None else 1 << 30)  # stable: file order
    warnings = raise_if_errors(located)
    assert config is not None  # no error was found, so validation succeeded
    return Loaded(config, warnings)


def parse_worker(
    values: Mapping[str, object],
    *,
    file: str | None = None,
    lines: Mapping[str, int] | None = None,
    mode: Mode | None = None,
) -> Loaded[WorkerConfig]:
    """A ``WorkerConfig`` from Connect keys, resolving ``${...}`` with the worker's providers.

    ``mode`` adds that mode's requirements (``group.id`` etc. for distributed). Raises
    ``InvalidConfig`` with every problem; returns the warnings otherwise.
    """
    values = dict(values)
    problems: list[Problem] = []
    # Worker values may use the providers the same file configures (Connect's KIP-421).
    names = values.get("config.providers")
    try:
        provider_names = parse_list(names) if names is not None else ()
    except ValueError:
        provider_names = ()  # reported by validation
    provider_settings = {
        k[len("config.providers.") :]: str(v)
        for k, v in values.items()
        if k.startswith("config.providers.")
    }
    specs, _ = provider_specs(provider_names, provider_settings)  # problems: from validation
    to_resolve = {
        k: v
        for k, v in values.items()
        if isinstance(v, str) and has_reference(v) and not k.startswith("config.providers")
    }
    resolved, resolve_problems = resolve_collect(to_resolve, Providers.from_specs(specs))
    values.update(resolved)
    problems += resolve_problems

    split = _split(
        WorkerConfig,
        values,
        ignored.WORKER_KEYS,
        ignored.WORKER_PREFIXES,
        ignored.WORKER_REFUSED,
    )
    problems += split.problems
    candidates = [i.key for i in settings_of(WorkerConfig)] + list(ignored.WORKER_KEYS)
    problems += [unknown_key(key, candidates, Severity.ERROR) for key in split.unknown]
    markers = [k for k in CONNECTOR_MARKERS if k in split.unknown]
    if markers:  # the files in the wrong order: say so once, after the unknown keys
        problems.append(
            error(
                None,
                f"this looks like a connector config (it sets {', '.join(markers)}), given where"
                " the worker config goes: the worker config comes first, then the connector"
                " configs",
                "connectd standalone WORKER.properties CONNECTOR.properties ...",
            )
        )
    config = _validate(WorkerConfig, split.data, problems)
    if config is not None:
        for prefix, settings in config.client_settings().items():
            problems += security_overrides(prefix, settings)[1]
    if config is not None and mode is not None:
        problems += mode_problems(config, mode)
    return _finish(config, problems, file, lines)


def parse_connector(
    values: Mapping[str, str],
    *,
    file: str | None = None,
    lines: Mapping[str, int] | None = None,
    resolver: ConnectorDefResolver | None = None,
) -> Loaded[ConnectorConfig]:
    """A ``ConnectorConfig`` from its string map (as stored, or as resolved at task start).

    Keys that are not the framework's are the connector's: with ``resolver`` they are checked
    by the connector class's definition; without, they are accepted, except a key so close to a
    framework key that it is surely a typo (``tasks.mx``), which is an error. A framework value
    holding a ``${...}`` reference is checked only once resolved (at task start); here it draws a
    warning. Raises ``InvalidConfig`` with every problem; returns the warnings otherwise.
    """
    infos = {i.key: i for i in settings_of(ConnectorConfig)}
    split = _split(
        ConnectorConfig,
        values,
        ignored.CONNECTOR_KEYS,
        ignored.CONNECTOR_PREFIXES,
    )
    problems = list(split.problems)
    for key in [k for k, v in split.data.items() if isinstance(v, str) and has_reference(v)]:
        if key == "name":
            problems.append(
                error(key, "the name cannot come from a config provider", "the name itself")
            )
        elif not infos[key].required:
            reference = split.data.pop(key)
            problems.append(
                warning(
                    key,
                    f"{reference} is a provider reference; its value is checked at task start",
                )
            )

    framework = [k for k, i in infos.items() if i.prefix is None]
    definition = None
    class_name = values.get("connector.class", "").strip()
    if resolver is not None and class_name and not has_reference(class_name):
        definition = resolver(class_name)
        if definition is None:
            problems.append(
                error(
                    "connector.class",
                    f"no connector class {class_name!r} is installed",
                    "an installed connector class or alias",
                )
            )
    own: dict[str, str] = {}
    for key, value in split.unknown.items():
        close = suggest(key, framework, cutoff=0.85)
        if close is not None:
            problems.append(unknown_key(key, [close], Severity.ERROR))
        elif definition is not None and key not in definition.keys:
            problems.append(unknown_key(key, definition.keys, Severity.WARNING))
            own[key] = str(value)
        else:
            own[key] = str(value)
    if definition is not None:
        problems += definition.validate(values)

    config = _validate(
        ConnectorConfig,
        {**split.data, "connector_settings": own, "properties": dict(values)},
        problems,
    )
    if config is not None:
        for prefix, settings in config.client_overrides().items():
            problems += security_overrides(prefix, settings)[1]
    return _finish(config, problems, file, lines)


def security_overrides(
    prefix: str, settings: Mapping[str, object]
) -> tuple[dict[str, object], list[Problem]]:
    """The Kafka security settings among one client's ``settings`` (``security.protocol``,
    ``ssl.*``, ``sasl.*``, given under ``prefix``: ``consumer.``, ``consumer.override.``),
    read as the worker's own are: the ``WorkerConfig`` fields they set, and their problems
    named with ``prefix`` (a ``${...}`` value is checked once resolved, at task start)."""
    chosen = {
        k: v
        for k, v in settings.items()
        if is_security_key(k) and not (isinstance(v, str) and has_reference(v))
    }
    if not chosen:
        return {}, []
    split = _split(
        KafkaSettings,
        chosen,
        ignored.WORKER_KEYS,
        ignored.WORKER_PREFIXES,
        ignored.WORKER_REFUSED,
    )
    problems = list(split.problems)
    candidates = [i.key for i in settings_of(KafkaSettings)]
    problems += [unknown_key(key, candidates, Severity.ERROR) for key in split.unknown]
    parsed = _validate(KafkaSettings, split.data, problems)
    named = [replace(p, key=prefix + p.key) if p.key else p for p in problems]
    if parsed is None:
        return {}, named
    return {name: getattr(parsed, name) for name in parsed.model_fields_set}, named
