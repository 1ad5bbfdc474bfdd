"""The seed demo (hang-connector) on a two-worker cluster: ``connectd distributed`` started from
the demo's two distributed worker files (tests/fixtures/distributed/, broker and ports filled
in), the hang connector submitted by its JSON through worker 1's REST, then three restarts of its
blocked task through worker 2's REST, whichever worker runs the task; and again with every
restart sent to the worker that does not run the task, so that each one is forwarded.

In Kafka Connect each restart leaves one more thread blocked for the task. Here, across both
workers:
- at no sampled instant are two executors that blocked for the task present (running, or a
  zombie nobody waited for);
- each restart answers 204 only once the old executor's whole tree (the executor, its JVM,
  Spark's Python workers) is gone from /proc, and then exactly one executor of the task is
  live, a child of the worker that runs the task;
- the pools' own lines (both logs, CLOCK_MONOTONIC times, one clock for every process of the
  machine) show each old executor reaped strictly before the next incarnation's executor was
  leased, on whichever worker;
- both workers' statuses name the same ``worker_id`` for the task: the worker whose executor
  blocked, which shows that executor's pid.

Real processes and real Spark executors (every executor is a JVM).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest
from support import hang_demo
from support.cluster import (
    DEMO_FILES,
    NO_LEADER,
    Cluster,
    ClusterFactory,
    ClusterWorker,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
)
from support.kafka_fixtures import TopicFactory

from daemon.executor.process import read_stat

pytestmark = pytest.mark.integration

NAME = hang_demo.NAME
TASK = f"{NAME}-0"
RESTARTS = 3  # each restart checks the whole order; the soak runs repeat it
BLOCK = re.compile(rf"Starting to block in executor pid (\d+) for task {re.escape(TASK)}\b")
# The pool's lease and reap lines (``daemon.executor.supervisor``), with monotonic times.
POOL_EVENT = re.compile(
    r"executor \d+ \(pid (\d+)\) (reaped|leased to task (\S+)) at monotonic (\d+\.\d+)"
)


class LogTail:
    """The lines appended to a worker's log since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *done, self.partial = (self.partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in done]


class Census:
    """Follows both workers' logs for the task's "Starting to block" lines, and samples /proc
    every few ms: how many of the task's blocked executors are present at once."""

    def __init__(self, workers: Sequence[ClusterWorker]) -> None:
        self.tails = [(w, LogTail(w.log_path)) for w in workers]
        self.blocked: dict[int, ClusterWorker] = {}  # pid → the worker whose log says so
        self.most = 0
        self.samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _scan(self) -> None:
        for worker, tail in self.tails:
            for line in tail.lines():
                if m := BLOCK.search(line):
                    with self._lock:
                        self.blocked.setdefault(int(m[1]), worker)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._scan()
            with self._lock:
                pids = list(self.blocked)
            present = sum(read_stat(pid) is not None for pid in pids)
            self.most = max(self.most, present)
            self.samples += 1
            self._stop.wait(0.005)

    def blocks(self) -> list[tuple[int, ClusterWorker]]:
        """(executor pid, its worker) of every block so far, in the order they were found."""
        with self._lock:
            return list(self.blocked.items())

    def __enter__(self) -> Census:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def _next_block(census: Census, seen: int, timeout: float) -> tuple[int, ClusterWorker]:
    """The first block past the ``seen`` first ones."""
    deadline = time.monotonic() + timeout
    while len(blocks := census.blocks()) <= seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"no new block of {TASK} within {timeout} s (blocks: {blocks})")
        await _pause()
    return blocks[seen]


async def _pause() -> None:
    await asyncio.sleep(0.05)


def _tree(worker: ClusterWorker, pid: int) -> dict[int, float]:
    tree = worker.executor_tree(pid)
    assert pid in tree, f"executor pid {pid} is not running on {worker.worker_id}"
    return tree


def _present(tree: dict[int, float]) -> list[str]:
    """What of ``tree`` (pid → start time) still has a /proc entry (a zombie included)."""
    left = []
    for pid, started in tree.items():
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if p.create_time() == started:
                left.append(f"{pid} ({p.status()}, {p.name()})")
    return left


async def _agreed_owner(c: Cluster, runner: ClusterWorker, pid: int) -> list[dict[str, Any]]:
    """Until every worker shows the task RUNNING on ``runner``, and ``runner`` shows ``pid`` as
    its executor; the task's status as each worker shows it."""
    owner, statuses = await c.task_owner(
        NAME, 0, 120, where=lambda t: t.get("worker_id") == runner.worker_id
    )
    mine = await c.wait(
        lambda w: (t := _task(w)) and t.get("executor_pid") == pid and t,
        60,
        f"{runner.worker_id} showing executor {pid} for {TASK}",
        workers=[runner],
    )
    assert owner is runner
    return [*statuses, *mine]


