"""What Connect's transforms do to one schemaless value, as the JVM does it.

A schemaless value in Connect is what ``JsonConverter`` (``schemas.enable=false``) or
``StringConverter`` made of the bytes: a ``Map`` for a JSON object, a ``List`` for an array,
``Long``/``Double``/``Boolean``/``String`` for the rest, ``byte[]`` for ``ByteArrayConverter``.
Here they are the Python values ``json.loads`` gives (``dict``, ``list``, ``int``, ``float``,
``bool``, ``str``) and ``bytes``. These functions are the reference the column-wise paths follow:
Java's number narrowing, its ``parseX`` rules and its ``toString`` of doubles.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import re
import struct
from collections.abc import Callable
from typing import Any

from daemon.errors import ConnectdError


class TransformError(ConnectdError):
    """A transform refused one record (Connect's ``DataException`` in the same place); the
    message says what Connect's says."""


#: Connect's ``Schema.Type`` of each Python value a schemaless record holds.
def type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, float):
        return "FLOAT64"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, bytes):
        return "BYTES"
    if isinstance(value, dict):
        return "MAP"
    return "ARRAY"


def class_name(value: Any) -> str:
    """The Java class Connect names in its messages for ``value`` (``null`` for None)."""
    if value is None:
        return "null"
    return {
        "BOOLEAN": "java.lang.Boolean",
        "INT64": "java.lang.Long",
        "FLOAT64": "java.lang.Double",
        "STRING": "java.lang.String",
        "BYTES": "[B",
        "MAP": "java.util.HashMap",
        "ARRAY": "java.util.ArrayList",
    }[type_name(value)]


def map_refusal(value: Any, purpose: str) -> str:
    """What Connect's ``Requirements.requireMap`` says of ``value`` when it is no map."""
    return (
        f"Only Map objects supported in absence of schema for [{purpose}], found: "
        f"{class_name(value)}"
    )


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    """Connect's ``Requirements.requireMap``."""
    if not isinstance(value, dict):
        raise TransformError(map_refusal(value, purpose))
    return value


_SCHEMALESS = re.compile(
    r"Only Map objects supported in absence of schema for \[(?P<purpose>[^\]]*)\], found: "
)


def with_schema(message: str) -> str:
    """A schemaless refusal as Connect words it for a key or value with a schema that is no
    struct (a string from ``StringConverter``: ``Requirements.requireStruct``; Cast's field
    spec first lists the schema's fields)."""
    found = _SCHEMALESS.match(message)
    if found is None:
        return message
    if found["purpose"] == "cast types":
        return "Cannot list fields on non-struct type"
    return (
        f"Only Struct objects supported for [{found['purpose']}], found: " + message[found.end() :]
    )


_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(
    r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)|"
    r"(0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+))[fFdD]?"
)
CAST_INPUTS = (
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FLOAT32",
    "FLOAT64",
    "BOOLEAN",
    "STRING",
    "BYTES",
)


def wrap(value: int, bits: int) -> int:
    """Java's narrowing of an integer to ``bits`` bits (two's complement, high bits dropped)."""
    half = 1 << (bits - 1)
    return ((value + half) % (1 << bits)) - half


def to_long(value: float, bits: int) -> int:
    """Java's ``(int)`` / ``(long)`` of a double: NaN is 0, the rest saturates, then narrows."""
    if math.isnan(value):
        return 0
    width = 64 if bits == 64 else 32
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    whole = high if value >= high else low if value <= low else int(value)
    return wrap(whole, bits)


def float32(value: float) -> float:
    """The nearest float (Java's ``(float)``), as a Python float."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def parse_double(text: str) -> float:
    """Java's ``Double.parseDouble`` (leading/trailing blanks, NaN, Infinity, hex, f/d suffix)."""
    s = text.strip(" \t\n\r\f\v\0")
    if not _DECIMAL.fullmatch(s):
        raise ValueError(f'For input string: "{text}"')
    s = s.rstrip("fFdD") if not s.lower().endswith(("nan", "infinity")) else s
    if "x" in s.lower():
        return float.fromhex(s)
    return float(s)


def parse_integer(text: str, bits: int) -> int:
    """Java's ``Byte/Short/Integer/Long.parseX``: digits with an optional sign, in range."""
    if not _INTEGER.fullmatch(text):
        raise ValueError(f'For input string: "{text}"')
    n = int(text)
    if wrap(n, bits) != n:
        raise ValueError(f'Value out of range. Value:"{text}" Radix:10')
    return n


def double_text(value: float) -> str:
    """Java's ``Double.toString``."""
    return _java_float_text(value, repr(value))


def float_text(value: float) -> str:
    """Java's ``Float.toString`` of a float (the shortest digits that read back as it)."""
    if math.isnan(value) or math.isinf(value):
        return _java_float_text(value, "")
    for digits in range(1, 10):
        shortest = f"{value:.{digits}g}"
        if float32(float(shortest)) == value:
            return _java_float_text(value, repr(float(shortest)), float32)
    return _java_float_text(value, repr(value), float32)


