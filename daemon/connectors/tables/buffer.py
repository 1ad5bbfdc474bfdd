"""A table sink task's write buffer: the batches not written yet, and the offset ranges they
cover.

Everything here is columnar (Arrow compute over whole tables, never a Python loop over rows)
and synchronous; it runs on the event loop and does no I/O.

Each partition's buffered range must continue exactly where the partition's data ends (its
last buffered range, else its committed offset). A batch that repeats records already buffered
or committed (a redelivery) is trimmed to the new records; one that skips offsets is refused
before anything is written, because the commit log would refuse it anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition, record_spans
from daemon.errors import CommitRejected


class RecordBuffer:
    """Buffered rows (a list of Arrow tables) and per-partition offset ranges."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tables: list[pa.Table] = []
        self._ranges: dict[TopicPartition, OffsetRange] = {}
        self._since: float | None = None
        self._last: float | None = None  # when progress last arrived
        self.rows = 0
        self.nbytes = 0  # of the buffered Arrow tables

    @property
    def ranges(self) -> dict[TopicPartition, OffsetRange]:
        """Per partition, the offsets buffered (possibly empty ranges)."""
        return dict(self._ranges)

    @property
    def age(self) -> float:
        """Seconds since the oldest unwritten progress arrived (0 when there is none)."""
        return 0.0 if self._since is None else self._clock() - self._since

    @property
    def idle(self) -> float:
        """Seconds since unwritten progress last arrived (0 when there is none)."""
        return 0.0 if self._since is None or self._last is None else self._clock() - self._last

    @property
    def waiting(self) -> bool:
        """Progress (records, or offsets passed without records) waits to be written."""
        return self._since is not None

    def add(self, batch: RecordBatch, committed: Mapping[TopicPartition, int]) -> None:
        """Buffer ``batch``. ``committed``: next offset per partition durable in the sink.

        Raises ``CommitRejected`` (buffer unchanged) if a range starts after the partition's
        data ends: those offsets would be missing from the table.
        """
        ranges = batch.ranges or tuple(record_spans(batch.table).values())
        accepted: dict[TopicPartition, OffsetRange] = {}
        trims: dict[TopicPartition, int] = {}
        for r in ranges:
            pending = self._ranges.get(r.tp)
            expected = pending.end if pending is not None else committed.get(r.tp)
            if expected is None or r.start == expected:
                accepted[r.tp] = r
            elif r.start > expected:
                raise CommitRejected(
                    f"{r.tp}: records start at offset {r.start} but the table's data ends at "
                    f"{expected}, so offsets {expected}..{r.start - 1} would be missing (deleted "
                    "by retention, or the consumer did not seek to the committed offset). To "
                    "skip them on purpose, stop the connector and set the partition's offset "
                    "with the offsets API (PATCH /connectors/<name>/offsets)"
                )
            else:  # a redelivery: keep only what is new
                trims[r.tp] = expected
                if r.end > expected:
                    accepted[r.tp] = OffsetRange(r.topic, r.partition, expected, r.end)
        table = _drop_before(batch.table, trims) if trims else batch.table
        now = self._clock()
        for tp, r in accepted.items():
            pending = self._ranges.get(tp)
            start = r.start if pending is None else pending.start
            self._ranges[tp] = OffsetRange(tp.topic, tp.partition, start, r.end)
            if len(r):
                self._last = now
                if self._since is None:
                    self._since = now
        if table.num_rows:
            self._tables.append(table)
            self.rows += table.num_rows
            self.nbytes += table.nbytes
            self._last = now
            if self._since is None:
                self._since = now

    def take(self) -> tuple[pa.Table, tuple[OffsetRange, ...]]:
        """The buffered rows as one table and the non-empty ranges they cover; clears."""
        tables, ranges = self._tables, self._ranges
        self.clear()
        if not tables:
            table = pa.table({})
        elif len(tables) == 1:
            table = tables[0]
        else:
            # Value columns may appear over time (JSON schema inference): missing ones are null.
            table = pa.concat_tables(tables, promote_options="default")
        return table, tuple(sorted(r for r in ranges.values() if len(r)))

    def drop(self, partitions: Collection[TopicPartition]) -> None:
        """Forget the rows and ranges of ``partitions`` (they were closed)."""
        gone = set(partitions) & set(self._ranges)
        if not gone:
            return
        for tp in gone:
            del self._ranges[tp]
        tables = [_without(t, gone) for t in self._tables]
        self._tables = [t for t in tables if t.num_rows]
        self.rows = sum(t.num_rows for t in self._tables)
        self.nbytes = sum(t.nbytes for t in self._tables)
        if not self._tables and not any(len(r) for r in self._ranges.values()):
            self._since = None

    def clear(self) -> None:
        self._tables, self._ranges, self._since, self._last = [], {}, None, None
        self.rows = self.nbytes = 0


def _matches(table: pa.Table, tp: TopicPartition) -> pa.ChunkedArray:
    return pc.and_(
        pc.equal(table.column("kafka_topic"), pa.scalar(tp.topic, pa.string())),
        pc.equal(table.column("kafka_partition"), pa.scalar(tp.partition, pa.int32())),
    )


def _drop_before(table: pa.Table, trims: Mapping[TopicPartition, int]) -> pa.Table:
    """``table`` without the rows of each partition in ``trims`` below its offset."""
    if not table.num_rows:
        return table
    drop = None
    for tp, offset in trims.items():
        old = pc.and_(_matches(table, tp), pc.less(table.column("kafka_offset"), offset))
        drop = old if drop is None else pc.or_(drop, old)
    return table.filter(pc.invert(drop))


def _without(table: pa.Table, partitions: Collection[TopicPartition]) -> pa.Table:
    drop = None
    for tp in partitions:
        match = _matches(table, tp)
        drop = match if drop is None else pc.or_(drop, match)
    return table if drop is None else table.filter(pc.invert(drop))
