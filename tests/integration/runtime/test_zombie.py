"""Zombie fencing through the runtime: after a restart, the old incarnation's commit is refused.

The runtime hands each incarnation an epoch from the connector's persisted counter; the sink
(``support.daemon:LedgerSink``: the exactly-once commit log, without Spark) fences its
partitions with it on ``open``. A commit the old incarnation still tries afterwards — a zombie
that outlived its stop — is refused by the commit log, even though it continues the offsets
exactly. And the old incarnation's executor door is closed: it cannot even start a write.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.daemon import DaemonFactory, LedgerTask, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import CommitRejected, PoolClosed
from daemon.storage.commitlog import CommitLog

pytestmark = pytest.mark.integration


async def test_old_epoch_commit_is_refused_after_a_newer_incarnation_committed(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "ledger"
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props, executors=plain_pool)
    worker = daemon.herder
    assert worker is not None
    config = {"connector.class": "support.daemon:LedgerSink", "topics": topic, "path": str(table)}
    await worker.create_connector("ledger", config)
    tp = TopicPartition(topic, 0)

    def committed() -> int:
        with CommitLog(table) as log:
            return log.committed_offsets().get(tp, 0)

    await produce(kafka_bootstrap, topic, 100)
    await wait_until(lambda: committed() == 100, 60, "100 offsets committed")
    old = worker.connectors["ledger"].slots[0].inc
    assert old is not None and isinstance(old.task, LedgerTask)
    old_task, old_epoch = old.task, old.epoch

    await worker.restart_task("ledger", 0)
    await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: committed() == 150, 60, "the new incarnation committed")
    # Read after the commit: a task draws a fresh epoch when it is given partitions.
    new_epoch = worker.task_status("ledger", 0).epoch
    assert new_epoch is not None and new_epoch > old_epoch

    # The zombie continues exactly where the log ends: only its epoch is wrong.
    with pytest.raises(CommitRejected, match=f"epoch {old_epoch} may not write .*zombie"):
        await old_task.commit([OffsetRange(topic, 0, 150, 160)])
    with pytest.raises(PoolClosed, match="no more writes"):
        await old_task.context.run_in_executor("daemon.executor.testing:sleep", None, timeout=1.0)
    assert committed() == 150
    with CommitLog(table) as log:
        epochs = [r.epoch for r in log.records() if r.kind == "commit"]
    assert epochs == sorted(epochs) and epochs[-1] == new_epoch
