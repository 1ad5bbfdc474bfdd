"""The building blocks of a setting: value types that parse Connect's strings, and ``setting()``.

A setting is declared once, as a pydantic field made with ``setting(...)``. The field carries
its Kafka Connect property name (the alias), default, description and the "expected" text used
in error messages; everything else — the ``.properties`` and TOML mapping, ``check-config``,
``config.example.toml`` — reads it back through ``settings_of()``.

The value types accept what Connect accepts (trimmed strings: ``" 5000 "``, ``"TRUE"``, comma
lists) and also TOML's native values (integers, booleans, arrays). Durations arrive as Connect's
``*.ms`` integers and are ``timedelta`` from then on.
"""

from __future__ import annotations

import enum
import functools
import logging
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, SecretStr, ValidationInfo
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from daemon.config.problems import Problem

log = logging.getLogger("connectd.config")


@dataclass(frozen=True)
class Expect:
    """Annotation marker: what a value of this type should look like, for error messages."""

    text: str


@dataclass(frozen=True)
class ClientKeys:
    """Annotation marker of a prefix setting whose keys are a Kafka client's settings
    (``consumer.*``): ``client`` names the table of known keys (``daemon.config.clients``)."""

    client: str


@dataclass(frozen=True)
class Forever:
    """Annotation marker: ``None`` means "no limit" and is written ``-1``, as Connect does."""


def _reject_bool(value: object) -> None:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean")


_INTEGER = re.compile(r"^[+-]?[0-9]+$")  # as Java's parseInt: no "1_000", no "1e3"


def parse_int_value(value: object) -> int:
    """An ``int`` from an int or a trimmed decimal string; ValueError naming the value if not."""
    _reject_bool(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.match(value.strip()):
        return int(value.strip(), 10)
    raise ValueError(f"{value!r} is not a number")


def _parse_int(
    lo: int | None, hi: int | None, *, none_at: int | None = None
) -> Callable[[object], int | None]:
    def parse(value: object) -> int | None:
        number = parse_int_value(value)
        if none_at is not None and number == none_at:
            return None
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            raise ValueError(f"{value!r} is out of range")
        return number

    return parse


def parse_ms(value: object) -> timedelta:
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError(f"{value!r} is negative")
        return value
    ms = parse_int_value(value)
    if ms < 0:
        raise ValueError(f"{value!r} is negative")
    return timedelta(milliseconds=ms)


def parse_positive_ms(value: object) -> timedelta:
    ms = parse_ms(value)
    if ms <= timedelta(0):
        raise ValueError(f"{value!r} is not positive")
    return ms


def _parse_ms_or_forever(value: object) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta) and parse_int_value(value) == -1:
        return None
    return parse_ms(value)


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{value!r} is not a boolean")


