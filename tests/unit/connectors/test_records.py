"""Records, ranges and batches."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest
from support.converters import PollConverter

from daemon.connectors import (
    OffsetRange,
    RawBatch,
    RecordBatch,
    SinkRecord,
    TimestampType,
    TopicPartition,
    make_converter,
)
from daemon.connectors.records import record_spans


def test_topic_partition_is_hashable_ordered_and_frozen() -> None:
    a, b, c = TopicPartition("a", 2), TopicPartition("a", 10), TopicPartition("b", 0)
    assert sorted([c, b, a]) == [a, b, c]
    assert {a: 1}[TopicPartition("a", 2)] == 1
    assert str(b) == "a-10"
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.partition = 3  # type: ignore[misc]


def test_offset_range() -> None:
    r = OffsetRange("t", 1, 5, 9)
    assert r.tp == TopicPartition("t", 1) and len(r) == 4
    assert len(OffsetRange("t", 1, 5, 5)) == 0
    with pytest.raises(ValueError, match="invalid offset range"):
        OffsetRange("t", 1, 9, 5)
    with pytest.raises(ValueError, match="invalid offset range"):
        OffsetRange("t", 1, -1, 5)


def _batch(values: list[bytes | None], **options: str) -> RecordBatch:
    n = len(values)
    conv = PollConverter(
        make_converter("string", {}, is_key=True),
        make_converter("json", {"schemas.enable": "false", **options}, is_key=False),
    )
    raw = RawBatch(
        ["t"] * n,
        [i % 2 for i in range(n)],
        list(range(100, 100 + n)),
        [1000 + i for i in range(n)],
        [b"k%d" % i for i in range(n)],
        values,
        [[("h", b"%d" % i)] for i in range(n)],
        [TimestampType.LOG_APPEND_TIME] * n,
    )
    return conv.convert(raw).batch


def test_records_text_mode_decodes_json() -> None:
    batch = _batch([b'{"a": [1, 2]}', None, b'"s"'])
    assert len(batch) == 3
    recs = list(batch.records())
    assert recs[0] == SinkRecord(
        "t", 0, 100, 1000, TimestampType.LOG_APPEND_TIME, "k0", {"a": [1, 2]}, (("h", b"0"),)
    )
    assert recs[1].value is None and recs[1].tp == TopicPartition("t", 1)
    assert recs[2].value == "s"


def test_records_fields_mode_rebuilds_values_and_tombstones() -> None:
    batch = _batch([b'{"a": 1, "b": {"x": 1}}', None, b'{"a": 2}'], mode="infer")
    assert [r.value for r in batch.records()] == [
        {"a": 1, "b": {"x": 1}},
        None,
        {"a": 2, "b": None},
    ]


def test_partitions_and_with_ranges() -> None:
    batch = _batch([b"1", b"2", b"3"])
    assert batch.partitions == {TopicPartition("t", 0), TopicPartition("t", 1)}
    moved = batch.with_ranges([OffsetRange("t", 1, 50, 102), OffsetRange("t", 0, 90, 103)])
    assert moved.ranges == (OffsetRange("t", 0, 90, 103), OffsetRange("t", 1, 50, 102))
    assert moved.table is batch.table


def test_record_spans() -> None:
    table = pa.table(
        {
            "kafka_topic": ["a", "a", "b", "a"],
            "kafka_partition": pa.array([0, 0, 0, 1], pa.int32()),
            "kafka_offset": pa.array([5, 9, 3, 0], pa.int64()),
        }
    )
    assert record_spans(table) == {
        TopicPartition("a", 0): OffsetRange("a", 0, 5, 10),
        TopicPartition("b", 0): OffsetRange("b", 0, 3, 4),
        TopicPartition("a", 1): OffsetRange("a", 1, 0, 1),
    }
    assert record_spans(table.slice(0, 0)) == {}
