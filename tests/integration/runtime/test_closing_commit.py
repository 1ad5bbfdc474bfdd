"""Commit before close (KIP-275) on a real broker and real Spark: a ParquetSink task holds its
records in its buffer (a large ``flush.max.records``, long ``flush.interval.ms`` and
``flush.linger.ms``) until a second consumer joins its group ``connect-<name>``. The
rebalance runs the closing ``pre_commit`` (``context.is_closing``): the buffered records are
written and committed before the partitions are taken away, the group's offsets are the
table's, and whoever owns a partition next resumes after them. Rows are counted with pyarrow,
which skips the underscore-prefixed staging paths.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTP
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool
from support.tables import coordinates

from daemon.runtime.model import State

pytestmark = pytest.mark.integration

PER_PARTITION = 100


async def test_a_rebalance_commits_the_buffered_records_before_closing(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    # An earlier test may have had executors killed: timing here starts with a warm one.
    await asyncio.to_thread(runtime_pool.wait_ready, 2)
    topic = await kafka_topic(partitions=2)
    tps = [KafkaTP(topic, 0), KafkaTP(topic, 1)]
    for tp in tps:
        await produce(kafka_bootstrap, topic, PER_PARTITION, partition=tp.partition)
    table = tmp_path / "table"
    # The closing write is bounded by the graceful timeout: room for a Spark write here.
    # Heartbeats every 0.5 s: each member hears of a rebalance within half a second.
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "task.shutdown.graceful.timeout.ms": "60000",
            "consumer.heartbeat.interval.ms": "500",
        },
    )
    d = await run_daemon(props, executors=runtime_pool)
    worker = d.herder
    assert worker is not None
    name = "closing"
    await worker.create_connector(
        name,
        {
            "connector.class": "ParquetSink",
            "topics": topic,
            "tasks.max": "1",
            "path": str(table),
            "flush.max.records": "1000000",
            "flush.interval.ms": "3600000",
            "flush.linger.ms": "3600000",  # held until the rebalance closes the partitions
        },
    )
    await wait_until(
        lambda: d.metrics.totals()[0] >= 2 * PER_PARTITION, 120, "every record consumed"
    )
    assert coordinates(table) == []  # all buffered, nothing written yet
    epoch = worker.task_status(name, 0).epoch or 0

    # A second member joins the group: the task's partitions are revoked (aiokafka's eager
    # protocol revokes all), and the closing pre_commit writes what the task buffered.
    other = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=f"connect-{name}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        heartbeat_interval_ms=500,
    )
    await other.start()
    try:
        await wait_until(lambda: other.assignment(), 120, "the second member's partitions")
        landed = await wait_until(
            lambda: (r := coordinates(table)) and len(r) >= 2 * PER_PARTITION and r,
            240,
            "the buffered records written at the revoke",
        )
        assert sorted(landed) == [(p, o) for p in (0, 1) for o in range(PER_PARTITION)]
        # The group's offsets are the table's: the next owner of a partition resumes after them.
        (theirs,) = other.assignment()
        for tp in tps:
            assert (await other.committed(tp)) == PER_PARTITION
        assert await other.position(theirs) == PER_PARTITION
        # Once the assignment is done: running, with a new epoch for the partition it kept.
        await wait_until(
            lambda: (
                (s := worker.task_status(name, 0)).state is State.RUNNING and (s.epoch or 0) > epoch
            ),
            120,
            "the task running on its new assignment",
        )
        for tp in tps:
            await produce(kafka_bootstrap, topic, 50, partition=tp.partition)
    finally:
        await other.stop()  # leaves the group: the task gets both partitions back

    # The task resumes each partition at its committed offset: after a stop (whose closing
    # pre_commit writes the rest), every record is in the table exactly once.
    total = 2 * (PER_PARTITION + 50)
    await wait_until(lambda: d.metrics.totals()[0] >= total, 120, "the new records consumed")
    await worker.stop_connector(name)
    final = coordinates(table)
    assert len(final) == total and len(set(final)) == total
    assert sorted(final) == [(p, o) for p in (0, 1) for o in range(PER_PARTITION + 50)]
