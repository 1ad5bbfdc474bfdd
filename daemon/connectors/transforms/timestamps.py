"""Connect's ``TimestampConverter`` (``$Key``/``$Value``), with Java's ``SimpleDateFormat`` for
string timestamps, always in UTC as Connect sets it.

A timestamp is read by its class, as Connect's schemaless path infers it: a string is parsed
with ``format``, an integer is a Unix time in ``unix.precision``, a ``java.util.Date`` (here an
``Instant``: what an earlier TimestampConverter made) is taken as it is. It is then written as
``target.type``: ``string`` (``format``), ``unix`` (an integer in ``unix.precision``),
``Timestamp``, ``Date`` (midnight of its day) or ``Time`` (its time of day on 1970-01-01).

The three ``java.util.Date`` targets become Arrow's types where the value is in columns (or is
the whole key or value): ``timestamp[ms, UTC]``, ``date32`` and ``time32[ms]``. Inside JSON text
(a value held whole as a map) they are written as their epoch milliseconds, as JSON has no date.

``SimpleDateFormat`` letters connectd reads and writes: ``y M d H h k K m s S a E D u z Z X``
and quoted text; any other letter is refused when the connector is configured, naming it.
Parsing is lenient as Java's default is (a 13th month is the next year's first), reads from the
start and ignores what follows the pattern, as ``DateFormat.parse`` does.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.config.dateformat import Part, compile_pattern
from daemon.connectors.records import RecordBatch
from daemon.connectors.transforms import java
from daemon.connectors.transforms.fields import (
    Errors,
    Row,
    live_rows,
    merge,
    read_fields,
    set_column,
    text_apply,
    write_fields,
)
from daemon.connectors.transforms.java import DAY_MS, TransformError
from daemon.connectors.transforms.reshape import whole

#: 1582-10-15T00:00Z, where Java's default calendar turns from Julian to Gregorian.
CUTOVER_MS = -12_219_292_800_000
EPOCH_JDN = 2_440_588  # the Julian day number of 1970-01-01
#: Milliseconds per unit (``seconds``), or units per millisecond (the finer ones).
_PER = {"seconds": 1_000, "milliseconds": 1, "microseconds": 1_000, "nanoseconds": 1_000_000}
_MONTHS = [calendar.month_name[i] for i in range(1, 13)]
_DAYS = [calendar.day_name[i] for i in range(7)]  # Monday first


class Instant(int):
    """A ``java.util.Date``: epoch milliseconds, with the logical type that made it."""

    kind: str = "Timestamp"

    def __new__(cls, ms: int, kind: str = "Timestamp") -> Instant:
        made = super().__new__(cls, ms)
        made.kind = kind
        return made


ARROW = {
    "Timestamp": pa.timestamp("ms", tz="UTC"),
    "Date": pa.date32(),
    "Time": pa.time32("ms"),
    "unix": pa.int64(),
    "string": pa.string(),
}


# ---- SimpleDateFormat ----


@dataclass(frozen=True)
class _Moment:
    """A UTC moment by the fields Java's calendar names it with (any year)."""

    year: int
    month: int
    day: int
    yday: int
    weekday: int  # Monday 0
    hour: int
    minute: int
    second: int
    milli: int


def moment(ms: int) -> _Moment:
    """Epoch milliseconds as Java's default calendar names them: Gregorian from 1582-10-15,
    Julian before (integer arithmetic: no year limit)."""
    days, rest = divmod(ms, DAY_MS)
    if ms >= CUTOVER_MS:
        year, month, day = gregorian_date(days)
        first = gregorian_days(year, 1, 1)
    else:
        year, month, day = julian_date(days)
        first = julian_days(year, 1, 1)
    seconds, milli = divmod(rest, 1000)
    return _Moment(
        year,
        month,
        day,
        days - first + 1,
        (days + 3) % 7,  # 1970-01-01 was a Thursday
        seconds // 3600,
        seconds // 60 % 60,
        seconds % 60,
        milli,
    )