def parse_str(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{value!r} is not a string")


def parse_float(value: object) -> float:
    """A ``float`` from a number or a trimmed decimal string (Python's ``float`` syntax)."""
    _reject_bool(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise ValueError(f"{value!r} is not a number")


def _parse_opt_str(value: object) -> str | None:
    if value is None:
        return None
    text = parse_str(value)
    return text or None


def parse_list(value: object) -> tuple[str, ...]:
    """Connect's LIST: comma-separated, items trimmed, empty items dropped; or a TOML array."""
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError(f"{value!r} is not a list")
    out = []
    for item in items:
        text = parse_str(item)
        if text:
            out.append(text)
    return tuple(out)


def _parse_path(value: object) -> Path:
    if isinstance(value, Path):
        return value
    text = parse_str(value)
    if not text:
        raise ValueError("the path is empty")
    return Path(text)


def _parse_secret(value: object) -> SecretStr:
    # Connect's PASSWORD type is not trimmed: a password may start or end with a space.
    if isinstance(value, SecretStr):
        return value
    if isinstance(value, str):
        return SecretStr(value)
    raise ValueError("the value is not a string")


def _parse_str_dict(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{value!r} is not a table of settings")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[str(key)] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[str(key)] = str(item)
        else:
            raise ValueError(f"{key}: {item!r} is not a string, number or boolean")
    return out


Millis = Annotated[timedelta, BeforeValidator(parse_ms), Expect("milliseconds as an integer ≥ 0")]
PositiveMillis = Annotated[
    timedelta, BeforeValidator(parse_positive_ms), Expect("milliseconds as an integer > 0")
]
MillisOrForever = Annotated[
    timedelta | None,
    BeforeValidator(_parse_ms_or_forever),
    Forever(),
    Expect("milliseconds as an integer ≥ 0, or -1 for no limit"),
]
Bool = Annotated[bool, BeforeValidator(parse_bool), Expect("true or false")]
Str = Annotated[str, BeforeValidator(parse_str), Expect("a string")]
OptStr = Annotated[str | None, BeforeValidator(_parse_opt_str), Expect("a string")]
StrList = Annotated[tuple[str, ...], BeforeValidator(parse_list), Expect("a comma-separated list")]
PositiveInt = Annotated[int, BeforeValidator(_parse_int(1, None)), Expect("an integer ≥ 1")]
NonNegInt = Annotated[int, BeforeValidator(_parse_int(0, None)), Expect("an integer ≥ 0")]
#: An integer ≥ 1, or -1 (``None``): a bound set elsewhere applies.
OptPositiveInt = Annotated[
    int | None,
    BeforeValidator(_parse_int(1, None, none_at=-1)),
    Expect("an integer ≥ 1, or -1 for the default"),
]


def _parse_float(lo: float, hi: float) -> Callable[[object], float]:
    def parse(value: object) -> float:
        try:
            number = parse_float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if not lo <= number <= hi:
            raise ValueError(f"{value!r} is out of range")
        return number

    return parse


#: Kafka's ``sasl.login.refresh.window.factor`` and ``.jitter`` ranges.
RefreshFactor = Annotated[
    float, BeforeValidator(_parse_float(0.5, 1.0)), Expect("a number from 0.5 to 1.0")
]
RefreshJitter = Annotated[
    float, BeforeValidator(_parse_float(0.0, 0.25)), Expect("a number from 0 to 0.25")
]
#: Kafka's ``sasl.login.refresh.min.period.seconds`` and ``.buffer.seconds`` ranges.
RefreshMinPeriod = Annotated[
    int, BeforeValidator(_parse_int(0, 900)), Expect("an integer from 0 to 900")
]
RefreshBuffer = Annotated[
    int, BeforeValidator(_parse_int(0, 3600)), Expect("an integer from 0 to 3600")
]
#: connectd's bound on one connector's tasks (``tasks.max.limit``).
TasksLimit = Annotated[
    int, BeforeValidator(_parse_int(1, 10_000)), Expect("an integer from 1 to 10000")
]
Port = Annotated[
    int, BeforeValidator(_parse_int(0, 65535)), Expect("a port number from 0 to 65535")
]


def _parse_topic_setting(value: object) -> int:
    number = parse_int_value(value)
    if number == 0 or number < -1:
        raise ValueError(f"{value!r} is out of range")
    return number


TopicSetting = Annotated[
    int,
    BeforeValidator(_parse_topic_setting),
    Expect("an integer ≥ 1, or -1 for the broker's default"),
]
Limit = Annotated[
    int | None,
    BeforeValidator(_parse_int(0, None, none_at=-1)),
    Forever(),
    Expect("an integer ≥ 0, or -1 for no limit"),
]
FilePath = Annotated[Path, BeforeValidator(_parse_path), Expect("a file system path")]
Password = Annotated[SecretStr, BeforeValidator(_parse_secret), Expect("a string")]
StrDict = Annotated[dict[str, str], BeforeValidator(_parse_str_dict), Expect("settings")]


def choice(
    enum_type: type[enum.StrEnum], aliases: Mapping[str, str] | None = None
) -> Callable[[object], object]:
    """A parser for a ``StrEnum`` setting: case-insensitive, trimmed, with optional aliases."""
    by_lower = {m.value.lower(): m for m in enum_type}
    for alias, target in (aliases or {}).items():
        by_lower[alias.lower()] = enum_type(target)

    def parse(value: object) -> object:
        if isinstance(value, enum_type):
            return value
        if isinstance(value, str) and value.strip().lower() in by_lower:
            return by_lower[value.strip().lower()]
        raise ValueError(f"{value!r} is not one of {', '.join(m.value for m in enum_type)}")

    return parse


def setting(
    default: Any = PydanticUndefined,
    *,
    key: str,
    description: str,
    expected: str | None = None,
    default_doc: str | None = None,
    deprecated: str | None = None,
    example: Any = None,
    group: str = "",
) -> Any:
    """Declare a setting: its Connect property name ``key``, default, description and extras.

    ``key`` ending in ``.*`` declares a prefix setting: every ``<prefix>.<rest>`` key goes into
    the field's dict under ``<rest>``. ``expected`` overrides the value type's own "expected"
    text; ``default_doc`` is shown instead of the default where the default is computed;
    ``deprecated`` is the advice printed (as a warning) when the key is used; ``example`` is
    the value ``config.example.toml`` shows for a setting that is unset by default (for a prefix
    setting, a ``{name: value}`` table).
    """
    extra: dict[str, Any] = {"group": group}
    if expected is not None:
        extra["expected"] = expected
    if default_doc is not None:
        extra["default_doc"] = default_doc
    if deprecated is not None:
        extra["deprecated_advice"] = deprecated
    if example is not None:
        extra["example"] = example
    if isinstance(default, dict | list):
        factory = type(default)
        return Field(
            default_factory=lambda: factory(default),
            alias=key,
            description=description,
            json_schema_extra=extra,
        )
    return Field(default, alias=key, description=description, json_schema_extra=extra)


@dataclass(frozen=True)
class SettingInfo:
    """What one declared setting is, read back from its model field."""

    name: str
    """The Python attribute name."""
    key: str
    """The Connect property name, or ``prefix + "*"`` for a prefix setting."""
    description: str
    expected: str
    required: bool
    default: Any
    default_doc: str | None
    deprecated: str | None
    forever: bool
    group: str
    example: Any
    client: str | None = None
    """For a prefix setting of Kafka client settings: which client's (``ClientKeys``)."""

    @property
    def prefix(self) -> str | None:
        """``"consumer."`` for the ``consumer.*`` setting; ``None`` for a plain key."""
        return self.key[:-1] if self.key.endswith(".*") else None


@functools.cache
def settings_of(model: type[BaseModel]) -> tuple[SettingInfo, ...]:
    """Every setting ``model`` declares with ``setting()``, in declaration order."""
    out = []
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra
        if field.alias is None or not isinstance(extra, dict):
            continue  # not a setting (e.g. the derived maps of ConnectorConfig)
        markers = _markers(field)
        expected = next((m.text for m in markers if isinstance(m, Expect)), "a value")
        out.append(
            SettingInfo(
                name=name,
                key=field.alias,
                description=field.description or "",
                expected=str(extra.get("expected", expected)),
                required=field.is_required(),
                default=None
                if field.is_required()
                else field.get_default(call_default_factory=True),
                default_doc=_opt(extra.get("default_doc")),
                deprecated=_opt(extra.get("deprecated_advice")),
                forever=any(isinstance(m, Forever) for m in markers),
                group=str(extra.get("group", "")),
                example=extra.get("example"),
                client=next((m.client for m in markers if isinstance(m, ClientKeys)), None),
            )
        )
    return tuple(out)


def _markers(field: FieldInfo) -> list[object]:
    """The field's annotation metadata, also from inside ``X | None`` (``Annotated`` in a union)."""
    found = list(field.metadata)
    for arg in typing.get_args(field.annotation):
        if typing.get_origin(arg) is Annotated:
            found += list(arg.__metadata__)
    return found


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def report(info: ValidationInfo, problem: Problem) -> None:
    """Hand a problem found inside a model validator back to the loader.

    Loaders validate with ``context={"problems": [...]}`` and collect every problem. Without that
    context (a model built directly in Python) an error raises at once and a warning is logged.
    """
    context = info.context
    if isinstance(context, dict) and isinstance(context.get("problems"), list):
        context["problems"].append(problem)
    elif problem.is_error:
        raise ValueError(str(problem))
    else:
        log.warning("%s", problem)
