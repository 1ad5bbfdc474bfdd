"""The runtime's features with real Spark executors: one test each for what the ``plain_pool``
tests check without Spark (auto-restart, lifecycle, dead letters, zombie fencing, rebalance
epochs). Every test runs ParquetSink (or a subclass that fails on purpose) on the session's warm
Spark pool (``warm_spark``, 1 executor + 1 spare) against the session broker, and checks the
feature's effect on the real parts: the table read with pyarrow (rows, distinct
(partition, offset) pairs), the table's commit log, the dead-letter topic, executor processes
in /proc.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import consume_all, delete_topic, produce, topic_size
from support.kafka_fixtures import TopicFactory
from support.restarts import restart_daemon, restart_metric
from support.spark import ThreadedPool, walk_tree
from support.spark_sinks import FirstIncarnationTask, exactly_once_rows, parquet_sink, staged_files
from support.tables import committed

from daemon.connectors.api import SinkTask
from daemon.connectors.parquet import ParquetSinkConnector, ParquetSinkTask
from daemon.connectors.records import OffsetRange, RecordBatch
from daemon.connectors.testing import sample_batch
from daemon.errors import CommitRejected, PoolClosed
from daemon.executor.process import ProcStat, read_stat
from daemon.runtime.model import State
from daemon.runtime.standalone import StandaloneHerder
from daemon.storage.commitlog import CommitLog, CommitRecord

pytestmark = pytest.mark.integration

HERE = __name__
WRITE_STAGED = "daemon.connectors.parquet.write:write_staged"


# -- sinks that misbehave on purpose -----------------------------------------------------------


class BlockOnceTask(FirstIncarnationTask):
    """The first write is Spark's, into the staging dir, then blocks in the executor."""

    first_write = "daemon.connectors.testing:write_staged_then_block"
    starts: ClassVar[dict[str, int]] = {}


