"""A connector's own settings: Connect's ``ConfigDef``, the one vocabulary connector authors use.

A connector declares each setting once with ``ConfigDef.define`` (name, type, default,
importance, documentation, validator). The same declaration serves ``parse`` (typed values, for
the connector), ``validate`` (problems, for ``check-config``, REST validation and connector
creation) and the REST ``config`` listing. Values are parsed with the worker settings' own
parsers (``daemon.config.fields``), so a connector setting and a worker setting of one type
accept the same text and say the same thing when it is wrong.

The connector registry provides a ``ConnectorDefResolver``; ``parse_connector`` calls it with the
config's ``connector.class`` and checks the connector's own keys with the definition it returns.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from daemon.config import fields as f
from daemon.config.problems import Problem, error
from daemon.errors import InvalidConfig


class ConfigType(enum.StrEnum):
    """Types of connector settings (Connect's ``ConfigDef.Type``, plus ``ms`` durations)."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    LIST = "list"
    PASSWORD = "password"
    MS = "ms"


class Importance(enum.StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


#: ``ConfigKey.default`` for a required setting.
REQUIRED: Any = object()

Validator = Callable[[Any], None]
"""Checks a parsed value; raises ``ValueError`` with a message saying what is wrong."""


def _integer(text: str) -> int:
    # Base 10, as Connect's ``ConfigDef`` reads them.
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not an integer") from None


def _int32(text: str) -> int:
    number = _integer(text)
    if not -(2**31) <= number < 2**31:
        raise ValueError(f"{number} does not fit in a 32-bit int")
    return number


def _ms(text: str) -> int:
    # Connectors get ``*.ms`` values as integer milliseconds, as in Connect.
    number = _integer(text)
    if number < 0:
        raise ValueError(f"{number} is negative")
    return number


def _boolean(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"{text.strip()!r} is not true or false")
    return text.strip().lower() == "true"


# Each type's parser and what a value should look like (the "expected" half of an error).
_TYPES: dict[ConfigType, tuple[Callable[[str], Any], str | None]] = {
    ConfigType.STRING: (f.parse_str, None),
    ConfigType.PASSWORD: (f.parse_str, None),
    ConfigType.INT: (_int32, "a 32-bit integer"),
    ConfigType.LONG: (_integer, "an integer"),
    ConfigType.DOUBLE: (lambda text: float(text.strip()), "a number"),
    ConfigType.BOOLEAN: (_boolean, "true or false"),
    ConfigType.LIST: (lambda text: list(f.parse_list(text)), "a comma-separated list"),
    ConfigType.MS: (_ms, "milliseconds as an integer ≥ 0"),
}


@dataclass(frozen=True)
class ConfigKey:
    """One connector-specific setting (Connect's ``ConfigDef.ConfigKey``)."""

    name: str
    type: ConfigType
    default: Any = REQUIRED
    importance: Importance = Importance.MEDIUM
    documentation: str = ""
    validator: Validator | None = None
    group: str | None = None
    display_name: str | None = None
    #: The value is where Spark reads and writes the connector's data (a table's directory):
    #: with a cluster master, a local path there is refused unless the worker says local paths
    #: are shared (``daemon.config.placement``).
    location: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def expected(self) -> str | None:
        """What a value should look like, for error messages (``None``: any text)."""
        return _TYPES[self.type][1]

    def value(self, config: Mapping[str, str]) -> Any:
        """This setting's typed value in ``config`` (the default if absent); ``ValueError``
        saying what is wrong otherwise."""
        if self.name not in config:
            if self.required:
                raise ValueError(
                    "required setting is missing"
                    + (f": {self.documentation}" if self.documentation else "")
                )
            return self.default
        value = _TYPES[self.type][0](config[self.name])
        if self.validator is not None:
            self.validator(value)
        return value


class ConnectorConfigDef(Protocol):
    """What a connector class says about its own settings. Provided by the connector registry.

    ``keys`` maps each key the connector reads to its declaration. ``validate`` gets the whole
    resolved map (framework keys included) and returns problems with ``file`` ``None`` (the
    loader fills it in); it must not raise for bad values. ``ConfigDef`` implements it.
    """

    @property
    def keys(self) -> Mapping[str, ConfigKey]: ...

    def validate(self, config: Mapping[str, str]) -> list[Problem]: ...


ConnectorDefResolver = Callable[[str], ConnectorConfigDef | None]
"""Connector class name or alias → its definition, or ``None`` if no such class is installed."""


@dataclass
class ConfigDef:
    """A connector's settings: what ``SinkConnector.config_def()`` returns.

    Implements ``ConnectorConfigDef``, so the config layer checks connector keys with it.
    ``parse`` gives typed values. A subclass checks settings against each other in
    ``cross_check``, which both ``validate`` and ``parse`` run once every value parses.
    """

    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(
        self,
        name: str,
        type: ConfigType,
        default: Any = REQUIRED,
        importance: Importance = Importance.MEDIUM,
        documentation: str = "",
        *,
        validator: Validator | None = None,
        group: str | None = None,
        display_name: str | None = None,
        location: bool = False,
    ) -> ConfigDef:
        """Add a setting; returns ``self`` so definitions chain, as in Connect. ``location``:
        the value is a path or URI Spark writes the connector's data to (``ConfigKey``)."""
        if name in self.keys:
            raise ValueError(f"setting {name!r} is defined twice")
        key = ConfigKey(
            name, type, default, importance, documentation, validator, group, display_name, location
        )
        self.keys[name] = key
        return self

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        """Every problem with the keys this definition knows; other keys are not looked at.
        Never raises for a bad value."""
        return self.read(config)[1]

    def parse(self, config: Mapping[str, str]) -> dict[str, Any]:
        """Typed values of every defined key (defaults filled in); ``InvalidConfig`` if any is
        wrong, listing every problem."""
        values, problems = self.read(config)
        if problems:
            raise InvalidConfig(problems)
        return values

    def read(self, config: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        """One pass over ``config``: the typed values that parse, and every problem (each
        setting on its own, then ``cross_check`` if they all parse)."""
        values: dict[str, Any] = {}
        problems: list[Problem] = []
        for key in self.keys.values():
            try:
                values[key.name] = key.value(config)
            except ValueError as e:
                problems.append(error(key.name, str(e), key.expected))
        if not problems:
            problems = self.cross_check(values, config)
        return values, problems

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        """Problems between settings, given every defined value parsed. A subclass may add
        values derived from keys it does not define (the framework's) to ``values``."""
        return []


def in_range(low: float | None = None, high: float | None = None) -> Validator:
    """A validator: the number is within ``[low, high]``."""

    def check(value: Any) -> None:
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{value} is not within [{low}, {high}]")

    return check


def one_of(*choices: str) -> Validator:
    """A validator: the string is one of ``choices`` (case-insensitive)."""

    def check(value: Any) -> None:
        if str(value).lower() not in {c.lower() for c in choices}:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")

    return check
