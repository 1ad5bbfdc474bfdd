"""The seed demo (hang-connector), made harmless: a task blocked forever in its write is
restarted, and its executor is killed and reaped before the new incarnation starts.

In Kafka Connect every restart of the hung task leaves one more thread blocked on the latch.
Here, after each restart: the call returned only once the old executor was reaped (its /proc
entry gone: a zombie, not yet waited for, does not count as gone), the status shows a larger
``incarnation``, and at no sampled instant were two processes present that blocked for task 0.
The order itself is read from the pool's event log (``ExecutorPool.events``), not inferred from
sampling: for every restart, the old executor's reap (``waitpid`` returned, tree confirmed gone)
is recorded strictly before the next incarnation's executor is leased its write. Real Spark
executors (each kill takes the executor's JVM with it).
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.executor.info import PoolEvent, PoolEventKind
from daemon.executor.process import read_stat
from daemon.runtime.model import State

pytestmark = pytest.mark.integration

BLOCK = re.compile(r"Starting to block in executor pid (\d+) for task (\S+)")
TASK = "sink-hang-connector-0"


class BlockLines(logging.Handler):
    """Collects the pids of the "Starting to block" lines of one task, in order."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task
        self.pids: list[int] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        m = BLOCK.search(record.getMessage())
        if m and m.group(2) == self.task:
            with self._lock:
                self.pids.append(int(m.group(1)))

    def seen(self) -> list[int]:
        with self._lock:
            return list(self.pids)


class Census:
    """Samples /proc every few ms: how many of the task's blocked executors are present at once
    (running, or a zombie nobody has waited for yet: both are not reaped)."""

    def __init__(self, lines: BlockLines) -> None:
        self.lines = lines
        # Each executor by pid and start time, as first seen (it is blocked, so alive, when its
        # line is logged): once gone, a pid is not that executor any more. This machine reuses
        # pids (pid_max 32768; every JVM thread takes one), and a later process given an old
        # executor's pid must not count as that executor.
        self._born: dict[int, int] = {}
        self._ended: set[int] = set()
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            alive = 0
            for pid in set(self.lines.seen()):
                alive += self.present(pid)
            self.most = max(self.most, alive)
            self.samples += 1
            self._stop.wait(0.005)

    def present(self, pid: int) -> bool:
        """The executor that logged ``pid`` is still there (running, or a zombie not reaped)."""
        if pid in self._ended:
            return False
        stat = read_stat(pid)
        if stat is None or self._born.setdefault(pid, stat.starttime) != stat.starttime:
            self._ended.add(pid)
            return False
        return True

    def __enter__(self) -> Census:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def block_lines() -> Iterator[BlockLines]:
    handler = BlockLines(TASK)
    logger = logging.getLogger("connectd.connectors.testing")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _check_order(events: list[PoolEvent], pids: list[int]) -> None:
    """The task's leases and reaps alternate, executor by executor: lease(p0), reap(p0),
    lease(p1), reap(p1), ..., lease(pn); each reap strictly earlier than the next lease."""
    mine = [e for e in events if e.task_id == TASK]
    assert not [e for e in mine if e.kind is PoolEventKind.REAP_FAILED], mine
    got = [(e.kind, e.pid) for e in mine]
    want = [(PoolEventKind.LEASED, pids[0])]
    for old, new in itertools.pairwise(pids):
        want += [(PoolEventKind.REAPED, old), (PoolEventKind.LEASED, new)]
    assert got == want, f"events for {TASK}: {got}"
    for i, (reap, lease) in enumerate(zip(mine[1::2], mine[2::2], strict=True)):
        assert reap.at < lease.at, (
            f"restart {i}: executor {lease.pid} leased before {reap.pid}'s reap"
        )


async def _restarts(
    n: int,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
    block_lines: BlockLines,
) -> None:
    topic = await kafka_topic(partitions=1)
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"task.shutdown.graceful.timeout.ms": "1000", "task.write.timeout.ms": "600000"},
    )
    daemon = await run_daemon(props, executors=runtime_pool)
    worker = daemon.herder
    assert worker is not None
    name = "sink-hang-connector"
    since = time.monotonic()  # the session pool's event log holds earlier tests' events too
    # The seed's connector file, with connectd's alias for the connector class.
    await worker.create_connector(
        name, {"connector.class": "HangSink", "tasks.max": "1", "topics": topic}
    )
    with Census(block_lines) as census:
        pid = await wait_until(lambda: block_lines.seen()[-1:], 240, "the first block")
        pid = pid[0]
        status = worker.task_status(name, 0)
        assert status.state is State.RUNNING and status.executor_pid == pid
        incarnation = status.incarnation or 0
        timings = []
        for i in range(n):
            began = time.monotonic()
            await worker.restart_task(name, 0)
            timings.append(time.monotonic() - began)
            assert not census.present(pid), (
                f"restart {i}: old executor pid {pid} not reaped: {read_stat(pid)}"
            )
            status = worker.task_status(name, 0)
            assert (status.incarnation or 0) > incarnation
            incarnation = status.incarnation or 0
            count = len(block_lines.seen())
            await wait_until(lambda c=count: len(block_lines.seen()) > c, 240, "the next block")
            new_pid = block_lines.seen()[-1]
            assert new_pid != pid
            pid = new_pid
            assert worker.task_status(name, 0).executor_pid == pid
    assert census.samples > 100
    assert census.most == 1, f"{census.most} executors blocked for task 0 at once"
    assert len(block_lines.seen()) == n + 1
    events = [e for e in runtime_pool.pool.events.snapshot() if e.at >= since]
    _check_order(events, block_lines.seen())
    print(f"\n{n} restarts of the hung task: {', '.join(f'{t:.2f}' for t in timings)} s")


@pytest.mark.spark_line
async def test_hang_demo_four_restarts(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
    block_lines: BlockLines,
) -> None:
    # Four: the first replacement comes from the warm spare, the later ones wait for a JVM
    # start each; every restart checks the same reap-before-lease order (30 under make soak).
    await _restarts(
        4, run_daemon, kafka_bootstrap, kafka_topic, runtime_pool, tmp_path, block_lines
    )


@pytest.mark.soak
async def test_hang_demo_thirty_restarts(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
    block_lines: BlockLines,
) -> None:
    await _restarts(
        30, run_daemon, kafka_bootstrap, kafka_topic, runtime_pool, tmp_path, block_lines
    )
