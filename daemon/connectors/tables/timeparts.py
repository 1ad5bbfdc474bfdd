"""Time-partitioned tables: ``partition.by``'s time transforms and Confluent's time-based layout.

Two ways to partition a table by time, for every table format:

- **Transforms in** ``partition.by``: ``year(col)``, ``month(col)``, ``day(col)``, ``hour(col)``
  (Iceberg's names; ``years``… are accepted too) of a timestamp column: ``kafka_timestamp`` (the
  record's time) or a value field. Each adds a column ``<col>_<transform>`` computed in UTC:
  ``year`` an int32 (``2026``), ``month`` a string (``2026-11``), ``day`` a date
  (``2026-11-30``), ``hour`` a string (``2026-11-30-17``), Iceberg's human forms. ParquetSink
  writes them as Hive directories (``kafka_timestamp_day=2026-11-30/``).
- **Confluent's** ``TimeBasedPartitioner`` (the S3 and HDFS sinks' keys, so their configs move
  over): ``partitioner.class`` (``TimeBasedPartitioner``, ``HourlyPartitioner``,
  ``DailyPartitioner``), ``path.format`` (``'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH``),
  ``partition.duration.ms``, ``timezone``, ``locale``, ``timestamp.extractor`` (``Record``,
  ``RecordField`` with ``timestamp.field``, ``Wallclock``). Each ``'name'=pattern`` segment of
  ``path.format`` adds a column ``name`` holding the record's time, floored to
  ``partition.duration.ms`` in ``timezone`` as Confluent floors it, formatted by the pattern; the
  table's directories then read as the S3 sink's do. Segments must be ``'name'=pattern``
  (Hive style: a table's partitions are named columns); patterns take Joda's ``YYYY``/``yyyy``,
  ``YY``/``yy``, ``MM``, ``dd``, ``HH``, ``mm``, ``ss`` and quoted literals.

A timestamp column may be Arrow's timestamp (naive ones are taken as UTC), a date, or an
int64 of epoch milliseconds; a null time gives a null partition value (Hive's default
partition). The columns are computed from each record alone (``Wallclock``: from the time the
batch is buffered), so a retried write places every record where the first attempt did, and
exactly once is unchanged.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from daemon.errors import ConfigError

TRANSFORMS = {
    "year": "year",
    "years": "year",
    "month": "month",
    "months": "month",
    "day": "day",
    "days": "day",
    "hour": "hour",
    "hours": "hour",
}
_CALL = re.compile(r"\s*([a-z]+)\(\s*([^()\s]+)\s*\)\s*")
CONFLUENT = "io.confluent.connect.storage.partitioner."
TIME_BASED = CONFLUENT + "TimeBasedPartitioner"
#: Confluent's fixed layouts.
FIXED = {
    CONFLUENT + "HourlyPartitioner": ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000),
    CONFLUENT + "DailyPartitioner": ("'year'=YYYY/'month'=MM/'day'=dd", 86_400_000),
}
DEFAULT = CONFLUENT + "DefaultPartitioner"
EXTRACTORS = ("Wallclock", "Record", "RecordField")
#: Joda pattern letters → strftime (the zero-padded forms only: strftime has no others).
_JODA = {
    "YYYY": "%Y",
    "yyyy": "%Y",
    "xxxx": "%G",  # the week-based year
    "YY": "%y",
    "yy": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}
_SEGMENT = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'=(.+)")


class TimePartitionError(ConfigError):
    """A time partitioning setting that cannot be honoured: ``key`` and why (a task that meets
    it fails, not retried)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@dataclass(frozen=True)
