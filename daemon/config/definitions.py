"""What a connector class says about its own settings, for validating connector configs.

The connector registry provides a ``ConnectorDefResolver``; ``parse_connector`` calls it with the
config's ``connector.class`` and checks the connector's own keys with the definition it returns.
``BasicConfigDef`` covers the common case: a table of settings with types and defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from daemon.config import fields as f
from daemon.config.problems import Problem, error


@dataclass(frozen=True)
class ConnectorSetting:
    """One connector-specific setting, as documented by its connector class."""

    description: str
    type: Literal["string", "int", "bool", "list", "ms", "password"] = "string"
    default: str | None = None
    required: bool = False


class ConnectorConfigDef(Protocol):
    """What a connector class says about its own settings. Provided by the connector registry.

    ``settings`` maps each key the connector reads to its description, type and default.
    ``validate`` gets the whole resolved map (framework keys included) and returns problems with
    ``file`` ``None`` (the loader fills it in); it must not raise for bad values.
    """

    @property
    def settings(self) -> Mapping[str, ConnectorSetting]: ...

    def validate(self, config: Mapping[str, str]) -> list[Problem]: ...


ConnectorDefResolver = Callable[[str], ConnectorConfigDef | None]
"""Connector class name or alias → its definition, or ``None`` if no such class is installed."""

_CHECKS: dict[str, Callable[[object], object]] = {
    "int": f.parse_int_value,
    "bool": f.parse_bool,
    "list": f.parse_list,
    "ms": f.parse_ms,
}


@dataclass(frozen=True)
class BasicConfigDef:
    """A ``ConnectorConfigDef`` from a table of settings: required keys present, types parse."""

    settings: Mapping[str, ConnectorSetting] = field(default_factory=dict)

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        problems = []
        for key, spec in self.settings.items():
            if key not in config:
                if spec.required:
                    problems.append(error(key, "required key is missing", spec.description))
                continue
            check = _CHECKS.get(spec.type)
            if check is not None:
                try:
                    check(config[key])
                except ValueError as exc:
                    problems.append(error(key, str(exc), _TYPE_TEXT[spec.type]))
        return problems


_TYPE_TEXT = {
    "int": "an integer",
    "bool": "true or false",
    "list": "a comma-separated list",
    "ms": "milliseconds as an integer ≥ 0",
}
