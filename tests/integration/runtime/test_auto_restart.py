"""Automatic restarts on a real broker, on a clock the test moves (``ManualClock``): Strimzi's
schedule (immediately, then 2, 6, … minutes since the previous restart) until
``errors.restart.max`` is used up, the count reset after a healthy period, no restart for what a
restart cannot fix, connectors restarted like tasks, and a HangSink task killed at its write
deadline restarted without ever running twice (real Spark executors).

How time passes: the daemon's worker gets a ``ManualClock`` in its runtime environment before
the connector is created. The restart policy's time stands still until the test moves it
(``advance``), so a waiting restart comes exactly when the test says and an incarnation never
runs "healthy" for longer than the test lets it: no test waits for the schedule in real time.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Collection, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTP
from support.daemon import DaemonFactory, wait_until
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.restarts import restart_daemon, restart_metric
from support.spark import ThreadedPool

from daemon.connectors.api import SinkConnector, SinkTask, SinkTaskContext
from daemon.daemon import Daemon
from daemon.errors import ConfigError
from daemon.executor.process import read_stat
from daemon.runtime.model import State
from daemon.storage.standalone import MemoryStore, StoredConnector

pytestmark = pytest.mark.integration

MINUTE = 60.0
HERE = __name__


# -- connectors that fail in ways a restart cannot fix, or fix -------------------------------


class ConfigErrorTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        raise ConfigError("option 'x' is wrong: set it to a number")

    async def put(self, batch: Any) -> None:
        raise AssertionError("never started")

    async def stop(self) -> None:
        return None


class ConfigErrorSink(SinkConnector):
    def task_class(self) -> type[SinkTask]:
        return ConfigErrorTask


class MissingClassTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        import importlib

        importlib.import_module("connectd_no_such_module_for_tests")

    async def put(self, batch: Any) -> None:
        raise AssertionError("never started")

    async def stop(self) -> None:
        return None


class MissingClassSink(SinkConnector):
    def task_class(self) -> type[SinkTask]:
        return MissingClassTask


class QuietTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        return None

    async def put(self, batch: Any) -> None:
        return None

    async def stop(self) -> None:
        return None


class FlakyConnector(SinkConnector):
    """``start`` fails (a plain, retriable error) the first ``failures`` times per name."""

    failures = 1
    starts: ClassVar[dict[str, int]] = {}

    async def start(self, config: Mapping[str, str]) -> None:
        name = config["name"]
        self.starts[name] = self.starts.get(name, 0) + 1
        if self.starts[name] <= self.failures:
            raise ConnectionError(f"the external system is down (start {self.starts[name]})")

    def task_class(self) -> type[SinkTask]:
        return QuietTask


# -- helpers -----------------------------------------------------------------------------------


class RestartLog(logging.Handler):
    """The automatic restarts, failures and count resets of one task, from its log lines."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what
        self.failures: list[float] = []
        self.restarts: list[float] = []
        self.resets = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith(self.what):
            return
        if ": automatic restart " in message:
            self.restarts.append(record.created)
        elif "; automatic restart " in message or "restarts exhausted" in message:
            self.failures.append(record.created)
        elif "starts again" in message:
            self.resets += 1


@pytest.fixture
def restart_log() -> Iterator[Any]:
    handlers: list[RestartLog] = []
    logger = logging.getLogger("connectd.restart")
    level = logger.level
    logger.setLevel(logging.INFO)

    def make(what: str) -> RestartLog:
        handler = RestartLog(what)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler

    yield make
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(level)


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


async def _rest_status(d: Daemon, name: str) -> Any:
    assert d.rest_url is not None
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{d.rest_url}/connectors/{name}/status") as response,
    ):
        assert response.status == 200
        return await response.json()


async def _committed(bootstrap: str, group: str, tp: KafkaTP) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return int(await consumer.committed(tp) or 0)
    finally:
        await consumer.stop()


# -- the schedule -----------------------------------------------------------------------------