class TimeColumn:
    """One column computed from a record's time."""

    name: str
    source: str | None  # the column holding the time; None: the wall clock
    transform: str = ""  # year, month, day, hour (partition.by), or "" for a pattern
    pattern: str = ""  # strftime, for path.format's segments
    timezone: str = "UTC"
    duration_ms: int = 0  # path.format: floor the time to this in ``timezone`` first

    @property
    def key(self) -> str:
        """The setting that asked for this column's source: ``partition.by`` for a transform,
        ``timestamp.field`` for path.format's (the extractor's field)."""
        return "partition.by" if self.transform else "timestamp.field"

    @property
    def basis_key(self) -> tuple[str | None, str, int]:
        """Columns with the same basis (``basis``) share it: path.format's segments do."""
        return (self.source, "" if self.transform else self.timezone, self.duration_ms)

    def basis(self, ts: pa.Array) -> pa.Array:
        """What ``render`` formats: the UTC times for a transform; for a pattern, the local
        times in ``timezone``, floored to ``duration_ms`` as Confluent floors them."""
        if self.transform:
            return ts
        local = pc.cast(pc.local_timestamp(ts.cast(pa.timestamp("ms", self.timezone))), pa.int64())
        if self.duration_ms > 0:
            local = pc.subtract(local, pc.remainder(local, self.duration_ms))
        return local.cast(pa.timestamp("ms"))

    def render(self, basis: pa.Array) -> pa.Array:
        """This column's values from its ``basis``."""
        if self.transform == "year":
            return pc.cast(pc.year(basis), pa.int32())
        if self.transform == "day":
            return pc.cast(basis, pa.date32())
        if self.transform == "month":
            return pc.strftime(basis, format="%Y-%m")
        if self.transform == "hour":
            return pc.strftime(basis, format="%Y-%m-%d-%H")
        return pc.strftime(basis, format=self.pattern)


_UTC_MS = pa.timestamp("ms", "UTC")


def _timestamps(table: pa.Table, column: TimeColumn, now_ms: int) -> pa.Array:
    """The times ``column`` is computed from, as timestamp[ms, UTC]."""
    source = column.source
    if source is None:  # Wallclock
        return pa.repeat(pa.scalar(now_ms, _UTC_MS), table.num_rows)
    if source not in table.column_names:
        raise TimePartitionError(
            column.key,
            f"{column.name} needs the column {source}, and the records have"
            f" {table.column_names} (a value's fields are columns only with value.fields or a"
            " schema)",
        )
    values = table.column(source).combine_chunks()
    kind = values.type
    if pa.types.is_null(kind):  # no record of the batch has a time: all in the null partition
        return pa.nulls(len(values), _UTC_MS)
    if pa.types.is_timestamp(kind):
        # Down to milliseconds by truncation (microseconds would fail a safe cast).
        naive = values.cast(pa.timestamp(kind.unit)) if kind.tz is not None else values
        millis = pc.floor_temporal(naive, unit="millisecond").cast(pa.timestamp("ms"))
        return millis.cast(_UTC_MS)
    if pa.types.is_date(kind):
        return values.cast(pa.timestamp("ms")).cast(_UTC_MS)
    if pa.types.is_integer(kind):
        return values.cast(pa.int64()).cast(_UTC_MS)
    raise TimePartitionError(
        column.key,
        f"{column.name} needs a time in {source}, which holds {kind}: a timestamp, a date or"
        " epoch milliseconds (int64)",
    )


def transform_of(item: str) -> tuple[str, str] | None:
    """``(transform, column)`` of a ``partition_by`` item written as ``day(col)``, else None."""
    call = _CALL.fullmatch(item)
    if call is None or call.group(1) not in TRANSFORMS:
        return None
    return TRANSFORMS[call.group(1)], call.group(2)


_INTEGERS = ("tinyint", "smallint", "int", "bigint")


