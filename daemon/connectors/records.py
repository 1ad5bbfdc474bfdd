"""What a sink task receives: topic-partitions, offset ranges, record batches and records.

A poll's records travel as one columnar ``RecordBatch`` (a ``pyarrow.Table`` built by the
converters, see ``converters.py``), because the table is what gets handed to a Spark executor.
``SinkRecord`` objects, Connect's row view, are built only when a connector asks for them
(``RecordBatch.records()``).
"""

from __future__ import annotations

import enum
import json
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import pyarrow as pa
import pyarrow.compute as pc

# Plain coordinates live at the bottom of the layers, so storage can name them too.
from daemon.structs import OffsetRange as OffsetRange
from daemon.structs import TopicPartition as TopicPartition

#: Column names every batch table starts with: the Kafka coordinates of each row.
COORDINATE_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")
#: The topic a router (RegexRouter, TimestampRouter) gave a row, beside its ``kafka_topic``,
#: which stays the topic it was read from: offsets, commits and fencing keep that one
#: (Connect's original topic, KIP-793). A table sink writes the routed one as ``kafka_topic``
#: and never writes this column.
ROUTED_TOPIC = "__routed_topic"
#: Names a value field cannot use as a column name (it is stored as ``value_<name>`` instead).
RESERVED_COLUMNS = frozenset((*COORDINATE_COLUMNS, "key", "value", "headers", ROUTED_TOPIC))


