"""A rebalance hands partitions to a task that started before their last owner: still no zombie.

Epochs come from one counter per connector, and the sink's commit log fences each partition
with the epoch of the task that opened it. Here task 1 (the newer epoch) opens its partitions
and then fails; the group gives them to task 0, which started *before* task 1. With the epoch
it started with, the commit log would take task 0 for a zombie and refuse it. So each task draws
a fresh epoch whenever it is given new partitions (DESIGN.md: whoever owns a partition now holds
a higher epoch than every earlier owner).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.connectors.records import TopicPartition
from daemon.runtime.model import State
from daemon.storage.commitlog import CommitLog

pytestmark = pytest.mark.integration


async def test_partitions_moving_to_an_older_task_are_not_refused_as_zombies(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=4)
    table = tmp_path / "ledger"
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props, executors=plain_pool)
    worker = daemon.herder
    assert worker is not None
    config = {
        "connector.class": "support.daemon:LedgerSink",
        "topics": topic,
        "tasks.max": "2",
        "path": str(table),
        "ledger.fail.task": "1",
        "errors.restart.enabled": "false",
    }
    await worker.create_connector("moves", config)
    sent = 0

    async def task_1_failed() -> bool:
        # Keep records coming until task 1 has been given partitions with records and failed:
        # task 0 may have joined the group first and drained an early batch on its own.
        nonlocal sent
        if worker.connector_status("moves").tasks[1].state is State.FAILED:
            return True
        sent += await produce(kafka_bootstrap, topic, 100)
        return False

    await wait_until(task_1_failed, 120, "task 1 failed on purpose", interval=0.5)

    def committed() -> int:
        with CommitLog(table) as log:
            offsets = log.committed_offsets()
        return sum(offsets.get(TopicPartition(topic, p), 0) for p in range(4))

    await wait_until(lambda: committed() == sent, 120, f"{sent} offsets committed by task 0")
    status = worker.connector_status("moves")
    assert status.tasks[1].state is State.FAILED
    assert status.tasks[1].trace is not None and "fails on purpose" in status.tasks[1].trace
    assert status.tasks[0].state is State.RUNNING, status.tasks[0].trace
    with CommitLog(table) as log:
        records = log.records()
    fenced_by_1 = {tp for r in records if r.kind == "fence" and r.task == 1 for tp, _ in r.offsets}
    assert fenced_by_1, "task 1 claimed partitions before it failed"
    commits = [r for r in records if r.kind == "commit"]
    assert {r.task for r in commits} == {0}
    assert sum(r.end - r.start for c in commits for r in c.ranges) == sent  # each offset once
    assert {rng.tp for c in commits for rng in c.ranges} >= fenced_by_1
