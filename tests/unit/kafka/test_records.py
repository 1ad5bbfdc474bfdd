"""``daemon.kafka.records``: a consumer made with ``key_deserializer=RAW`` gets aiokafka's C
records, every other one aiokafka's ``ConsumerRecord``s; and ``RawBatch.from_polled`` reads
the C records with the topic and partition of their poll's keys."""

from __future__ import annotations

import struct

import aiokafka
from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import ConsumerRecord
from aiokafka.structs import TopicPartition as KafkaTP

from daemon.connectors.records import RawBatch
from daemon.kafka.records import RAW, install
from daemon.structs import TopicPartition


def _fetched(base: int, n: int) -> MemoryRecords:
    """One record batch of ``n`` records from offset ``base``, as a fetch response holds it."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(n):
        headers = [("h", b"%d" % i)] if i % 2 else []
        b.append(offset=i, timestamp=1000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=headers)
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base)
    return MemoryRecords(bytes(raw))


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
    assert raw.headers is not None and list(raw.headers) == [(), (), (("h", b"1"),)]
    assert raw.timestamp_types is not None and list(raw.timestamp_types) == [0, 0, 0]