def gregorian_days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date of the (proleptic) Gregorian calendar."""
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    return day + (153 * m + 2) // 5 + 365 * y + y // 4 - y // 100 + y // 400 - 32045 - EPOCH_JDN


def gregorian_date(days: int) -> tuple[int, int, int]:
    """The Gregorian (year, month, day) of a day counted from 1970-01-01."""
    a = days + EPOCH_JDN + 32044
    b = (4 * a + 3) // 146097
    c = a - 146097 * b // 4
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return 100 * b + d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def format_ms(parts: tuple[Part, ...], ms: int) -> str:
    """``SimpleDateFormat.format`` of epoch milliseconds, in UTC."""
    t = moment(ms)
    return "".join(p.text if not p.letter else _field_text(p, t) for p in parts)


def _number(value: int, count: int) -> str:
    return str(value).zfill(count) if value >= 0 else "-" + str(-value).zfill(count)


def _field_text(p: Part, t: _Moment) -> str:
    c, n = p.letter, p.count
    if c == "y":
        return _number(t.year % 100, 2) if n == 2 else _number(t.year, n)
    if c == "M":
        if n >= 4:
            return _MONTHS[t.month - 1]
        return _MONTHS[t.month - 1][:3] if n == 3 else _number(t.month, n)
    if c == "E":
        name = _DAYS[t.weekday]
        return name if n >= 4 else name[:3]
    if c == "a":
        return "AM" if t.hour < 12 else "PM"
    if c == "z":
        return "Coordinated Universal Time" if n >= 4 else "UTC"
    if c == "Z":
        return "+0000"
    if c == "X":
        return "Z"
    value = {
        "d": t.day,
        "H": t.hour,
        "k": t.hour or 24,
        "K": t.hour % 12,
        "h": t.hour % 12 or 12,
        "m": t.minute,
        "s": t.second,
        "S": t.milli,
        "D": t.yday,
        "u": t.weekday + 1,
    }[c]
    return _number(value, n)


_NUMERIC = set("ydHhkKmsSDu") | {"M"}


def parse_ms(parts: tuple[Part, ...], text: str) -> int:
    """``SimpleDateFormat.parse`` (lenient, UTC) to epoch milliseconds (``ValueError``)."""
    fields: dict[str, int] = {}
    pm: bool | None = None
    pos = 0
    for k, p in enumerate(parts):
        if not p.letter:
            if not text.startswith(p.text, pos):
                raise ValueError(f"expected {p.text!r} at {pos}")
            pos += len(p.text)
            continue
        numeric = p.letter in _NUMERIC and not (p.letter == "M" and p.count >= 3)
        if numeric:
            adjacent = k + 1 < len(parts) and parts[k + 1].letter in _NUMERIC
            width = p.count if adjacent else None
            digits = f"{{{width}}}" if width else "+"
            m = re.compile(r"[+-]?\d" + digits).match(text, pos)
            if m is None:
                raise ValueError(f"no number at {pos}")
            fields[p.letter] = int(m.group())
            pos = m.end()
            continue
        rest = text[pos:]
        if p.letter == "M":
            hit = _name(rest, _MONTHS)
            fields["M"] = hit[0] + 1
            pos += hit[1]
        elif p.letter == "E":
            pos += _name(rest, _DAYS)[1]
        elif p.letter == "a":
            hit = _name(rest, ["AM", "PM"])
            pm = hit[0] == 1
            pos += hit[1]
        else:  # z Z X: UTC only
            m = re.compile(r"Z|UTC|GMT|Coordinated Universal Time|[+-]00(:?00)?").match(text, pos)
            if m is None:
                raise ValueError(f"no UTC time zone at {pos}")
            pos = m.end()
    year = fields.get("y", 1970)
    if parts and any(p.letter == "y" and p.count <= 2 for p in parts) and 0 <= year < 100:
        year += 2000 if year + 2000 <= dt.date.today().year + 20 else 1900
    hour = fields.get("H", fields.get("k", 0) % 24)
    twelve = "h" in fields or "K" in fields
    if twelve and (pm is not None or not ("H" in fields or "k" in fields)):
        hour = fields.get("h", fields.get("K", 0)) % 12 + (12 if pm else 0)
    if "D" in fields and "d" not in fields and "M" not in fields:
        day_offset, month = fields["D"] - 1, 1
    else:
        day_offset, month = fields.get("d", 1) - 1, fields.get("M", 1)
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    clock = ((hour * 60 + fields.get("m", 0)) * 60 + fields.get("s", 0)) * 1000
    clock += fields.get("S", 0)
    ms = (gregorian_days(year, month, 1) + day_offset) * DAY_MS + clock
    if ms >= CUTOVER_MS:
        return ms
    # Before the Gregorian calendar's start Java counts days as the Julian calendar does.
    return (julian_days(year, month, 1) + day_offset) * DAY_MS + clock


def julian_days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date of the Julian calendar."""
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    return day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083 - EPOCH_JDN


def julian_date(days: int) -> tuple[int, int, int]:
    """The Julian calendar's (year, month, day) of a day counted from 1970-01-01."""
    c = days + EPOCH_JDN + 32082
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def _name(text: str, names: list[str]) -> tuple[int, int]:
    """Which of ``names`` (full or three letters, any case) ``text`` starts with, and its
    length: the longest match wins."""
    best = None
    for i, name in enumerate(names):
        for candidate in (name, name[:3]):
            hit = text[: len(candidate)].lower() == candidate.lower()
            if hit and (best is None or len(candidate) > best[1]):
                best = (i, len(candidate))
    if best is None:
        raise ValueError(f"no name at {text[:10]!r}")
    return best


# ---- the conversion ----