def _java_float_text(value: float, shortest: str, narrow: Callable[[float], float] = float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    if len(shortest.lstrip("-0.").split("e")[0].replace(".", "").rstrip("0")) == 1:
        # Java prints at least two digits, the two nearest the exact value: 4.9E-324 for the
        # smallest double, whose one shortest digit is 5.
        two = f"{decimal.Decimal(abs(value)):.1e}"
        if narrow(float(two)) == abs(value):
            shortest = two
    mantissa, _, exp = shortest.lstrip("-").partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    point = len(whole.lstrip("0")) if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    point += int(exp or 0)
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def cast(value: Any, target: str) -> Any:
    """Connect's ``Cast.castValueToType`` for a schemaless value (None stays None)."""
    if value is None:
        return None
    kind = type_name(value)
    if kind not in CAST_INPUTS:
        raise TransformError(
            f"Cast transformation does not support casting from {kind}; supported types are "
            f"[{', '.join(CAST_INPUTS)}]"
        )
    try:
        return _cast(value, target, kind)
    except ValueError:
        raise TransformError(
            f"Value ({_java_text(value)}) was out of range for requested data type"
        ) from None


def _cast(value: Any, target: str, kind: str) -> Any:
    if target == "string":
        return _java_text(value)
    if kind == "BYTES":
        raise TransformError("Unexpected type in Cast transformation: class [B")
    if target in _INT_BITS:
        bits = _INT_BITS[target]
        if kind == "BOOLEAN":
            return int(value)
        if kind == "STRING":
            return parse_integer(value, bits)
        if kind == "FLOAT64":
            return to_long(value, bits)
        return wrap(value, bits)
    if target in ("float32", "float64"):
        number = parse_double(value) if kind == "STRING" else float(value)
        return float32(number) if target == "float32" else number
    # boolean
    if kind == "STRING":
        return value.lower() == "true"
    if kind == "BOOLEAN":
        return value
    return (to_long(value, 64) if kind == "FLOAT64" else value) != 0


def _java_text(value: Any) -> str:
    """Java's ``toString`` of a schemaless value (``byte[]``: Base64, as Cast writes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return double_text(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)


def mask(value: Any, replacement: str | None) -> Any:
    """Connect's ``MaskField.masked`` for a schemaless value."""
    if value is None:
        return None
    kind = type_name(value)
    if replacement is None:
        empty = {"BOOLEAN": False, "INT64": 0, "FLOAT64": 0.0, "STRING": "", "MAP": {}, "ARRAY": []}
        if kind not in empty:
            raise TransformError(f"Cannot mask value of type: class {class_name(value)}")
        return empty[kind]
    if kind == "STRING":
        return replacement
    if kind not in ("INT64", "FLOAT64"):
        raise TransformError(
            f"Cannot mask value of type class {class_name(value)} with custom replacement."
        )
    return replacement_number(replacement, kind)


def replacement_number(replacement: str, kind: str) -> int | float:
    """MaskField's ``replacement`` for a Long (``INT64``) or Double field (Connect's
    ``Values.convertToLong/Double``: a number in the text, truncated for a Long)."""
    try:
        number = int(replacement) if _INTEGER.fullmatch(replacement.strip()) else None
        if number is None:
            number_f = parse_double(replacement)
            return to_long(number_f, 64) if kind == "INT64" else number_f
    except ValueError:
        raise TransformError(
            f"Unable to convert {replacement} (class java.lang.String) to a number"
        ) from None
    if kind == "FLOAT64":
        return float(number)
    return wrap(number, 64)


DAY_MS = 86_400_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def date_text(value: dt.datetime | dt.date | dt.time) -> str:
    """A Date, Time or Timestamp as ``Values.dateFormatFor`` prints the ``java.util.Date``
    (UTC): a time of day before the first day's end, a date at a day's start, else a
    timestamp."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        millis = (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    elif isinstance(value, dt.date):
        millis = (value - dt.date(1970, 1, 1)).days * DAY_MS
    else:
        millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
        millis += value.microsecond // 1000
    stamp = _EPOCH + dt.timedelta(milliseconds=millis)
    clock = stamp.strftime("%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
    if millis < DAY_MS:
        return clock
    if millis % DAY_MS == 0:
        return stamp.strftime("%Y-%m-%d")
    return stamp.strftime("%Y-%m-%dT") + clock


def big_decimal_text(value: decimal.Decimal) -> str:
    """Java's ``BigDecimal.toString``: Python's ``str`` of a Decimal follows the same rule
    (the General Decimal Arithmetic's to-scientific-string)."""
    return str(value)


def header_bytes(value: Any) -> bytes | None:
    """A value as Connect's ``SimpleHeaderConverter`` writes it into a header (``Values``'
    text, UTF-8; None stays None)."""
    return None if value is None else _values_text(value, embedded=False).encode()


def _values_text(value: Any, *, embedded: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return double_text(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str | bytes):
        text = value if isinstance(value, str) else base64.b64encode(value).decode()
        if not embedded:
            return text
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return date_text(value)
    if isinstance(value, decimal.Decimal):
        return big_decimal_text(value)
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        value = dict(value)  # a map column's entries
    if isinstance(value, list):
        return "[" + ",".join(_values_text(v, embedded=True) for v in value) + "]"
    return (
        "{"
        + ",".join(
            f"{_values_text(k, embedded=True)}:{_values_text(v, embedded=True)}"
            for k, v in value.items()
        )
        + "}"
    )
