"""Connect's Filter, DropHeaders and predicates on real parts (issue 30): a ParquetSink connector
with a chain of three Filters and a DropHeaders reads two topics from a real broker, in a daemon
with real executors.

- ``tombstones``: Filter with RecordIsTombstone drops records whose value is null;
- ``skipped``: Filter with HasHeaderKey drops records carrying a ``skip`` header;
- ``others``: Filter with TopicNameMatches, negated, drops every topic but the one it names;
- ``untraced``: DropHeaders removes the ``trace`` header of the records left.

The table holds exactly the records that pass (checked row by row against the records
produced), and the commit log covers every offset of both topics: the dropped records are
committed past, as Connect commits past records a transform dropped.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory
from support.tables import committed, coordinates

pytestmark = pytest.mark.integration

RECORDS = 60


def record(i: int) -> tuple[bytes | None, list[tuple[str, bytes]]]:
    """Record ``i``'s value (None: a tombstone) and headers."""
    value = None if i % 5 == 0 else b"value-%d" % i
    headers = [("skip", b"yes")] if i % 7 == 0 else [("trace", b"%d" % i)]
    return value, headers


def passes(i: int) -> bool:
    value, headers = record(i)
    return value is not None and not any(k == "skip" for k, _ in headers)


async def test_a_chain_of_filters_writes_only_what_passes(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    kept, other = await kafka_topic(partitions=1), await kafka_topic(partitions=1)
    table = tmp_path / "table"
    sink = {
        "name": "filtered",
        "connector.class": "ParquetSink",
        "topics": f"{kept},{other}",
        "path": str(table),
        "flush.interval.ms": "500",
        "transforms": "tombstones,skipped,others,untraced",
        "transforms.tombstones.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.tombstones.predicate": "isTombstone",
        "transforms.skipped.type": "Filter",
        "transforms.skipped.predicate": "hasSkip",
        "transforms.others.type": "Filter",
        "transforms.others.predicate": "isKept",
        "transforms.others.negate": "true",
        "transforms.untraced.type": "DropHeaders",
        "transforms.untraced.headers": "trace",
        "predicates": "isTombstone,hasSkip,isKept",
        "predicates.isTombstone.type": "RecordIsTombstone",
        "predicates.hasSkip.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.hasSkip.name": "skip",
        "predicates.isKept.type": "TopicNameMatches",
        "predicates.isKept.pattern": kept.replace(".", "\\."),
    }
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    assert d.herder is not None
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for topic in (kept, other):
            for i in range(RECORDS):
                value, headers = record(i)
                await producer.send_and_wait(topic, value=value, key=b"k%d" % i, headers=headers)
    finally:
        await producer.stop()

    await wait_until(lambda: committed(table) == 2 * RECORDS, 120, "both topics committed past")
    rows = sorted(coordinates(table))
    assert rows == [(0, i) for i in range(RECORDS) if passes(i)]
    assert 0 < len(rows) < RECORDS  # some passed, some were dropped
    headers = ds.dataset(table, format="parquet").to_table(columns=["headers"]).column(0)
    assert headers.to_pylist() == [[]] * len(rows)  # their trace headers dropped
