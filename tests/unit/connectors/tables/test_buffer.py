"""The table sinks' write buffer: when to write, redeliveries trimmed, gaps refused, closes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition
from daemon.connectors.tables.buffer import RecordBuffer
from daemon.connectors.tables.writer import FlushPolicy
from daemon.connectors.testing import sample_batch
from daemon.errors import CommitRejected

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def offsets(table: pa.Table, tp: TopicPartition) -> list[int]:
    rows = table.to_pydict()
    return [
        o
        for t, p, o in zip(
            rows["kafka_topic"], rows["kafka_partition"], rows["kafka_offset"], strict=True
        )
        if (t, p) == (tp.topic, tp.partition)
    ]


def due(buf: RecordBuffer, max_records: int, interval: float) -> bool:
    """Whether the writer would write ``buf`` now by size or age (``FlushPolicy``, no linger)."""
    policy = FlushPolicy(max_records, interval, None, max_records, 1 << 30)
    wait = policy.due_in(buf, draining=False)
    return wait is not None and wait <= 0


def test_due_by_record_count() -> None:
    buf = RecordBuffer(Clock())
    buf.add(sample_batch("t", 0, 0, 60), {})
    assert not due(buf, 100, 60.0)
    buf.add(sample_batch("t", 0, 60, 40), {})
    assert buf.rows == 100 and due(buf, 100, 60.0)


def test_due_by_age_of_the_oldest_record() -> None:
    clock = Clock()
    buf = RecordBuffer(clock)
    assert not due(buf, 100, 5.0)  # nothing buffered: never due
    buf.add(sample_batch("t", 0, 0, 1), {})
    clock.now += 4.9
    buf.add(sample_batch("t", 0, 1, 1), {})
    assert not due(buf, 100, 5.0)
    clock.now += 0.1
    assert buf.age == pytest.approx(5.0) and due(buf, 100, 5.0)
    assert due(buf, 100, 0.0)  # flush.interval.ms=0 writes every batch


def test_progress_without_rows_is_buffered_and_becomes_due() -> None:
    clock = Clock()
    buf = RecordBuffer(clock)
    # Every record of the poll was bad: no rows, but the range moves the partition on.
    empty = RecordBatch(sample_batch(count=0).table, (OffsetRange("t", 0, 0, 5),))
    buf.add(empty, {})
    clock.now += 10
    assert due(buf, 100, 10.0)
    table, ranges = buf.take()
    assert table.num_rows == 0 and ranges == (OffsetRange("t", 0, 0, 5),)


def test_take_merges_ranges_and_tables_then_clears() -> None:
    buf = RecordBuffer(Clock())
    buf.add(sample_batch("t", 0, 10, 5), {TP0: 10})
    buf.add(sample_batch("t", 1, 0, 3), {})
    buf.add(sample_batch("t", 0, 15, 5), {})
    table, ranges = buf.take()
    assert ranges == (OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 0, 3))
    assert offsets(table, TP0) == list(range(10, 20)) and offsets(table, TP1) == [0, 1, 2]
    assert buf.rows == 0 and buf.ranges == {} and not due(buf, 1, 0.0)


def test_take_leaves_out_empty_ranges() -> None:
    buf = RecordBuffer(Clock())
    buf.add(RecordBatch(sample_batch(count=0).table, (OffsetRange("t", 0, 7, 7),)), {TP0: 7})
    assert buf.take()[1] == ()


def test_value_columns_that_appear_later_are_null_before() -> None:
    buf = RecordBuffer(Clock())
    first = sample_batch("t", 0, 0, 2)
    extra = sample_batch("t", 0, 2, 2)
    extra = RecordBatch(extra.table.append_column("region", pa.array(["eu", "us"])), extra.ranges)
    buf.add(first, {})
    buf.add(extra, {})
    table, _ = buf.take()
    assert table.column("region").to_pylist() == [None, None, "eu", "us"]


def test_a_redelivery_is_trimmed_to_the_new_records() -> None:
    buf = RecordBuffer(Clock())
    buf.add(sample_batch("t", 0, 0, 10), {TP0: 5})  # 0..4 are already in the table
    assert buf.ranges[TP0] == OffsetRange("t", 0, 5, 10) and buf.rows == 5
    buf.add(sample_batch("t", 0, 8, 4), {TP0: 5})  # 8, 9 are buffered already
    table, ranges = buf.take()
    assert offsets(table, TP0) == list(range(5, 12)) and ranges == (OffsetRange("t", 0, 5, 12),)


def test_a_batch_entirely_seen_before_adds_nothing() -> None:
    buf = RecordBuffer(Clock())
    buf.add(sample_batch("t", 0, 0, 10), {TP0: 20})
    assert buf.rows == 0 and buf.take() == (pa.table({}), ())


def test_a_gap_is_refused_and_leaves_the_buffer_unchanged() -> None:
    buf = RecordBuffer(Clock())
    buf.add(sample_batch("t", 1, 0, 3), {})
    both = sample_batch("t", 1, 3, 2)
    gap = sample_batch("t", 0, 12, 2)  # the table ends at 10
    mixed = RecordBatch(pa.concat_tables([both.table, gap.table]), both.ranges + gap.ranges)
    with pytest.raises(CommitRejected, match=r"offsets 10\.\.11 would be missing"):
        buf.add(mixed, {TP0: 10})
    assert buf.rows == 3 and buf.ranges == {TP1: OffsetRange("t", 1, 0, 3)}


def test_a_first_batch_of_a_partition_never_committed_may_start_anywhere() -> None:
    buf = RecordBuffer(Clock())
    buf.add(sample_batch("t", 0, 500, 2), {})
    assert buf.ranges[TP0] == OffsetRange("t", 0, 500, 502)


def test_ranges_come_from_the_rows_when_the_batch_has_none() -> None:
    buf = RecordBuffer(Clock())
    batch = sample_batch("t", 0, 3, 4)
    buf.add(RecordBatch(batch.table), {})
    assert buf.ranges == {TP0: OffsetRange("t", 0, 3, 7)}


def test_drop_forgets_closed_partitions_only() -> None:
    clock = Clock()
    buf = RecordBuffer(clock)
    buf.add(sample_batch("t", 0, 0, 4), {})
    buf.add(sample_batch("t", 1, 0, 2), {})
    buf.drop([TP0, TopicPartition("other", 0)])
    assert buf.rows == 2 and set(buf.ranges) == {TP1}
    buf.drop([TP1])
    assert buf.rows == 0 and buf.ranges == {} and not due(buf, 1, 0.0)