def generation_expression(transform: str, source: str, spark_type: str) -> str | None:
    """The Spark SQL expression of a ``partition.by`` transform's column as a Delta generated
    column (``GENERATED ALWAYS AS``), for a ``source`` column of Spark type ``spark_type``
    (its ``simpleString``); ``None`` for a type it cannot take.

    It gives what ``TimeColumn.render`` gives, in any session time zone: a timestamp's day and
    hour come from integer arithmetic on its epoch seconds (``CAST(ts AS BIGINT)``, floored as
    connectd floors, where ``unix_timestamp`` truncates towards zero before 1970), never from a
    cast or ``date_format`` of a timestamp to local fields, which Spark evaluates in the
    session's zone (a writer or a reader in another zone would compute, or prune by, other
    days); a wall time without zone (``timestamp_ntz``) and a date carry their fields whatever
    the zone. Only functions Delta allows in a generated column are used. Delta derives no
    partition filters from it: filter on the partition column itself."""
    col = "`" + source.replace("`", "``") + "`"
    epoch = "DATE'1970-01-01'"

    def on_epoch(value: str, per_day: int, per_hour: int) -> tuple[str, str]:
        days = f"(({value} - pmod({value}, {per_day})) div {per_day})"  # floored
        day = f"date_add({epoch}, CAST({days} AS INT))"
        return day, f"CAST(pmod({value}, {per_day}) div {per_hour} AS INT)"

    if spark_type == "timestamp":
        day, hour = on_epoch(f"CAST({col} AS BIGINT)", 86_400, 3_600)
    elif spark_type in _INTEGERS:  # epoch milliseconds
        day, hour = on_epoch(f"CAST({col} AS BIGINT)", 86_400_000, 3_600_000)
    elif spark_type == "timestamp_ntz":
        day, hour = f"CAST({col} AS DATE)", f"hour({col})"
    elif spark_type == "date":
        day, hour = col, "0"
    else:
        return None
    if transform == "day":
        return day
    if transform == "year":
        return f"year({day})"
    if transform == "month":
        text = f"format_string('%04d-%02d', year({day}), month({day}))"
    elif transform == "hour":
        text = (
            f"format_string('%04d-%02d-%02d-%02d', year({day}), month({day}), day({day}), {hour})"
        )
    else:
        return None
    # format_string writes a null argument as the text "null".
    return f"CASE WHEN {col} IS NULL THEN NULL ELSE {text} END"


def check_hidden(partition_by: Sequence[str], schema: pa.Schema) -> None:
    """For a format's own transforms (``day(col)`` left in ``partition_by``: Iceberg's hidden
    partitions): their columns must hold timestamps (or dates, except for ``hour``)."""
    for item in partition_by:
        found = transform_of(item)
        if found is None or found[1] not in schema.names:
            continue
        transform, source = found
        kind = schema.field(source).type
        dated = pa.types.is_date(kind) and transform != "hour"
        if not (pa.types.is_timestamp(kind) or dated or pa.types.is_null(kind)):
            raise TimePartitionError(
                "partition.by",
                f"{item} is the table format's own transform, which takes a timestamp column"
                f"{'' if transform == 'hour' else ' or a date'}; {source} holds {kind} (epoch"
                " milliseconds become a timestamp through a TimestampConverter transform)",
            )


def split_partition_by(items: Sequence[str]) -> tuple[tuple[str, ...], tuple[TimeColumn, ...]]:
    """``partition.by``'s columns in order (a transform by its column's name) and the
    transforms' columns to compute."""
    names: list[str] = []
    derived: list[TimeColumn] = []
    for item in items:
        call = _CALL.fullmatch(item)
        if call is None:
            if "(" in item or ")" in item:
                raise TimePartitionError(
                    "partition.by", f"{item!r} is neither a column nor year|month|day|hour(col)"
                )
            names.append(item)
            continue
        function, source = call.groups()
        transform = TRANSFORMS.get(function)
        if transform is None:
            raise TimePartitionError(
                "partition.by",
                f"{item!r}: {function} is not a time transform (year, month, day or hour)",
            )
        column = TimeColumn(f"{source}_{transform}", source, transform=transform)
        names.append(column.name)
        derived.append(column)
    return tuple(names), tuple(derived)


