"""Issue 13 item 1: a lost or different ``state.dir`` does not brick a connector.

Epochs are counted in the daemon's state directory, but the table's commit log is the
authority: a ParquetSink runs in a daemon with state directory S1 until its epoch is 4, then a
daemon with a fresh state directory S2 (its counter starts at 1 again) runs the same connector
on the same table. Its task raises its epoch above the table's last one when it opens its
partitions, runs, and every record is in the table exactly once (pyarrow: rows == distinct
``(kafka_partition, kafka_offset)``). Before the fix the task failed at once with ``CommitRejected
… epoch 2 may not write …: epoch 4 already has (this incarnation is a zombie …)``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool
from support.tables import committed

from daemon.runtime.model import State
from daemon.storage.commitlog import CommitLog

pytestmark = pytest.mark.integration

NAME = "lost-state"


def rows(table: Path) -> list[tuple[int, int]]:
    data = ds.dataset(table, format="parquet").to_table(columns=["kafka_partition", "kafka_offset"])
    return list(
        zip(
            data.column("kafka_partition").to_pylist(),
            data.column("kafka_offset").to_pylist(),
            strict=True,
        )
    )


async def test_a_fresh_state_dir_takes_its_epoch_above_the_tables(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    await asyncio.to_thread(runtime_pool.wait_ready, 2)
    topic = await kafka_topic(partitions=2)
    table = tmp_path / "table"
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
    }

    # Daemon 1, state S1: run, restart the task once (epochs 1+2, then 3+4), write records.
    first = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "s1"), executors=runtime_pool
    )
    assert first.herder is not None
    await first.herder.create_connector(NAME, config)
    sent = await produce(kafka_bootstrap, topic, 100)
    await wait_until(lambda: committed(table) == sent, 120, f"{sent} offsets committed")
    await first.herder.restart_task(NAME, 0)
    sent += await produce(kafka_bootstrap, topic, 100)
    await wait_until(lambda: committed(table) == sent, 120, f"{sent} offsets committed")
    old_epoch = first.herder.task_status(NAME, 0).epoch
    assert old_epoch is not None and old_epoch > 2
    await first.shutdown()

    # Daemon 2, a fresh state S2 on the same table: its counter starts at 1 again.
    second = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "s2"), executors=runtime_pool
    )
    worker = second.herder
    assert worker is not None
    await worker.create_connector(NAME, config)
    sent += await produce(kafka_bootstrap, topic, 100)

    def caught_up() -> bool:
        status = worker.task_status(NAME, 0)
        assert status.state is not State.FAILED, status.trace
        return committed(table) == sent

    await wait_until(caught_up, 120, f"{sent} offsets committed by daemon 2")
    status = worker.task_status(NAME, 0)
    assert status.state is State.RUNNING, status.trace
    assert status.epoch is not None and status.epoch > old_epoch
    await worker.stop_connector(NAME)

    landed = rows(table)
    assert len(landed) == sent and len(set(landed)) == sent
    with CommitLog(table) as log:
        epochs = [r.epoch or 0 for r in log.records() if r.kind in ("commit", "fence")]
    assert epochs == sorted(epochs), epochs  # the newest starter always held the newest epoch
    assert epochs[-1] == status.epoch and epochs[-1] > old_epoch