async def test_echo_sink_is_restarted_on_schedule_until_exhausted(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
    restart_log: Any,
) -> None:
    topic = await kafka_topic(partitions=1)
    # Nothing gets committed before the 5th record fails the task: every incarnation reads the
    # same 5 records again and fails again.
    await produce(kafka_bootstrap, topic, 5)
    d, worker, clock = await restart_daemon(run_daemon, kafka_bootstrap, tmp_path, plain_pool)
    log = restart_log("Task echo-0")
    began = clock.monotonic()
    await worker.create_connector(
        "echo",
        {
            "connector.class": "EchoSink",
            "topics": topic,
            "fail.task.after.records": "5",
            "errors.restart.max": "3",
        },
    )

    def restarts() -> int:
        auto = worker.task_status("echo", 0).auto_restart
        return 0 if auto is None else auto.count

    # The first restart comes at once; then each waits n·(n+1) minutes since the previous one,
    # shown in the status while it waits (FAILED, with the time it comes).
    await wait_until(lambda: restarts() == 1, 60, "the first restart, at once", interval=0.02)
    assert clock.monotonic() == began
    for count, minutes in ((1, 2), (2, 6)):
        await wait_until(lambda: clock.sleeping, 60, f"restart {count + 1} waiting", interval=0.02)
        assert clock.sleeping == pytest.approx([minutes * MINUTE])
        task = worker.task_status("echo", 0)
        auto = task.auto_restart
        assert task.state is State.FAILED and auto is not None and auto.count == count
        assert auto.last_restart is not None and auto.next_restart is not None
        assert _seconds(auto.next_restart) - _seconds(auto.last_restart) == pytest.approx(
            minutes * MINUTE, abs=0.01
        )
        clock.advance(minutes * MINUTE - 1)  # a second early: still waiting
        await asyncio.sleep(0.05)
        assert restarts() == count and clock.sleeping == pytest.approx([1.0])
        clock.advance(1)
        after = count + 1
        await wait_until(lambda: restarts() == after, 60, f"restart {after}", 0.02)  # noqa: B023

    def exhausted() -> Any:
        task = worker.task_status("echo", 0)
        auto = task.auto_restart
        done = task.state is State.FAILED and auto is not None and auto.next_restart is None
        return done and "exhausted" in (task.trace or "") and task

    task = await wait_until(exhausted, 60, "three automatic restarts, then FAILED", interval=0.02)
    assert clock.monotonic() - began == pytest.approx(8 * MINUTE)  # 0 + 2 + 6 minutes
    assert task.trace is not None and "InjectedFailure" in task.trace
    assert "Automatic restarts exhausted" in task.trace and "after 3 automatic" in task.trace
    assert "POST /connectors/echo/tasks/0/restart" in task.trace
    assert len(log.restarts) == 3 and len(log.failures) == 4
    assert task.auto_restart is not None and task.auto_restart.last_restart is not None

    # It stays FAILED: nothing waits any more, and an hour later nothing has come.
    incarnation = task.incarnation
    assert clock.sleeping == []
    clock.advance(60 * MINUTE)
    await asyncio.sleep(0.05)
    still = worker.task_status("echo", 0)
    assert still.state is State.FAILED and still.incarnation == incarnation
    assert still.auto_restart is not None and still.auto_restart.count == 3
    assert restart_metric(d, "echo", "auto") == 3

    # The REST API shows the same.
    body = await _rest_status(d, "echo")
    auto = body["tasks"][0]["auto_restart"]
    assert body["tasks"][0]["state"] == "FAILED"
    assert auto["count"] == 3 and auto["next_restart"] is None
    assert auto["last_restart"] == still.auto_restart.last_restart
    assert "Automatic restarts exhausted" in body["tasks"][0]["trace"]
    assert body["connector"]["auto_restart"] == {
        "count": 0,
        "last_restart": None,
        "next_restart": None,
    }

    # A restart by hand brings it back and starts the count again (it fails again at once).
    await worker.restart_task("echo", 0)
    assert restart_metric(d, "echo", "requested") == 1
    again = await wait_until(
        lambda: (
            (t := worker.task_status("echo", 0)).auto_restart is not None
            and t.auto_restart.count == 1
            and t
        ),
        30,
        "an automatic restart after the restart by hand",
    )
    assert (again.incarnation or 0) > (incarnation or 0)
    await worker.delete_connector("echo")