@dataclass(frozen=True)
class Converter:
    """One TimestampConverter's settings."""

    target: str
    pattern: str
    parts: tuple[Part, ...] | None
    precision: str

    @classmethod
    def of(cls, config: dict[str, str] | Any) -> Converter:
        pattern = config.get("format", "")
        parts = compile_pattern(pattern) if pattern.strip() else None
        return cls(
            config["target.type"], pattern, parts, config.get("unix.precision", "milliseconds")
        )

    def __call__(self, value: Any) -> Any:
        """Connect's ``convertTimestamp`` (None stays None)."""
        if value is None:
            return None
        ms = self._raw(value)
        target = self.target
        if target == "string":
            assert self.parts is not None  # the config check requires a format for it
            return format_ms(self.parts, ms)
        if target == "unix":  # Java's TimeUnit: truncating division, saturating products
            per = _PER[self.precision]
            return _tdiv(ms, per) if self.precision == "seconds" else _saturated(ms * per)
        if target == "Date":
            return Instant(ms - ms % DAY_MS, "Date")
        if target == "Time":
            return Instant(ms % DAY_MS, "Time")
        return Instant(ms, "Timestamp")

    def _raw(self, value: Any) -> int:
        if isinstance(value, Instant):
            return int(value)
        if isinstance(value, str):
            if self.parts is None:
                raise TransformError(
                    "Could not parse timestamp: a string timestamp needs format to parse it"
                )
            try:
                return parse_ms(self.parts, value)
            except (ValueError, OverflowError):
                raise TransformError(
                    f"Could not parse timestamp: value ({value}) does not match pattern "
                    f"({self.pattern})"
                ) from None
        if isinstance(value, int) and not isinstance(value, bool):
            per = _PER[self.precision]
            return _saturated(value * per) if self.precision == "seconds" else _tdiv(value, per)
        raise TransformError(
            f"TimestampConverter does not support class {java.class_name(value)} objects as"
            " timestamps"
        )


def _tdiv(a: int, b: int) -> int:
    """Java's long division: toward zero."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _saturated(n: int) -> int:
    return max(-(2**63), min(2**63 - 1, n))


def record_function(spec: tf.TransformSpec) -> Callable[[Any, Row], Any]:
    convert, field = Converter.of(spec.config), spec.config.get("field", "")

    def timestamp(value: Any, row: Row) -> Any:
        if value is None or not field:
            return convert(value)
        value = java.require_map(value, "converting timestamp formats")
        return {**value, field: convert(value.get(field))}

    return timestamp


def _instants(array: pa.Array) -> list[Any]:
    """A column's values as TimestampConverter reads them (dates and times as ``Instant``)."""
    kind = array.type
    if pa.types.is_timestamp(kind):
        ms = pc.cast(pc.cast(array, pa.timestamp("ms", tz="UTC")), pa.int64()).to_pylist()
        return [None if v is None else Instant(v) for v in ms]
    if pa.types.is_date32(kind):
        return [
            None if v is None else Instant(v * DAY_MS, "Date")
            for v in array.cast(pa.int32()).to_pylist()
        ]
    if pa.types.is_time32(kind):
        return [
            None if v is None else Instant(v, "Time") for v in array.cast(pa.int32()).to_pylist()
        ]
    values: list[Any] = array.to_pylist()
    return values


def arrow_values(values: list[Any], target: str) -> pa.Array:
    """Converted values as a column of the target's type."""
    kind = ARROW[target]
    if target == "Date":
        return pa.array([None if v is None else int(v) // DAY_MS for v in values], pa.int32()).cast(
            kind
        )
    if target in ("Time", "Timestamp"):
        ints = pa.array([None if v is None else int(v) for v in values], pa.int64())
        return ints.cast(pa.int32()).cast(kind) if target == "Time" else ints.cast(kind)
    return pa.array(values, kind)


def apply(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """``batch`` with ``spec`` applied to the rows of ``where``, and the rows it refused."""
    side, field = tf.side(spec.cls), spec.config.get("field", "")
    convert = Converter.of(spec.config)
    if side == "value" and batch.value_columns is not None:
        if not field:  # the whole value is a map: held whole, Connect refuses it below
            batch = whole(batch)
        else:
            fields = read_fields(batch)
            array = fields.arrays.get(field)
            if array is None:
                return batch, {}
            rows = pc.and_(live_rows(batch, where), array.is_valid())
            converted, errors = _convert_column(convert, array, rows)
            if converted is None:
                return batch, errors
            fields.arrays[field] = converted
            fields.json.discard(field)
            return write_fields(batch, fields), errors
    column = batch.table.column(side).combine_chunks()
    if not field and side not in batch.json_columns:  # a whole key or value of its own type
        converted, errors = _convert_column(convert, column, pc.and_(where, column.is_valid()))
        if converted is not None:
            return set_column(batch, side, converted, json=False), errors
    return text_apply(batch, where, side, record_function(spec))


def _convert_column(
    convert: Converter, array: pa.Array, rows: pa.BooleanArray
) -> tuple[pa.Array | None, Errors]:
    """``array`` with the values of ``rows`` converted (None: they cannot share a column with
    the others, which are then refused too), and the rows refused."""
    values = _instants(array)
    out: list[Any] = [None] * len(values)
    errors: Errors = {}
    for i in pc.indices_nonzero(rows).to_pylist():
        try:
            out[i] = convert(values[i])
        except TransformError as e:
            errors[i] = str(e)
    merged = merge(array, arrow_values(out, convert.target), rows)
    if merged is None:
        why = "TimestampConverter: converted values beside values of another type in one column"
        for i in pc.indices_nonzero(rows).to_pylist():
            errors.setdefault(i, why)
    return merged, errors