def _task(w: ClusterWorker) -> dict[str, Any] | None:
    body = w.status(NAME)
    tasks = [t for t in (body or {}).get("tasks", []) if t.get("id") == 0]
    return dict(tasks[0]) if tasks else None


def _check_order(workers: Sequence[ClusterWorker], pids: list[int]) -> None:
    """From both logs: the task's leases and its executors' reaps alternate, lease(p0),
    reap(p0), lease(p1), ..., lease(pn), each reap strictly earlier than the next lease."""
    events: list[tuple[float, str, int]] = []
    for w in workers:
        for m in POOL_EVENT.finditer(w.log_path.read_text(errors="replace")):
            pid, what, task, at = int(m[1]), m[2], m[3], float(m[4])
            if what == "reaped" and pid in pids:
                events.append((at, "reaped", pid))
            elif task == TASK:
                events.append((at, "leased", pid))
    events.sort()
    want = [("leased", pids[0])]
    for old, new in itertools.pairwise(pids):
        want += [("reaped", old), ("leased", new)]
    assert [(kind, pid) for _, kind, pid in events] == want, events


async def _submit(session: aiohttp.ClientSession, worker: ClusterWorker, topic: str) -> Any:
    """The demo's submit, as curl sends it, through ``worker``; sent again while the group has
    no leader yet (Connect's 409)."""
    submit = hang_demo.load()[0]
    demo = hang_demo.connector()
    demo["config"]["topics"] = topic  # the demo's connector on this test's own topic
    deadline = time.monotonic() + 90
    while True:
        status, text = await hang_demo.send(
            session, worker.url, submit, data=json.dumps(demo).encode()
        )
        if status != 409 or NO_LEADER not in text or time.monotonic() > deadline:
            return hang_demo.check(submit, status, text)
        await _pause()


@pytest.mark.timeout(900)
async def test_seed_demo_on_two_workers_restarts_through_worker_two(
    kafka_topic: TopicFactory,  # before the cluster: its topic outlives the workers
    cluster: ClusterFactory,  # noqa: F811
) -> None:
    """The demo as the issue states it: submitted through worker 1, restarted through worker 2,
    whichever of the two runs the task."""
    topic = await kafka_topic(partitions=1)
    c = await cluster(files=DEMO_FILES)
    await replay(c, submit_via=c[0], restart_via=c[1], topic=topic)


@pytest.mark.timeout(900)
async def test_seed_demo_restarts_forwarded_to_the_worker_running_the_task(
    kafka_topic: TopicFactory,  # before the cluster: its topic outlives the workers
    cluster: ClusterFactory,  # noqa: F811
) -> None:
    """Each restart sent to the worker that does not run the task: the restart is forwarded,
    and its answer still comes after the reap on the other worker."""
    topic = await kafka_topic(partitions=1)
    c = await cluster(files=DEMO_FILES)
    await replay(c, submit_via=c[1], restart_via=None, topic=topic)


async def replay(
    c: Cluster, *, submit_via: ClusterWorker, restart_via: ClusterWorker | None, topic: str
) -> None:
    """The demo on ``c``: submitted through ``submit_via``, then ``RESTARTS`` restarts through
    ``restart_via`` (None: each through a worker that does not run the task)."""
    restart = hang_demo.load()[1]
    timings: list[float] = []
    route: list[str] = []
    async with aiohttp.ClientSession() as session:
        with Census(c.workers) as census:
            shown = await _submit(session, submit_via, topic)
            assert shown["name"] == NAME and shown["config"]["topics"] == topic
            pid, runner = await _next_block(census, 0, 300)
            await _agreed_owner(c, runner, pid)
            for i in range(RESTARTS):
                old_tree = _tree(runner, pid)
                via = restart_via or next(w for w in c.workers if w is not runner)
                route.append(f"{via.port}->{runner.port}")
                before = time.monotonic()
                status, text = await hang_demo.send(session, via.url, restart)
                timings.append(time.monotonic() - before)
                hang_demo.check(restart, status, text)
                left = _present(old_tree)
                assert not left, f"restart {i}: the old executor's tree not reaped: {left}"
                pid, runner = await _next_block(census, i + 1, 300)
                assert pid not in old_tree
                assert pid in runner.descendants(), f"executor {pid} not under its worker"
                statuses = await _agreed_owner(c, runner, pid)
                live = [p for p, _ in census.blocks() if read_stat(p) is not None]
                assert live == [pid], f"restart {i}: live executors of {TASK}: {live}, {statuses}"
    assert census.samples > 100
    assert census.most == 1, f"{census.most} executors blocked for {TASK} at once"
    blocks = census.blocks()
    assert len(blocks) == RESTARTS + 1, blocks
    _check_order(c.workers, [p for p, _ in blocks])
    print(
        f"\n{RESTARTS} restarts of {TASK} (REST port -> port of the worker running it): "
        + ", ".join(f"{r} {t:.2f} s" for r, t in zip(route, timings, strict=True))
    )