async def test_a_healthy_period_resets_the_count(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
    restart_log: Any,
) -> None:
    topic = await kafka_topic(partitions=1)
    tp = KafkaTP(topic, 0)
    d, worker, clock = await restart_daemon(run_daemon, kafka_bootstrap, tmp_path, plain_pool)
    log = restart_log("Task echo-0")
    await worker.create_connector(
        "echo", {"connector.class": "EchoSink", "topics": topic, "fail.task.after.records": "5"}
    )
    group = "connect-echo"

    async def committed_at_least(n: int) -> bool:
        return await _committed(kafka_bootstrap, group, tp) >= n

    # 3 records, committed (offset.flush.interval.ms=1000); 2 more make 5: it fails.
    await produce(kafka_bootstrap, topic, 3)
    await wait_until(lambda: committed_at_least(3), 30, "3 records committed", interval=0.2)
    await produce(kafka_bootstrap, topic, 2)
    first = await wait_until(
        lambda: (
            (t := worker.task_status("echo", 0)).auto_restart is not None
            and t.auto_restart.count == 1
            and t.state is State.RUNNING
            and t
        ),
        30,
        "the first automatic restart",
    )
    # The new incarnation starts after the 3 committed records: it has 2, and runs healthy
    # longer than the next interval (2 minutes); its 2 records get committed.
    await wait_until(lambda: committed_at_least(5), 30, "5 records committed", interval=0.2)
    clock.advance(2.5 * MINUTE)
    assert worker.task_status("echo", 0).state is State.RUNNING
    assert len(log.restarts) == 1
    # 3 more: 5 for this incarnation, it fails; the count starts again: restarted at once.
    await produce(kafka_bootstrap, topic, 3)
    # The restart is logged as it begins; its status is read once it has made the new
    # incarnation (RESTARTING until then, with the old one's number).
    second = await wait_until(
        lambda: (
            len(log.restarts) == 2
            and (t := worker.task_status("echo", 0)).state is not State.RESTARTING
            and t
        ),
        30,
        "a second restart",
    )
    assert log.resets == 1
    assert clock.sleeping == []  # restarted at once, not 2 minutes later
    assert second.auto_restart is not None and second.auto_restart.count == 1
    assert (second.incarnation or 0) > (first.incarnation or 0)
    assert first.auto_restart is not None and second.auto_restart.last_restart is not None
    assert first.auto_restart.last_restart is not None
    assert _seconds(second.auto_restart.last_restart) > _seconds(first.auto_restart.last_restart)
    # ... and it runs (the 3 records after the committed 5 are not enough to fail it).
    await wait_until(
        lambda: worker.task_status("echo", 0).state is State.RUNNING, 30, "RUNNING again"
    )
    assert restart_metric(d, "echo", "auto") == 2


# -- what is not restarted ---------------------------------------------------------------------


