"""Finding connector classes: aliases imported lazily, and validating a connector config.

``validate_connector`` sits beside the registry because checking a config means resolving its
class: the framework's keys first (``daemon.config.parse_connector``), then the class's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.config import parse_connector
from daemon.config.definitions import ConfigDef
from daemon.config.problems import error, raise_if_errors
from daemon.connectors.base import SinkConnector
from daemon.errors import ConnectorNotFound, InvalidConfig


@dataclass(frozen=True)
class PluginInfo:
    """One installed connector class, as ``GET /connector-plugins`` lists it."""

    class_name: str
    version: str
    aliases: tuple[str, ...] = ()
    type: str = "sink"

    def to_rest(self) -> dict[str, str]:
        return {"class": self.class_name, "type": self.type, "version": self.version}


class ConnectorRegistry:
    """Connector classes by alias, imported lazily (uvicorn-style): an alias may name a module
    that does not exist yet, or fails to import, without hurting any other alias."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        self._aliases: dict[str, str] = {}
        for alias, target in (aliases or {}).items():
            self.register_alias(alias, target)

    def register_alias(self, alias: str, target: str, *, replace: bool = False) -> None:
        """Map ``alias`` (e.g. ``ParquetSink``) to ``"package.module:Class"``."""
        if ":" not in target:
            raise ValueError(f"alias target {target!r} must look like 'package.module:Class'")
        if alias in self._aliases and self._aliases[alias] != target and not replace:
            raise ValueError(f"alias {alias!r} already points to {self._aliases[alias]}")
        self._aliases[alias] = target

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def resolve(self, name: str) -> type[SinkConnector]:
        """The class for an alias (also ``<alias>Connector``, any case), a
        ``package.module:Class`` or a ``package.module.Class``. ``ConnectorNotFound`` if none."""
        name = name.strip()
        target = self._alias_target(name)
        if target is None:
            if ":" in name:
                target = name
            elif "." in name:
                module, _, cls = name.rpartition(".")
                target = f"{module}:{cls}"
            else:
                raise ConnectorNotFound(f"no connector class or alias {name!r}; {self._known()}")
        return self._load(name, target)

    def config_def(self, name: str) -> ConfigDef | None:
        """The config layer's ``ConnectorDefResolver``: the class's ``ConfigDef``, or ``None``."""
        try:
            return self.resolve(name)().config_def()
        except ConnectorNotFound:
            return None

    def validate(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        """``validate_connector`` with this registry (the config layer's reload asks for it)."""
        return validate_connector(name, config, self)

    def list_plugins(self) -> list[PluginInfo]:
        """Every alias that imports, with its class name and version; broken ones are left out."""
        found: dict[str, PluginInfo] = {}
        for alias, target in sorted(self._aliases.items()):
            try:
                cls = self._load(alias, target)
                version = cls().version()
            except Exception:  # a broken plugin must not hide the others
                continue
            class_name = f"{cls.__module__}.{cls.__qualname__}"
            prior = found.get(class_name)
            aliases = (*prior.aliases, alias) if prior else (alias,)
            found[class_name] = PluginInfo(class_name, version, aliases)
        return sorted(found.values(), key=lambda p: p.class_name)

    def _alias_target(self, name: str) -> str | None:
        for candidate in (name, name.removesuffix("Connector")):
            for alias, target in self._aliases.items():
                if alias.lower() == candidate.lower():
                    return target
        return None

    def _known(self) -> str:
        known = ", ".join(sorted(self._aliases)) or "none registered"
        return f"known aliases: {known}; or give a Python path 'package.module:Class'"

    def _load(self, name: str, target: str) -> type[SinkConnector]:
        module_name, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception as e:  # ImportError, AttributeError, or the module's own error
            raise ConnectorNotFound(
                f"connector {name!r} ({target}) cannot be loaded: {type(e).__name__}: {e}; "
                + self._known()
            ) from e
        if not (isinstance(obj, type) and issubclass(obj, SinkConnector)):
            raise ConnectorNotFound(f"{target} is not a SinkConnector subclass; {self._known()}")
        return obj


#: The process's registry; the runtime registers the built-in aliases into it.
default_registry = ConnectorRegistry()
register_alias = default_registry.register_alias
resolve_connector_class = default_registry.resolve
list_plugins = default_registry.list_plugins


def validate_connector(
    name: str, config: Mapping[str, str], registry: ConnectorRegistry = default_registry
) -> dict[str, str]:
    """A connector config as stored (``name`` filled in), checked by the framework and by the
    connector class; ``InvalidConfig`` with every problem (REST answers 400)."""
    checked = {str(k): str(v) for k, v in config.items()}
    if "name" in checked and checked["name"] != name:
        raise InvalidConfig(
            [error("name", f"{checked['name']!r} differs from the connector's name {name!r}")]
        )
    checked["name"] = name
    parse_connector(checked, resolver=registry.config_def)
    cls = registry.resolve(checked["connector.class"])
    if cls.validate is not SinkConnector.validate:  # the class checks more than its keys
        raise_if_errors(cls().validate(checked))
    return checked