@dataclass(frozen=True)
class Partitioner:
    """Confluent's partitioner keys, as given."""

    cls: str = ""
    path_format: str = ""
    duration_ms: int = -1
    timezone: str = ""
    locale: str = ""
    extractor: str = "Wallclock"
    field: str = "timestamp"

    def columns(self) -> tuple[TimeColumn, ...]:
        """The columns ``path.format`` adds (none without a time-based partitioner);
        ``TimePartitionError`` names the key that cannot be honoured."""
        if self.cls in ("", DEFAULT):
            if self.path_format.strip():
                raise TimePartitionError(
                    "path.format",
                    f"it is used by partitioner.class={TIME_BASED} (or Hourly/Daily);"
                    f" partitioner.class is {self.cls or 'unset'}",
                )
            return ()
        if self.cls in FIXED:
            path_format, duration = FIXED[self.cls]
        elif self.cls == TIME_BASED:
            path_format, duration = self.path_format, self.duration_ms
            if not path_format.strip():
                raise TimePartitionError("path.format", f"{TIME_BASED} needs a path format")
            if duration <= 0:
                raise TimePartitionError(
                    "partition.duration.ms",
                    f"{TIME_BASED} needs the duration of a partition in milliseconds",
                )
        else:
            raise TimePartitionError(
                "partitioner.class",
                f"{self.cls} is not one connectd has: {TIME_BASED}, its Hourly and Daily"
                " forms or DefaultPartitioner (a FieldPartitioner's fields go in partition.by)",
            )
        if not self.timezone.strip():
            raise TimePartitionError("timezone", "time-based partitioning needs a timezone")
        if not self.locale.strip():
            raise TimePartitionError("locale", "time-based partitioning needs a locale")
        try:
            zoneinfo.ZoneInfo(self.timezone.strip())
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise TimePartitionError(
                "timezone", f"{self.timezone!r} is not a time zone id (e.g. UTC, Europe/Paris)"
            ) from None
        if self.extractor not in EXTRACTORS:
            raise TimePartitionError(
                "timestamp.extractor",
                f"{self.extractor!r} is not one of {', '.join(EXTRACTORS)} (a custom extractor"
                " class cannot be loaded)",
            )
        source = {"Wallclock": None, "Record": "kafka_timestamp"}.get(
            self.extractor, self.field.strip()
        )
        return tuple(
            TimeColumn(name, source, pattern=pattern, timezone=self.timezone.strip(),
                       duration_ms=duration)
            for name, pattern in _segments(path_format)
        )  # fmt: skip


def _segments(path_format: str) -> list[tuple[str, str]]:
    out = []
    for segment in path_format.strip().strip("/").split("/"):
        found = _SEGMENT.fullmatch(segment.strip())
        if found is None:
            raise TimePartitionError(
                "path.format",
                f"segment {segment!r} is not 'name'=pattern: a table's partitions are named"
                " columns (Hive style), e.g. 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
            )
        out.append((found.group(1), _strftime(found.group(2), segment)))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise TimePartitionError("path.format", f"{path_format!r} names a column twice")
    return out


def _strftime(pattern: str, segment: str) -> str:
    """Joda's ``pattern`` as strftime: letters from ``_JODA``, quoted literals, and any
    character that is not a letter as itself."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":  # a quoted literal, in which '' is a quote ('' alone too)
            literal, i = [], i + 1
            while True:
                end = pattern.find("'", i)
                if end < 0:
                    raise TimePartitionError("path.format", f"segment {segment!r}: unclosed quote")
                literal.append(pattern[i:end])
                if pattern[end + 1 : end + 2] != "'":
                    i = end + 1
                    break
                literal.append("'")
                i = end + 2
            out.append("".join(literal).replace("%", "%%") or "'")
        elif char.isalpha():
            run = len(pattern) - i - len(pattern[i:].lstrip(char))
            letters = pattern[i : i + run]
            if letters not in _JODA:
                raise TimePartitionError(
                    "path.format",
                    f"segment {segment!r}: {letters!r} is not a pattern connectd formats"
                    f" (it takes {', '.join(_JODA)})",
                )
            out.append(_JODA[letters])
            i += run
        else:
            out.append("%%" if char == "%" else char)
            i += 1
    return "".join(out)


def derived(table: pa.Table, columns: Sequence[TimeColumn], now_ms: int) -> pa.Table:
    """``table`` with the time columns appended (``TimePartitionError`` when a source column
    is missing or holds no time, or a column is already there). Each source's times, and
    each shared basis, are computed once for the batch."""
    times: dict[str | None, pa.Array] = {}
    bases: dict[tuple[str | None, str, int], pa.Array] = {}
    for column in columns:
        if column.name in table.column_names:
            raise TimePartitionError(
                "partition.by" if column.transform else "path.format",
                f"the time column {column.name} would replace the records' own column of that name",
            )
        basis = bases.get(column.basis_key)
        if basis is None:
            if column.source not in times:
                times[column.source] = _timestamps(table, column, now_ms)
            basis = bases[column.basis_key] = column.basis(times[column.source])
        table = table.append_column(column.name, column.render(basis))
    return table