async def test_a_config_error_or_a_missing_class_is_not_restarted(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    store = MemoryStore()
    # A stored connector whose class is gone (e.g. a plugin uninstalled since).
    gone = {"name": "gone", "connector.class": "connectd_no_such_module:Sink", "topics": topic}
    store.connectors["gone"] = StoredConnector(gone)
    d, worker, clock = await restart_daemon(
        run_daemon, kafka_bootstrap, tmp_path, plain_pool, store=store
    )
    for name, cls in (("conf", "ConfigErrorSink"), ("missing", "MissingClassSink")):
        await worker.create_connector(name, {"connector.class": f"{HERE}:{cls}", "topics": topic})

    def failed(name: str) -> Any:
        task = worker.connector_status(name).tasks[0]
        return task.state is State.FAILED and task

    conf = await wait_until(lambda: failed("conf"), 30, "the config error FAILED")
    missing = await wait_until(lambda: failed("missing"), 30, "the missing module FAILED")
    gone_status = worker.connector_status("gone")
    assert gone_status.state is State.FAILED and gone_status.trace is not None
    assert "ConnectorNotFound" in gone_status.trace and "not retriable" in gone_status.trace
    assert "POST /connectors/gone/restart" in gone_status.trace
    # Nothing waits to restart them, and 3 minutes later (past the second restart's time)
    # nothing has come.
    assert clock.sleeping == []
    clock.advance(3 * MINUTE)
    await asyncio.sleep(0.05)
    for name, before, error in (
        ("conf", conf, "ConfigError"),
        ("missing", missing, "ModuleNotFoundError"),
    ):
        task = worker.task_status(name, 0)
        assert task.state is State.FAILED and task.incarnation == before.incarnation, name
        assert task.auto_restart is not None
        assert task.auto_restart.count == 0 and task.auto_restart.next_restart is None
        assert task.trace is not None and error in task.trace
        assert f"{error} is not retriable" in task.trace
        assert f"POST /connectors/{name}/tasks/0/restart" in task.trace
    assert worker.connector_status("gone").state is State.FAILED
    body = await _rest_status(d, "gone")
    assert body["connector"]["auto_restart"]["count"] == 0
    assert restart_metric(d, "conf", "auto") == 0


async def test_a_failed_connector_is_restarted_like_a_task(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    d, worker, _ = await restart_daemon(run_daemon, kafka_bootstrap, tmp_path, plain_pool)
    FlakyConnector.starts.pop("flaky", None)
    await worker.create_connector(
        "flaky", {"connector.class": f"{HERE}:FlakyConnector", "topics": topic}
    )
    status = await wait_until(
        lambda: (
            (s := worker.connector_status("flaky")).state is State.RUNNING
            and s.tasks
            and s.tasks[0].state is State.RUNNING
            and s
        ),
        30,
        "the connector restarted and its task running",
    )
    assert FlakyConnector.starts["flaky"] == 2
    assert status.auto_restart is not None and status.auto_restart.count == 1
    body = await _rest_status(d, "flaky")
    assert body["connector"]["state"] == "RUNNING"
    assert body["connector"]["auto_restart"]["count"] == 1


# -- a task killed at its write deadline ------------------------------------------------------

BLOCK = re.compile(r"Starting to block in executor pid (\d+) for task (\S+)")


class BlockCensus(logging.Handler):
    """The executors that blocked for one task, and (sampled every few ms from /proc) the most
    of them alive at once."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task
        self.pids: list[int] = []
        self.most = 0
        self.samples = 0
        self._born: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def emit(self, record: logging.LogRecord) -> None:
        m = BLOCK.search(record.getMessage())
        if m and m.group(2) == self.task:
            with self._lock:
                self.pids.append(int(m.group(1)))

    def seen(self) -> list[int]:
        with self._lock:
            return list(self.pids)

    def alive(self, pids: Collection[int]) -> int:
        """How many of ``pids`` are still the executors that logged them and run. A pid is known
        by its start time as first seen (each was alive, blocked, when its line was logged):
        pids are reused here (pid_max 32768, and every JVM thread takes one), and a later
        process given a killed executor's pid is not that executor."""
        count = 0
        for pid in pids:
            stat = read_stat(pid)
            if stat is None or self._born.setdefault(pid, stat.starttime) != stat.starttime:
                self._born[pid] = -1  # gone once: never that executor again
                continue
            count += stat.running
        return count

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, self.alive(set(self.seen())))
            self.samples += 1
            self._stop.wait(0.005)

    def __enter__(self) -> BlockCensus:
        logging.getLogger("connectd.connectors.testing").addHandler(self)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        logging.getLogger("connectd.connectors.testing").removeHandler(self)


async def test_a_task_killed_at_its_write_deadline_is_restarted_never_twice(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    # The clock stands still: a write killed after 3 s is no healthy run of 2 minutes.
    d, worker, _ = await restart_daemon(
        run_daemon,
        kafka_bootstrap,
        tmp_path,
        runtime_pool,
        **{"task.write.timeout.ms": "3000", "task.shutdown.graceful.timeout.ms": "1000"},
    )
    with BlockCensus("hang-0") as census:
        await worker.create_connector(
            "hang",
            {"connector.class": "HangSink", "topics": topic, "errors.restart.max": "1"},
        )
        # Block, killed at 3 s (WriteTimeout, retriable), restarted at once, blocks again,
        # killed again: FAILED, restarts exhausted.
        task = await wait_until(
            lambda: (
                (t := worker.task_status("hang", 0)).state is State.FAILED
                and t.auto_restart is not None
                and t.auto_restart.count == 1
                and t.auto_restart.next_restart is None
                # The decision comes a moment after the failure shows (the incarnation's
                # coroutine ends first): wait for the trace's note too.
                and "Automatic restarts exhausted" in (t.trace or "")
                and t
            ),
            240,
            "two writes killed at their deadline, one automatic restart",
        )
        await wait_until(
            lambda: census.alive(census.seen()) == 0, 15, "every blocked executor gone"
        )
    pids = census.seen()
    assert len(pids) == 2 and pids[0] != pids[1]
    assert census.samples > 100
    assert census.most == 1, f"{census.most} executors blocked for the task at once"
    assert task.trace is not None and "WriteTimeout" in task.trace
    assert "Automatic restarts exhausted" in task.trace
    assert task.executor_pid is None
    assert restart_metric(d, "hang", "auto") == 1
    print(f"\nexecutors that blocked for hang-0, one after the other: {pids}")