def value_column_names(fields: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """Value field → its column name: the field's own, or ``value_<name>`` (then ``_``-prefixed)
    where that is a reserved or ``taken`` column."""
    names: dict[str, str] = {}
    used = set(RESERVED_COLUMNS) | set(taken)
    for f in fields:
        col = f if f not in used else f"value_{f}"
        while col in used:
            col = f"_{col}"
        used.add(col)
        names[f] = col
    return names


class TimestampType(enum.IntEnum):
    """Kafka's record timestamp types, with Kafka's numeric codes."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class SinkRecord:
    """One Kafka record as a connector sees it, after conversion (Connect's ``SinkRecord``).

    ``timestamp`` is in milliseconds since the epoch (``None`` when the record has none);
    ``key`` and ``value`` are converted values (``value`` is ``None`` for a tombstone);
    ``raw_key``/``raw_value`` are the original bytes when the runtime kept them.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    timestamp_type: TimestampType
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...] = ()
    raw_key: bytes | None = None
    raw_value: bytes | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class FetchedRecord(Protocol):
    """What ``RawBatch.from_polled`` reads from a record: aiokafka's C record as a task's
    consumer hands it over (``daemon.kafka.records``), or a ``ConsumerRecord``."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


_OFFSET = operator.attrgetter("offset")
_TIMESTAMP = operator.attrgetter("timestamp")
_TIMESTAMP_TYPE = operator.attrgetter("timestamp_type")
_KEY = operator.attrgetter("key")
_VALUE = operator.attrgetter("value")
_HEADERS = operator.attrgetter("headers")


class ConsumerRecordLike(FetchedRecord, Protocol):
    """What ``RawBatch.from_records`` reads from a record (aiokafka's ``ConsumerRecord`` fits)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RawBatch:
    """One poll's raw records, column by column (all sequences have the same length).

    This is the converters' input. A timestamp below 0 (Kafka's "no timestamp") or ``None``
    becomes a null timestamp.
    """

    topics: Sequence[str]
    partitions: Sequence[int]
    offsets: Sequence[int]
    timestamps: Sequence[int | None]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None
    timestamp_types: Sequence[int] | None = None

    def __post_init__(self) -> None:
        n = len(self.offsets)
        lengths = [len(self.topics), len(self.partitions), len(self.timestamps)]
        lengths += [len(self.keys), len(self.values)]
        lengths += [len(s) for s in (self.headers, self.timestamp_types) if s is not None]
        if any(m != n for m in lengths):
            raise ValueError(f"RawBatch columns have different lengths: {[n, *lengths]}")

    def __len__(self) -> int:
        return len(self.offsets)

    @classmethod
    def from_polled(cls, polled: Mapping[TopicPartition, Sequence[FetchedRecord]]) -> RawBatch:
        """One poll's records, partition by partition in ``TopicPartition`` order: each
        partition's topic and partition are its key's (a task's consumer hands over aiokafka's
        records, which carry neither: ``daemon.kafka.records``)."""
        order = sorted(tp for tp, rs in polled.items() if rs)
        rs = [r for tp in order for r in polled[tp]]
        topics: list[str] = []
        partitions: list[int] = []
        for tp in order:
            n = len(polled[tp])
            topics += [tp.topic] * n
            partitions += [tp.partition] * n
        return cls(
            topics,
            partitions,
            list(map(_OFFSET, rs)),
            list(map(_TIMESTAMP, rs)),
            list(map(_KEY, rs)),
            list(map(_VALUE, rs)),
            list(map(_HEADERS, rs)),  # each record's own list of (key, value) pairs
            list(map(_TIMESTAMP_TYPE, rs)),
        )

    @classmethod
    def from_records(cls, records: Iterable[ConsumerRecordLike]) -> RawBatch:
        rs = list(records)
        return cls(
            [r.topic for r in rs],
            [r.partition for r in rs],
            [r.offset for r in rs],
            [r.timestamp for r in rs],
            [r.key for r in rs],
            [r.value for r in rs],
            [tuple(r.headers) for r in rs],
            [r.timestamp_type for r in rs],
        )


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that could not be converted; the runtime applies ``errors.tolerance`` to it.

    ``error`` is the message, ``exception_class`` the qualified name of the exception type,
    ``stage`` which converter failed (``key``, ``value``, or ``header``: the header converter,
    ``transform`` then naming its class), or ``transformation`` when a transform refused the
    converted record (``transform``: its class, ``error`` names its alias). The raw bytes and
    headers are kept for the dead-letter queue.
    """

    topic: str
    partition: int
    offset: int
    error: str
    exception_class: str
    stage: Literal["key", "value", "header", "transformation"]
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    transform: str | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, eq=False)
class RecordBatch:
    """One poll's good records as an Arrow table, and the offset ranges the batch covers.

    ``table`` has the columns ``kafka_topic`` (string), ``kafka_partition`` (int32),
    ``kafka_offset`` (int64), ``kafka_timestamp`` (timestamp[ms, UTC]), ``key``, then either
    ``value`` or one column per value field (see ``value_columns``), then ``headers``
    (list<struct<key: string, value: binary>>). Rows are in poll order.

    ``ranges`` covers every record of the poll, including records the converters rejected
    (those are not in the table), so committing ``ranges`` moves past them.

    ``value_columns`` maps value field name → column name when the value was projected into
    columns; ``None`` when the whole value is the ``value`` column. ``json_columns`` are string
    columns holding JSON text, decoded by ``records()``. ``tombstones`` marks rows whose value
    was null when the value is projected into columns (otherwise a null ``value`` says so).
    ``timestamp_types`` (int8, Kafka's codes) is kept beside the table, not in it.
    ``schemas`` names the sides (``key``, ``value``) whose values carry a Connect schema (a
    typed converter made them): transforms apply Connect's rules for values with a schema there.
    """

    table: pa.Table
    ranges: tuple[OffsetRange, ...] = ()
    value_columns: Mapping[str, str] | None = None
    json_columns: frozenset[str] = frozenset()
    tombstones: pa.Array | None = None
    timestamp_types: pa.Array | None = None
    schemas: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """Topic-partitions this batch covers (from ``ranges``, else from the rows)."""
        if self.ranges:
            return frozenset(r.tp for r in self.ranges)
        return frozenset(record_spans(self.table))

    def topics(self) -> pa.Array:
        """Each row's topic as the sink sees it: routed by a transform, else read from."""
        t = self.table
        name = ROUTED_TOPIC if ROUTED_TOPIC in t.column_names else "kafka_topic"
        return t.column(name).combine_chunks()

    def with_table(self, table: pa.Table) -> RecordBatch:
        """This batch with ``table`` for its rows (the same rows, in order: columns changed)."""
        if table.num_rows != self.table.num_rows:
            raise ValueError(
                f"with_table keeps the rows: {table.num_rows} rows given for {len(self)}; use"
                " filter() to leave rows out"
            )
        return replace(self, table=table)

    def filter(self, keep: pa.BooleanArray) -> RecordBatch:
        """This batch with the rows where ``keep`` is true only (its ranges still cover the
        others, so a commit moves past them)."""
        return replace(
            self,
            table=self.table.filter(keep),
            tombstones=None if self.tombstones is None else self.tombstones.filter(keep),
            timestamp_types=(
                None if self.timestamp_types is None else self.timestamp_types.filter(keep)
            ),
        )

    def with_ranges(self, ranges: Iterable[OffsetRange]) -> RecordBatch:
        """This batch with ``ranges`` replaced (e.g. by ranges from consumer positions)."""
        return replace(self, ranges=tuple(sorted(ranges)))

    def records(self) -> Iterator[SinkRecord]:
        """The rows as ``SinkRecord`` objects, built lazily (per row Python work: use sparingly)."""
        t = self.table
        topics = self.topics().to_pylist()
        parts = t.column("kafka_partition").to_pylist()
        offsets = t.column("kafka_offset").to_pylist()
        stamps = pc.cast(t.column("kafka_timestamp"), pa.int64()).to_pylist()
        keys = self._decoded("key")
        headers = t.column("headers").to_pylist()
        types = (
            self.timestamp_types.to_pylist()
            if self.timestamp_types is not None
            else [TimestampType.CREATE_TIME] * t.num_rows
        )
        values = self._values()
        for i in range(t.num_rows):
            hdrs = tuple((h["key"], h["value"]) for h in headers[i] or ())
            yield SinkRecord(
                topics[i],
                parts[i],
                offsets[i],
                stamps[i],
                TimestampType(types[i]) if types[i] is not None else TimestampType.CREATE_TIME,
                keys[i],
                values[i],
                hdrs,
            )

    def value_objects(self) -> list[Any]:
        """Each row's value as ``records()`` gives it (a map of the fields for a value in
        columns, None for a tombstone)."""
        return self._values()

    def _decoded(self, column: str) -> list[Any]:
        values: list[Any] = self.table.column(column).to_pylist()
        if column in self.json_columns:
            return [None if v is None else json.loads(v) for v in values]
        return values

    def _values(self) -> list[Any]:
        if self.value_columns is None:
            return self._decoded("value")
        cols = {name: self._decoded(col) for name, col in self.value_columns.items()}
        dead = (
            self.tombstones.to_pylist()
            if self.tombstones is not None
            else [False] * self.table.num_rows
        )
        return [
            None if dead[i] else {name: vals[i] for name, vals in cols.items()}
            for i in range(self.table.num_rows)
        ]


def routed(table: pa.Table) -> pa.Table:
    """``table`` as a sink writes it: ``kafka_topic`` the routed topic, no ``ROUTED_TOPIC``."""
    if ROUTED_TOPIC not in table.column_names:
        return table
    index = table.schema.get_field_index("kafka_topic")
    topics = table.column(ROUTED_TOPIC)
    table = table.set_column(index, table.schema.field(index), topics)
    return table.drop_columns([ROUTED_TOPIC])


def record_spans(table: pa.Table) -> dict[TopicPartition, OffsetRange]:
    """Per topic-partition, the span ``[min offset, max offset + 1)`` of the table's rows.

    Vectorised (a group-by); this is the records' own span, which may start after the consumer
    position the batch really started from (see ``OffsetRange``).
    """
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(["kafka_topic", "kafka_partition"]).aggregate(
        [("kafka_offset", "min"), ("kafka_offset", "max")]
    )
    spans: dict[TopicPartition, OffsetRange] = {}
    for row in grouped.to_pylist():
        tp = TopicPartition(row["kafka_topic"], row["kafka_partition"])
        spans[tp] = OffsetRange(
            tp.topic, tp.partition, row["kafka_offset_min"], row["kafka_offset_max"] + 1
        )
    return spans
