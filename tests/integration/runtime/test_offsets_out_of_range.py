"""Issue 16 item 3: offsets out of range are explicit (``errors.offset.out.of.range``).

A ParquetSink commits 50 records of each of two partitions, then its daemon shuts down; 50 more
records go to each partition and retention-like deletion (``DeleteRecords`` through the admin
client) removes partition 0's offsets below 80, so the table's committed offset 50 is below the
log start. Started again:

- ``fail`` (the default): the task FAILS, not restarted, with ``OffsetOutOfRange`` naming the
  partition, the committed offset 50 and the log start 80; the table has no skip record.
- ``earliest``: the task continues from 80; ``connectd_offsets_skipped_total`` counts 30 for
  partition 0; the commit log has a ``skip`` record for 50..80 with its reason; the table holds
  rows == distinct (partition, offset) == what remains in Kafka (0..49 and 80..99 of partition
  0, 0..99 of partition 1).

Before the change the consumer's ``auto.offset.reset=earliest`` moved partition 0 to 80 silently
and the sink's buffer refused the gap (``CommitRejected``), for any policy.

And ``auto.offset.reset`` keeps its meaning for a partition with no committed offset:
``latest`` skips what was in the topic before the task started (aiokafka now runs with
no automatic reset; connectd applies ``auto.offset.reset`` itself).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, put_offsets, wait_until, worker_properties
from support.kafka import delete_before, produce_to
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool
from support.tables import committed

from daemon.connectors.records import TopicPartition
from daemon.runtime.model import State
from daemon.storage.commitlog import CommitLog

pytestmark = pytest.mark.integration

NAME = "gap"


def pairs(table: Path) -> list[tuple[int, int]]:
    data = ds.dataset(table, format="parquet").to_table(columns=["kafka_partition", "kafka_offset"])
    return list(
        zip(
            data.column("kafka_partition").to_pylist(),
            data.column("kafka_offset").to_pylist(),
            strict=True,
        )
    )


async def test_out_of_range_fails_or_skips_explicitly(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="connectd.task")
    await asyncio.to_thread(runtime_pool.wait_ready, 2)
    topic = await kafka_topic(partitions=2)
    table = tmp_path / "table"
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "errors.restart.backoff.max.ms": "1000",
    }
    props = worker_properties(kafka_bootstrap, tmp_path / "state")

    # 1. Commit offsets 0..49 of both partitions, then stop.
    first = await run_daemon(props, executors=runtime_pool)
    assert first.herder is not None
    await first.herder.create_connector(NAME, config)
    for p in (0, 1):
        await produce_to(kafka_bootstrap, topic, p, 0, 50)
    await wait_until(lambda: committed(table) == 100, 120, "100 offsets committed")
    await first.shutdown()

    # 2. 50 more each; partition 0 loses offsets 0..79 (the table has up to 49).
    for p in (0, 1):
        await produce_to(kafka_bootstrap, topic, p, 50, 50)
    assert await delete_before(kafka_bootstrap, topic, 0, 80) == 80

    # 3. fail (the default): FAILED, not restarted, naming partition, offset and log start.
    second = await run_daemon(props, executors=runtime_pool)
    worker = second.herder
    assert worker is not None
    await worker.put_connector_config(NAME, config)

    def failed() -> str | None:
        status = worker.task_status(NAME, 0)
        trace = status.trace or ""
        return trace if status.state is State.FAILED and "automatically" in trace else None

    trace = await wait_until(failed, 120, "the task FAILED for good")
    assert "OffsetOutOfRange" in trace, trace
    assert f"partition {topic}-0: the committed offset 50 is below the log start 80" in trace
    assert "errors.offset.out.of.range" in trace
    with CommitLog(table) as log:
        assert not [r for r in log.records() if r.kind == "skip"]
        assert log.committed_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 50}
    skipped = second.metrics.offsets_skipped.labels(NAME, topic, "0")
    assert skipped._value.get() == 0

    # 4. earliest: continue from 80, count 30, record the skip in the commit log.
    await worker.put_connector_config(NAME, {**config, "errors.offset.out.of.range": "earliest"})
    await wait_until(lambda: committed(table) == 200, 120, "both partitions at offset 100")
    status = worker.task_status(NAME, 0)
    assert status.state is State.RUNNING, status.trace
    assert skipped._value.get() == 30
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"partition {topic}-0: offsets 50..79" in m and "30 offsets skipped" in m for m in warned
    )
    with CommitLog(table) as log:
        skips = [r for r in log.records() if r.kind == "skip"]
    assert len(skips) == 1, skips
    (gap,) = skips[0].ranges
    assert (gap.topic, gap.partition, gap.start, gap.end) == (topic, 0, 50, 80)
    assert skips[0].connector == NAME and "retention" in (skips[0].reason or "")
    await worker.stop_connector(NAME)

    landed = pairs(table)
    expected = {(0, o) for o in [*range(50), *range(80, 100)]} | {(1, o) for o in range(100)}
    assert len(landed) == len(set(landed)) == len(expected) == 170
    assert set(landed) == expected


async def test_auto_offset_reset_still_applies_without_a_committed_offset(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    await produce_to(kafka_bootstrap, topic, 0, 0, 10)  # before the task: never delivered
    daemon = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"), executors=plain_pool, rest=False
    )
    assert daemon.herder is not None
    key = f"latest-{topic}"
    await daemon.herder.create_connector(
        "latest",
        {
            "connector.class": "support.daemon:RecordingSink",
            "topics": topic,
            "record.key": key,
            "consumer.override.auto.offset.reset": "latest",
        },
    )
    sent = 10

    async def delivered() -> list[tuple[str, int, int]]:
        nonlocal sent
        status = daemon.herder.task_status("latest", 0) if daemon.herder else None
        assert status is None or status.state is not State.FAILED, status.trace
        got = put_offsets(key)
        if not got:  # the task resets to the end once it has the partition: keep producing
            await produce_to(kafka_bootstrap, topic, 0, sent, 1)
            sent += 1
        return got

    got = await wait_until(delivered, 60, "a record delivered", interval=0.3)
    assert min(o for _, _, o in got) >= 10, got  # nothing from before the task started