class BlockOnceSink(ParquetSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return BlockOnceTask


class FailFirstWriteTask(FirstIncarnationTask):
    """The first write calls a function the executor cannot find: it fails inside the executor
    (retriable ``WriteFailed``; the executor and its JVM live on)."""

    first_write = "daemon.connectors.parquet.write:no_such_write_for_tests"
    starts: ClassVar[dict[str, int]] = {}


class FailFirstWriteSink(ParquetSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return FailFirstWriteTask


class TaskOneFailsTask(ParquetSinkTask):
    """Task 1 fails at its first ``put`` that carries records (after ``open`` fenced its
    partitions in the table's commit log); task 0 is a plain ParquetSink task."""

    async def put(self, batch: RecordBatch) -> None:
        if batch.ranges and self.context.task_id.task == 1:
            raise RuntimeError(f"task {self.context.task_id} fails on purpose")
        await super().put(batch)


class TaskOneFailsSink(ParquetSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return TaskOneFailsTask


# -- helpers -----------------------------------------------------------------------------------


async def _worker(
    run_daemon: DaemonFactory, bootstrap: str, tmp_path: Path, pool: ThreadedPool, **props: str
) -> StandaloneHerder:
    d = await run_daemon(worker_properties(bootstrap, tmp_path / "state", **props), executors=pool)
    assert d.herder is not None
    return d.herder


def _log(table: Path) -> list[CommitRecord]:
    with CommitLog(table) as log:
        return log.records()


def _present(stats: Iterable[ProcStat]) -> list[int]:
    """The pids of ``stats`` still in /proc (running or a zombie nobody reaped yet)."""
    return [
        s.pid
        for s in stats
        if (now := read_stat(s.pid)) is not None and now.starttime == s.starttime
    ]


async def _quiet(table: Path, seconds: float, worker: StandaloneHerder, name: str) -> None:
    """Watch for ``seconds``: nothing may be delivered. No write is committed to the table, and
    if the connector has a task, its ParquetSink buffer stays empty and no write of its runs in
    an executor.

    Records produced just before are fetched within a fraction of the window (the sink's flush
    interval is 300 ms); a task that delivered them would hold them in its buffer, be writing
    them (its ``executor_pid`` set) or have committed them, however slow Spark is here.
    """
    before = len(_log(table))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert len(_log(table)) == before, "a write was committed while nothing may deliver"
        for slot in list(worker.connectors[name].slots.values()):
            inc = slot.inc
            if inc is None:  # stopped: no incarnation, nothing that could deliver
                continue
            assert isinstance(inc.task, ParquetSinkTask)
            assert inc.task.buffered == 0, f"{inc.task.buffered} records delivered to the sink"
            assert worker.task_status(name, slot.id.task).executor_pid is None, "a write runs"
        await asyncio.sleep(0.05)


# -- lifecycle -----------------------------------------------------------------------------------


async def test_spark_pause_resume_restart_stop_resume(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    tmp_path: Path,
) -> None:
    """Pause writes nothing and ends no incarnation; resume writes what came meanwhile; a
    restart writes on with a larger epoch; stop leaves no task and writes nothing; resume from
    STOPPED starts at the table's offsets. In the end: every record once in the table."""
    topic = await kafka_topic(partitions=2)
    table = tmp_path / "table"
    worker = await _worker(run_daemon, kafka_bootstrap, tmp_path, warm_spark)
    name = "spark-life"  # not "life": test_lifecycle reads that group's offsets whole
    await worker.create_connector(name, parquet_sink(topic, table))
    sent = await produce(kafka_bootstrap, topic, 100)
    await wait_until(lambda: committed(table) == sent, 120, f"{sent} offsets committed")

    # Pause: the task stays (same incarnation) and nothing is written.
    running = worker.task_status(name, 0)
    await worker.pause_connector(name)
    assert worker.connector_status(name).state is State.PAUSED
    assert worker.task_status(name, 0).state is State.PAUSED
    sent += await produce(kafka_bootstrap, topic, 100)
    await _quiet(table, 1.5, worker, name)
    assert committed(table) == 100
    assert worker.task_status(name, 0).incarnation == running.incarnation
    began = time.monotonic()
    await worker.resume_connector(name)
    await wait_until(lambda: committed(table) == sent, 60, f"{sent} offsets after resume")
    print(f"\nafter resume, the paused records landed in {time.monotonic() - began:.1f} s")

    # Restart: a new incarnation with a larger epoch writes the next records.
    before = worker.task_status(name, 0)
    records_before = len(_log(table))
    await worker.restart_task(name, 0)
    sent += await produce(kafka_bootstrap, topic, 100)
    await wait_until(lambda: committed(table) == sent, 60, f"{sent} offsets after restart")
    after = worker.task_status(name, 0)
    assert (after.incarnation or 0) > (before.incarnation or 0)
    new_commits = [r for r in _log(table)[records_before:] if r.kind == "commit"]
    assert new_commits and all((r.epoch or 0) > (before.epoch or 0) for r in new_commits)

    # Stop: no tasks, nothing written.
    await worker.stop_connector(name)
    status = worker.connector_status(name)
    assert status.state is State.STOPPED and status.tasks == ()
    sent += await produce(kafka_bootstrap, topic, 100)
    await _quiet(table, 1.5, worker, name)
    assert committed(table) == 300

    # Resume from STOPPED: the task re-opens at the table's offsets (not from scratch).
    await worker.resume_connector(name)
    await wait_until(lambda: committed(table) == sent, 60, f"{sent} offsets after stop")
    assert (worker.task_status(name, 0).epoch or 0) > (after.epoch or 0)
    records = await consume_all(kafka_bootstrap, topic, sent)
    await exactly_once_rows(table, [(r.partition, r.offset) for r in records])
    epochs = [r.epoch or 0 for r in _log(table) if r.kind == "commit"]
    assert epochs == sorted(epochs)


# -- dead-letter queue ---------------------------------------------------------------------------


async def test_spark_dead_letters_once_through_a_failed_write_and_a_re_read(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``errors.tolerance=all`` with a dead-letter topic. The first incarnation sends the bad
    records it polled to the dead-letter topic, then its Spark write fails (``WriteFailed``):
    nothing is committed, and the automatic restart reads every record again. In the end the
    table holds each good record once, the dead-letter topic each bad one once (the re-read
    ones are found there, not produced again), and together they cover every offset."""
    topic = await kafka_topic(partitions=2)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    n = 200
    bad = {i for i in range(n) if i % 23 == 7}  # 9 malformed JSON values
    values = [b'{"n": %d' % i if i in bad else b'{"n": %d}' % i for i in range(n)]
    await produce(kafka_bootstrap, topic, [(b"k%d" % i, v) for i, v in enumerate(values)])
    source = await consume_all(kafka_bootstrap, topic, n)
    coords = {(r.partition, r.offset): r for r in source}
    bad_coords = {c for c, r in coords.items() if not (r.value or b"").endswith(b"}")}
    assert len(bad_coords) == len(bad)
    table = tmp_path / "table"
    worker = await _worker(
        run_daemon,
        kafka_bootstrap,
        tmp_path,
        warm_spark,
        **{"value.converter": "json", "value.converter.schemas.enable": "false"},
    )
    name = f"dead-{uuid.uuid4().hex[:6]}"
    config = parquet_sink(
        topic,
        table,
        **{
            "connector.class": f"{HERE}:FailFirstWriteSink",
            "flush.max.records": "1000",
            "errors.restart.max": "1",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    caplog.set_level(logging.INFO, logger="connectd.task")
    try:
        await worker.create_connector(name, config)
        task = await wait_until(
            lambda: (
                (t := worker.task_status(name, 0)).state is State.RUNNING
                and t.auto_restart is not None
                and t.auto_restart.count == 1
                and committed(table) == n
                and t
            ),
            120,
            "the failed write, the automatic restart, every offset committed",
        )
        assert task.auto_restart is not None and task.auto_restart.count == 1
        await exactly_once_rows(table, set(coords) - bad_coords)

        assert await topic_size(kafka_bootstrap, dlq) == len(bad)  # none twice, none lost
        letters = await consume_all(
            kafka_bootstrap, dlq, len(bad), isolation_level="read_committed"
        )
        in_dlq = []
        for letter in letters:
            h = {k: v.decode() for k, v in letter.headers if v is not None}
            where = (int(h["__connect.errors.partition"]), int(h["__connect.errors.offset"]))
            assert h["__connect.errors.topic"] == topic
            assert (letter.key, letter.value) == (coords[where].key, coords[where].value)
            in_dlq.append(where)
        assert len(in_dlq) == len(set(in_dlq)) and set(in_dlq) == bad_coords
        # What made "once" worth checking: the restarted incarnation re-read bad records whose
        # dead letters the first one had produced (the runtime says so when it skips them).
        again = [r for r in caplog.records if "in the dead-letter topic already" in r.message]
        assert again, "the first incarnation produced no dead letter before its write failed"
    finally:
        await delete_topic(kafka_bootstrap, dlq)


# -- zombie fencing ------------------------------------------------------------------------------


async def test_spark_zombie_write_is_refused_by_the_commit_log_and_never_lands(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    tmp_path: Path,
) -> None:
    """After a restart, the old incarnation cannot start a write (its executor door is
    closed); and a write of its that Spark had finished (files staged in the table) is refused
    by the commit log for its old epoch, though it continues the offsets exactly: its files
    never reach readers, and the new incarnation writes those offsets itself."""
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    worker = await _worker(run_daemon, kafka_bootstrap, tmp_path, warm_spark)
    name = "zombie"
    await worker.create_connector(name, parquet_sink(topic, table))
    await produce(kafka_bootstrap, topic, 100)
    await wait_until(lambda: committed(table) == 100, 120, "100 offsets committed")
    old = worker.connectors[name].slots[0].inc
    assert old is not None and isinstance(old.task, ParquetSinkTask)
    old_task, old_epoch = old.task, old.epoch

    await worker.restart_task(name, 0)
    await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: committed(table) == 150, 60, "the new incarnation committed")
    new_epoch = worker.task_status(name, 0).epoch
    assert new_epoch is not None and new_epoch > old_epoch

    # The zombie's own door: no write reaches an executor.
    zombie_batch = sample_batch(topic, 0, 150, 10)
    with pytest.raises(PoolClosed, match="no more writes"):
        await old_task.context.run_in_executor(
            WRITE_STAGED, zombie_batch.table, timeout=30.0, path=str(tmp_path / "nowhere")
        )

    # A zombie write Spark finished: real files staged in the table, then the commit.
    zombie_log = CommitLog(table).open()
    try:
        commit_id = CommitLog.new_commit_id()
        stage = zombie_log.stage(commit_id)
        written = await warm_spark.run(
            "zombie-write", WRITE_STAGED, zombie_batch.table, timeout=120.0, kwargs={"path": stage}
        )
        assert written["rows"] == 10
        staged = zombie_log.staged_files(commit_id)
        assert staged, "Spark staged no files"
        with pytest.raises(CommitRejected, match=f"epoch {old_epoch} may not write .*zombie"):
            zombie_log.commit(
                name, 0, old_epoch, [OffsetRange(topic, 0, 150, 160)], staged, commit_id=commit_id
            )
        assert zombie_log.abort(commit_id) is False
    finally:
        zombie_log.close()
    assert committed(table) == 150 and staged_files(table) == []
    await exactly_once_rows(table, [(0, o) for o in range(150)])

    # The live incarnation writes offsets 150..159 itself, with its own records.
    await produce(kafka_bootstrap, topic, [(None, b"live-%d" % i) for i in range(10)])
    await wait_until(lambda: committed(table) == 160, 60, "the live incarnation's 10 records")
    await exactly_once_rows(table, [(0, o) for o in range(160)])
    data = ds.dataset(table, format="parquet").to_table(columns=["kafka_offset", "value"])
    tail = {o: v for o, v in zip(*data.to_pydict().values(), strict=True) if o >= 150}
    assert tail == {150 + i: f"live-{i}" for i in range(10)}
    assert not any(commit_id in p.name for p in table.rglob("*.parquet"))
    commits = [r for r in _log(table) if r.kind == "commit"]
    assert [r.epoch for r in commits] == sorted(r.epoch or 0 for r in commits)
    assert commits[-1].epoch == worker.task_status(name, 0).epoch


# -- rebalance epochs ----------------------------------------------------------------------------


async def test_spark_partitions_moving_to_an_older_task_get_a_larger_epoch(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    tmp_path: Path,
) -> None:
    """Task 1 (started after task 0) fences its partitions in the table's commit log, then
    fails; the rebalance gives them to task 0, which must fence and commit them with an epoch
    larger than task 1's (not the one it started with): every record lands once, through
    Spark, all by task 0."""
    topic = await kafka_topic(partitions=4)
    table = tmp_path / "table"
    worker = await _worker(run_daemon, kafka_bootstrap, tmp_path, warm_spark)
    name = "moves"
    config = parquet_sink(
        topic,
        table,
        **{
            "connector.class": f"{HERE}:TaskOneFailsSink",
            "tasks.max": "2",
            "errors.restart.enabled": "false",
        },
    )
    await worker.create_connector(name, config)
    start_epochs = [t.epoch or 0 for t in worker.connector_status(name).tasks]
    sent = 0

    async def task_1_failed() -> bool:
        # Records keep coming until task 1 has been given some and failed (task 0 may have
        # joined first and taken an early batch alone).
        nonlocal sent
        if worker.connector_status(name).tasks[1].state is State.FAILED:
            return True
        sent += await produce(kafka_bootstrap, topic, 100)
        return False

    await wait_until(task_1_failed, 120, "task 1 failed on purpose", interval=0.5)
    await wait_until(lambda: committed(table) == sent, 120, f"{sent} offsets committed")
    status = worker.connector_status(name)
    assert status.tasks[0].state is State.RUNNING, status.tasks[0].trace
    assert status.tasks[1].trace is not None and "fails on purpose" in status.tasks[1].trace

    records = _log(table)
    fences_1 = [r for r in records if r.kind == "fence" and r.task == 1]
    assert fences_1, "task 1 claimed partitions before it failed"
    last_1 = max(r.seq for r in fences_1)
    epoch_1 = max(r.epoch or 0 for r in fences_1)
    moved = {tp for r in fences_1 for tp, _ in r.offsets}
    assert epoch_1 > min(start_epochs), "task 1 should hold the newer epoch"
    # Task 0 re-claimed each moved partition after task 1's claim, with a larger epoch.
    for tp in moved:
        later = [
            r.epoch or 0
            for r in records
            if r.kind == "fence" and r.task == 0 and r.seq > last_1 and tp in dict(r.offsets)
        ]
        assert later and min(later) > epoch_1, f"{tp}: task 0 re-fenced with {later}"
    commits = [r for r in records if r.kind == "commit"]
    assert {r.task for r in commits} == {0}
    assert sum(r.end - r.start for c in commits for r in c.ranges) == sent  # each offset once
    for c in commits:
        if c.seq > last_1 and {rng.tp for rng in c.ranges} & moved:
            assert (c.epoch or 0) > epoch_1
    assert {rng.tp for c in commits for rng in c.ranges} >= moved
    parts = await consume_all(kafka_bootstrap, topic, sent)
    await exactly_once_rows(table, [(r.partition, r.offset) for r in parts])


# -- auto-restart (last: it kills one of the session pool's executors) ---------------------------


async def test_spark_executor_killed_mid_write_is_reaped_and_the_task_auto_restarted(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    tmp_path: Path,
) -> None:
    """The executor writing for a task is SIGKILLed from outside (an OOM kill, a JVM crash)
    while its Spark write has staged files: the whole tree is gone, the task fails (retriable
    ``ExecutorDied``) and is restarted automatically; the new incarnation writes through
    another executor, and the table holds every record once, none of the killed write's."""
    n = 200
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, n)
    table = tmp_path / "table"
    d, worker, _ = await restart_daemon(run_daemon, kafka_bootstrap, tmp_path, warm_spark)
    name = f"kill-{uuid.uuid4().hex[:6]}"
    config = parquet_sink(topic, table, **{"errors.restart.max": "1"})
    await worker.create_connector(name, {**config, "connector.class": f"{HERE}:BlockOnceSink"})

    # The first write staged Spark's files and blocks: the executor is mid-write.
    old_pid = await wait_until(
        lambda: staged_files(table) and worker.task_status(name, 0).executor_pid,
        240,
        "the first write staged by Spark and blocked in its executor",
    )
    first = worker.task_status(name, 0)
    assert first.state is State.RUNNING and committed(table) == 0
    assert any(f.endswith(".parquet") for f in staged_files(table))
    tree = walk_tree(old_pid)
    assert any(s.comm == "java" for s in tree.values()), f"no JVM under executor {old_pid}"

    # The new incarnation's executor pids are sampled from the status from the kill on: it is
    # restarted at once (restart 0 waits 0 s) and its write on the warm spare can be over
    # before the killed tree is confirmed gone.
    seen: set[int] = set()

    def sample() -> Any:
        task = worker.task_status(name, 0)
        if task.executor_pid is not None and (task.incarnation or 0) > (first.incarnation or 0):
            seen.add(task.executor_pid)
        return task

    os.kill(old_pid, signal.SIGKILL)
    # Gone from /proc: killed and reaped by the pool (the test reaps nothing itself: the pool
    # runs in this process, and its executors are this process's children).
    await wait_until(
        lambda: sample() and not _present(tree.values()),
        30,
        f"executor {old_pid}'s tree reaped",
        0.01,
    )

    def caught_up() -> Any:
        task = sample()
        return (
            task.state is State.RUNNING
            and task.auto_restart is not None
            and task.auto_restart.count == 1
            and committed(table) == n
            and task
        )

    task = await wait_until(caught_up, 120, "restarted and every record committed", 0.01)
    assert (task.incarnation or 0) > (first.incarnation or 0)
    assert (task.epoch or 0) > (first.epoch or 0)
    assert seen, "no write of the restarted incarnation was seen in the status"
    assert old_pid not in seen, "the killed executor wrote again"
    assert restart_metric(d, name, "auto") == 1
    await exactly_once_rows(table, [(0, o) for o in range(n)])
    # (A commit's own staging dir is removed a moment after its record: poll.)
    await wait_until(
        lambda: staged_files(table) == [], 30, "the killed write's staged files deleted"
    )
    assert {r.epoch for r in _log(table) if r.kind == "commit"} == {task.epoch}
