"""``daemon.kafka.records``: a consumer made with ``key_deserializer=RAW`` gets aiokafka's C
records, a batch at a time, every other one aiokafka's ``ConsumerRecord``s one by one, and
both see the same offsets and positions; ``RawBatch.from_polled`` reads the C records with
the topic and partition of their poll's keys."""

from __future__ import annotations

import struct
from typing import Any

import aiokafka
import pytest
from aiokafka.consumer.fetcher import FetchResult, PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import ConsumerRecord
from aiokafka.structs import TopicPartition as KafkaTP

from daemon.connectors.records import RawBatch
from daemon.kafka.records import RAW, install
from daemon.structs import TopicPartition


def _fetched(base: int, n: int) -> MemoryRecords:
    """One record batch of ``n`` records from offset ``base``, as a fetch response holds it."""
    return MemoryRecords(_batch(base, list(range(n))))


def _batch(base: int, deltas: list[int]) -> bytes:
    """A record batch from offset ``base`` with records at ``base + d`` for each delta ``d``."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in deltas:
        headers = [("h", b"%d" % i)] if i % 2 else []
        b.append(offset=i, timestamp=1000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=headers)
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    return bytes(raw)


def _records(key_deserializer: object, base: int = 40, n: int = 3) -> list[object]:
    tp = KafkaTP("orders", 2)
    args = (None, base, key_deserializer, None, False, 0)
    return list(PartitionRecords(tp, _fetched(base, n), *args))


def test_the_version_this_relies_on() -> None:
    assert aiokafka.__version__ == "0.14.0"


def test_raw_consumers_get_the_c_records_and_the_others_consumer_records() -> None:
    install()
    install()  # once is enough; twice changes nothing
    raw = _records(RAW)
    assert [type(r).__name__ for r in raw] == ["DefaultRecord"] * 3
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in raw] == [  # type: ignore[attr-defined]
        (40, 1000, b"k0", b"v0", []),
        (41, 1001, b"k1", b"v1", [("h", b"1")]),
        (42, 1002, b"k2", b"v2", []),
    ]
    plain = _records(None)
    assert all(isinstance(r, ConsumerRecord) for r in plain)
    assert [(r.topic, r.partition, r.offset) for r in plain] == [  # type: ignore[attr-defined]
        ("orders", 2, 40),
        ("orders", 2, 41),
        ("orders", 2, 42),
    ]
    decoded = _records(lambda k: k.decode())
    assert [r.key for r in decoded] == ["k0", "k1", "k2"]  # type: ignore[attr-defined]


def test_a_poll_of_c_records_becomes_columns_in_partition_order() -> None:
    install()
    polled = {
        TopicPartition("orders", 2): _records(RAW, 40, 2),
        TopicPartition("empty", 0): [],
        TopicPartition("audit", 0): _records(RAW, 7, 1),
    }
    raw = RawBatch.from_polled(polled)  # type: ignore[arg-type]
    assert list(raw.topics) == ["audit", "orders", "orders"]
    assert list(raw.partitions) == [0, 2, 2]
    assert list(raw.offsets) == [7, 40, 41]
    assert list(raw.timestamps) == [1000, 1000, 1001]
    assert list(raw.keys) == [b"k0", b"k0", b"k1"]
    assert list(raw.values) == [b"v0", b"v0", b"v1"]
    assert raw.headers is not None
    assert [tuple(h) for h in raw.headers] == [(), (), (("h", b"1"),)]
    assert raw.timestamp_types is not None and list(raw.timestamp_types) == [0, 0, 0]


class _State:
    """A partition's state in aiokafka's assignment: what ``FetchResult`` reads and moves."""

    paused = False

    def __init__(self, position: int) -> None:
        self.position = position

    def consumed_to(self, position: int) -> None:
        self.position = position


class _Assignment:
    active = True

    def __init__(self, position: int) -> None:
        self.state = _State(position)

    def state_value(self, tp: object) -> _State:
        return self.state


#: Three batches from offset 100: dense, with gaps inside (compaction), and one whose last
#: offsets hold no record (its next offset, 120, is past its last record, 116).
BATCHES = [(100, [0, 1, 2, 3]), (104, [0, 2, 3, 7]), (112, [0, 1, 4, 7])]


def _drain(
    key_deserializer: object, fetch_offset: int, max_records: int | None, one: bool = False
) -> list[tuple[list[int], int]]:
    """Each poll's offsets and the position after it, until the fetched data is used up."""
    tp = KafkaTP("orders", 2)
    # From the batch that holds the fetch offset, as a broker answers a fetch.
    held = [(b, ds) for b, ds in BATCHES if b + ds[-1] >= fetch_offset]
    data = MemoryRecords(b"".join(_batch(base, deltas) for base, deltas in held))
    records = PartitionRecords(tp, data, None, fetch_offset, key_deserializer, None, True, 0)
    assignment = _Assignment(fetch_offset)
    result = FetchResult(tp, assignment=assignment, partition_records=records, backoff=0)
    polls: list[tuple[list[int], int]] = []
    while result.has_more():
        if one:
            got: Any = result.getone()
            offsets = [] if got is None else [got.offset]
        else:
            offsets = [r.offset for r in result.getall(max_records)]
        polls.append((offsets, assignment.state.position))
    return polls


@pytest.mark.parametrize("fetch_offset", [100, 102, 105, 108, 113, 116])
@pytest.mark.parametrize("max_records", [None, 1, 2, 3, 5, 100])
def test_raw_batches_give_the_offsets_and_positions_of_aiokafkas_own_path(
    fetch_offset: int, max_records: int | None
) -> None:
    install()
    plain = _drain(None, fetch_offset, max_records)
    assert _drain(RAW, fetch_offset, max_records) == plain
    # The fetch offset inside a batch skips its records before it; the end is the last
    # batch's next offset, past its last record.
    taken = [o for offsets, _ in plain for o in offsets]
    assert taken == [b + d for b, ds in BATCHES for d in ds if b + d >= fetch_offset]
    assert plain[-1][1] == 120


@pytest.mark.parametrize("fetch_offset", [100, 105])
def test_raw_getone_moves_the_position_after_each_record(fetch_offset: int) -> None:
    install()
    assert _drain(RAW, fetch_offset, None, one=True) == _drain(None, fetch_offset, None, one=True)


def test_a_raw_poll_runs_no_python_code_per_record() -> None:
    # The event loop's share of a poll of a RAW consumer: a fixed number of Python calls per
    # batch, however many records it holds (aiokafka's own path makes three per record: its
    # generator's resumption counts as a call).
    import sys

    install()
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    counts = []
    for n in (10, 5_000):
        tp = KafkaTP("orders", 2)
        records = PartitionRecords(tp, _fetched(0, n), None, 0, RAW, None, True, 0)
        result = FetchResult(tp, assignment=_Assignment(0), partition_records=records, backoff=0)
        calls = 0
        sys.setprofile(profile)
        try:
            got = result.getall(None)
        finally:
            sys.setprofile(None)
        assert len(got) == n
        counts.append(calls)
    assert counts[1] == counts[0] < 30, counts
