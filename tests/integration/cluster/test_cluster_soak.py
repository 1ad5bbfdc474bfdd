"""The cluster soak (``make soak``, never ``make test``; issue 33 item 5): three ``connectd
distributed`` workers (real processes, a broker of the test's own, Spark), a ParquetSink and a
DeltaSink connector with ``tasks.max=6`` each over one 6-partition topic, 1,000,000 records
streamed, while faults strike at random moments from a printed seed:

- a worker SIGKILLed 15 times (every third time the leader) and started again;
- a worker SIGSTOPped past its session 10 times (every third time the leader), then SIGCONT;
- the broker stopped and started 3 times (down 3-15 s);
- a rolling restart of all three workers twice (SIGTERM, exit 0, start, running tasks again);
- 20 connector config changes (PUT, through a random worker) and 10 task restarts (POST,
  through a random worker).

Checked at the end: rows == distinct (partition, offset) == produced for both tables (pyarrow
for Parquet, delta-rs for Delta); no process of a killed worker nor of a stopped worker's fenced
incarnations alive; no task UNASSIGNED or FAILED (all twelve RUNNING); every worker's status
answer the same; each worker's RSS at the end within 20% of its RSS after its first 100,000
records (the worker faults fall in the first 55% of the run, so each worker's last start lives
through at least 450,000 records).

Each fault strikes once both tables cover a progress point, after a random delay of up to 3 s;
faults strike one after another. ``CONNECTD_SOAK_SEED=<n>`` replays a plan;
``CONNECTD_SOAK_SCALE=0.1`` runs a tenth (records and faults, at least one of each) for a trial.
The figures go to stdout and to ``.cache/soak/cluster-<seed>.txt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pyarrow.compute as pc
import pytest
from support.cluster import Cluster, ClusterNames, ClusterWorker, end_clusters
from support.cluster_audit import audit, leader
from support.daemon import wait_until
from support.delta import DeltaCommits, rows_with_deltalake
from support.kafka import KafkaBroker, create_topic
from support.soak import CHUNK, SCALE, Feed, alive, report, rss_mb, strike_all, tree
from support.soak import seed as soak_seed
from support.tables import committed

pytestmark = [pytest.mark.integration, pytest.mark.soak, pytest.mark.timeout(5400)]

RECORDS = int(1_000_000 * SCALE)
PARTITIONS = TASKS = 6
WORKERS = 3
COUNTS = {"kill": 15, "stop": 10, "broker": 3, "rolling": 2, "put": 20, "restart": 10}
WORKER_FAULTS = ("kill", "stop", "rolling")
# The producer stays at most this far ahead of the slower table (a tenth of the run at least,
# so that a short run has faults strike while records flow).
BACKLOG = max(CHUNK, int(150_000 * min(1.0, SCALE)))
# Faults take longer than the records between them would (a JVM start each, under load): the
# feed stays at most this far past the next fault's point until it struck.
LEAD = max(CHUNK, int(30_000 * min(1.0, SCALE)))
FLUSH = ("5000", "7000")  # a config change alternates flush.max.records
SESSION_S = 6.0  # support.cluster's session.timeout.ms
RECOVERY_S = 240.0  # a restarted worker running tasks again, under load, JVM start included


@dataclass
class Fault:
    kind: str
    at: int  # offsets both tables must cover first
    delay: float  # then this long (a random moment, not a synchronisation)
    leader: bool = False  # a kill or a stop of the leader, whichever worker leads then

    def __str__(self) -> str:
        who = " (leader)" if self.leader else ""
        return f"{self.kind}{who} @{self.at}+{self.delay:.1f}s"


def plan(rng: random.Random) -> list[Fault]:
    """The faults in the order they strike."""
    faults = []
    for kind, count in COUNTS.items():
        top = 0.55 if kind in WORKER_FAULTS else 0.93
        for i in range(max(1, round(count * SCALE))):
            at = int(RECORDS * rng.uniform(0.03, top))
            leads = kind in ("kill", "stop") and i % 3 == 0
            faults.append(Fault(kind, at, rng.uniform(0.0, 3.0), leads))
    faults.sort(key=lambda f: f.at)
    return faults


def _writers(w: ClusterWorker) -> dict[int, float]:
    """The executors of ``w`` that have taken a write (its log says which: "executor N (pid P)
    leased to task ...") and are alive now, each with the processes below it (its JVM, Spark's
    Python workers), with start times. An executor still starting when the worker stopped held
    no incarnation's work; it is not among them."""
    leased = {int(pid) for pid in re.findall(r"\(pid (\d+)\) leased to task", w.log())}
    found: dict[int, float] = {}
    for pid in leased & set(w.descendants()):
        with contextlib.suppress(psutil.Error):
            below = [p.pid for p in psutil.Process(pid).children(recursive=True)]
            found.update(tree(pid, below))
    return found


def _tasks_on(w: ClusterWorker, names: tuple[str, ...], asked: ClusterWorker | None = None) -> int:
    """How many tasks RUNNING on ``w`` the worker ``asked`` (default ``w``) shows (0 if it does
    not answer)."""
    n = 0
    for name in names:
        body = (asked or w).status(name) or {}
        n += sum(
            1
            for t in body.get("tasks", [])
            if t.get("worker_id") == w.worker_id and t.get("state") == "RUNNING"
        )
    return n


def _shape(body: dict[str, Any] | None) -> Any:
    """What every worker must answer alike about a connector: its state and each task's state,
    worker, incarnation and epoch."""
    if body is None:
        return None
    keys = ("id", "state", "worker_id", "incarnation", "epoch", "executor_pid")
    tasks = sorted((tuple(t.get(k) for k in keys) for t in body.get("tasks", [])), key=str)
    conn = body.get("connector", {})
    return (conn.get("state"), conn.get("worker_id"), tuple(tasks))


class Soak:
    def __init__(
        self, c: Cluster, broker: KafkaBroker, topic: str, parquet: Path, delta: Path
    ) -> None:
        self.c, self.broker, self.topic = c, broker, topic
        self.parquet, self.delta = parquet, delta
        self.delta_commits = DeltaCommits(delta)
        self.feed = Feed(broker, topic, RECORDS, self.progress, BACKLOG, self.ceiling)
        #: The point the next fault strikes at (RECORDS once all struck): the feed stays within
        #: LEAD of it, so every fault strikes while records flow.
        self.next_at = 0
        self.remaining = 0  # faults not struck yet (the plan's length at the start)
        self.started_at = time.monotonic()
        self.killed: dict[int, float] = {}  # every process of every killed worker
        self.fenced: dict[int, float] = {}  # a stopped worker's executors and their JVMs
        self.done: list[str] = []
        self.rss: dict[tuple[str, int], float] = {}  # (worker, start) → MB at its 100k
        self.born: dict[tuple[str, int], int] = {}  # (worker, start) → progress at its start
        self.busy: set[str] = set()  # workers a fault is acting on: not expected alive
        self.flush = 0
        self.names = ("soak-parquet", "soak-delta")
        self.configs: dict[str, dict[str, str]] = {}
        self.rng = random.Random(0)

    def tables(self) -> tuple[int, int]:
        return committed(self.parquet), self.delta_commits.committed()

    def progress(self) -> int:
        """Offsets both tables cover; fails at once if a worker ended without a fault."""
        for w in self.c:
            if w.worker_id not in self.busy and not w.alive:
                code = w.proc.returncode if w.proc is not None else None
                raise AssertionError(f"worker {w.worker_id} exited ({code}):\n{w.log()}")
        return min(self.tables())

    def ceiling(self) -> int:
        if self.remaining == 0:
            return RECORDS
        return min(RECORDS, self.next_at + LEAD)

    def started(self, w: ClusterWorker) -> None:
        self.born[(w.worker_id, w.starts)] = self.progress()

    async def victim(self, fault: Fault) -> ClusterWorker:
        live = [w for w in self.c if w.alive]
        if fault.leader:
            with contextlib.suppress(AssertionError):
                return await leader(self.c, 60)
        return self.rng.choice(live)

    async def strike(self, fault: Fault) -> str:
        self.next_at = fault.at
        await wait_until(
            lambda: self.progress() >= fault.at, 1800, f"{fault.at} committed", interval=0.5
        )
        await asyncio.sleep(fault.delay)
        at = self.tables()
        began = time.monotonic()
        what = await getattr(self, f"fault_{fault.kind}")(fault)
        took = time.monotonic() - began
        self.done.append(f"{fault}: {what} at {at}, {took:.1f} s")
        self.remaining -= 1
        self.watch_rss()
        return self.done[-1]

    async def back(self, w: ClusterWorker, why: str) -> float:
        """Until ``w`` answers REST and runs tasks itself again; the seconds it took."""
        began = time.monotonic()
        await self.c.ready(w, timeout=RECOVERY_S)
        self.busy.discard(w.worker_id)
        self.started(w)
        # Every live worker agrees that it runs tasks (its own view right after a SIGCONT is
        # the one it had before the stop).
        await self.c.wait(
            lambda other: _tasks_on(w, self.names, other) > 0,
            RECOVERY_S,
            f"{w.worker_id} running tasks {why}",
            interval=0.5,
        )
        return time.monotonic() - began

    async def fault_kill(self, fault: Fault) -> str:
        w = await self.victim(fault)
        self.busy.add(w.worker_id)
        victims = tree(w.pid, w.descendants())
        w.signal(signal.SIGKILL)
        await asyncio.to_thread(w.wait, 10)
        self.killed.update(victims)
        # Its executors and their JVMs die with it (parent-death signal, end of pipe).
        await wait_until(
            lambda: not alive(victims),
            30,
            f"the killed worker {w.worker_id}'s processes gone",
        )
        w.start()
        w.note()
        again = await self.back(w, "after its SIGKILL")
        return f"{w.worker_id} and {len(victims) - 1} below it; running tasks {again:.1f} s later"

    async def fault_stop(self, fault: Fault) -> str:
        w = await self.victim(fault)
        ran = await asyncio.to_thread(_tasks_on, w, self.names)
        below = _writers(w)
        self.busy.add(w.worker_id)
        w.signal(signal.SIGSTOP)
        # The length of the stop is the fault under test, not a synchronisation.
        stopped = SESSION_S + random.Random(len(self.done)).uniform(2.0, 8.0)
        await asyncio.sleep(stopped)
        w.signal(signal.SIGCONT)
        self.busy.discard(w.worker_id)
        gone = ""
        if ran:
            # Back, it finds itself no member: its tasks stop and every executor that wrote
            # for them (and each one's JVM) is killed before it rejoins.
            self.fenced.update(below)
            deadline = time.monotonic() + 60
            while left := alive(below):
                assert time.monotonic() < deadline, (
                    f"processes {w.worker_id} had while stopped, alive 60 s after: {left}"
                )
                await asyncio.sleep(0.2)
            gone = f", its {len(below)} processes below gone"
        again = await self.back(w, "after its SIGSTOP")
        return (
            f"{w.worker_id} ({ran} tasks) {stopped:.1f} s{gone}; running tasks {again:.1f} s later"
        )

    async def fault_broker(self, fault: Fault) -> str:
        return await self.feed.outage(random.Random(len(self.done)))

    async def fault_rolling(self, fault: Fault) -> str:
        took = []
        for w in self.c:
            self.busy.add(w.worker_id)
            began = time.monotonic()
            w.note()
            w.signal(signal.SIGTERM)
            code = await asyncio.to_thread(w.wait, 90)
            assert code == 0, f"{w.worker_id} exited {code} on SIGTERM:\n{w.log()}"
            left = w.descendants()
            assert not left, f"{w.worker_id} left {left} behind on SIGTERM"
            w.start()
            w.note()
            await self.back(w, "after its restart")
            took.append(f"{time.monotonic() - began:.0f}")
        return f"workers back in {'/'.join(took)} s"

    async def fault_put(self, fault: Fault) -> str:
        name = self.rng.choice(self.names)
        self.flush += 1
        config = dict(self.configs[name], **{"flush.max.records": FLUSH[self.flush % 2]})
        w = self.rng.choice([w for w in self.c if w.alive])
        code, body = await self._retry(w, "PUT", f"/connectors/{name}/config", config)
        assert code == 200, (code, body)
        self.configs[name] = config
        return f"{name} flush.max.records={config['flush.max.records']} through {w.worker_id}"

    async def fault_restart(self, fault: Fault) -> str:
        name = self.rng.choice(self.names)
        task = self.rng.randrange(TASKS)
        w = self.rng.choice([w for w in self.c if w.alive])
        code, body = await self._retry(w, "POST", f"/connectors/{name}/tasks/{task}/restart")
        assert code in (200, 202, 204), (code, body)
        return f"{name}-{task} through {w.worker_id}"

    async def _retry(
        self, w: ClusterWorker, method: str, path: str, body: Any = None
    ) -> tuple[int, Any]:
        """A request sent again while the cluster is between leaders or owners (409, no
        answer) for up to two minutes; the last answer."""
        deadline = time.monotonic() + 120
        while True:
            code, answer = await asyncio.to_thread(w.try_rest, method, path, body, timeout=30)
            if code not in (0, 409) or time.monotonic() > deadline:
                return code, answer
            await asyncio.sleep(0.5)

    def watch_rss(self) -> None:
        """Each worker start's RSS once both tables gained 100,000 records since it started."""
        with contextlib.suppress(AssertionError):
            now = self.progress()
            for w in self.c:
                key = (w.worker_id, w.starts)
                if key in self.rss or key not in self.born or not w.alive:
                    continue
                if now >= self.born[key] + 100_000 * SCALE:
                    with contextlib.suppress(psutil.Error):
                        self.rss[key] = rss_mb(w.pid)

    async def watch(self) -> None:
        while True:
            self.watch_rss()
            for w in self.c:
                if w.alive:
                    w.note()  # every process ever below a worker, for the teardown's check
            await asyncio.sleep(1.0)  # a sampling period, not a synchronisation


async def _same_everywhere(c: Cluster, names: tuple[str, ...]) -> dict[str, Any]:
    """Until every worker answers the same status for each connector, all tasks RUNNING."""

    def agreed() -> dict[str, Any] | None:
        found = {}
        for name in names:
            shapes = [_shape(w.status(name)) for w in c]
            first = shapes[0]
            if first is None or any(s != first for s in shapes):
                return None
            state, _, tasks = first
            if state != "RUNNING" or len(tasks) != TASKS:
                return None
            if any(t[1] != "RUNNING" for t in tasks):
                return None
            found[name] = first
        return found

    seen: dict[str, Any] = {}

    def check() -> bool:
        got = agreed()
        if got is not None:
            seen.update(got)
        return got is not None

    await wait_until(check, 300, "every task RUNNING and every worker answering the same")
    return seen


async def test_a_million_records_through_a_cluster_under_sixty_faults(
    own_broker: KafkaBroker, tmp_path: Path
) -> None:
    seed = soak_seed()
    rng = random.Random(seed)
    faults = plan(rng)
    head = f"cluster soak seed {seed} (CONNECTD_SOAK_SEED={seed} to replay), {RECORDS} records"
    print(f"\n{head}\nplan: {'; '.join(map(str, faults))}", flush=True)

    bootstrap = own_broker.bootstrap
    topic = await create_topic(bootstrap, "soak", PARTITIONS)
    run = uuid.uuid4().hex[:8]
    c = Cluster(bootstrap, ClusterNames.unique("soak", run), run, tmp_path / "cluster", set())
    for _ in range(WORKERS):
        c.add(task_shutdown_graceful_timeout_ms="2000")
    soak = Soak(c, own_broker, topic, tmp_path / "parquet", tmp_path / "delta")
    soak.rng = random.Random(seed + 1)
    common = {
        "topics": topic,
        "tasks.max": str(TASKS),
        "flush.max.records": FLUSH[0],
        "flush.interval.ms": "2000",
        # Killed JVMs fail tasks over and over: restart them always, quickly.
        "errors.restart.max": "-1",
        "errors.restart.backoff.max.ms": "2000",
    }
    soak.configs = {
        "soak-parquet": {**common, "connector.class": "ParquetSink", "path": str(soak.parquet)},
        "soak-delta": {**common, "connector.class": "DeltaSink", "path": str(soak.delta)},
    }
    producer = watcher = None
    try:
        await c.start()
        for w in c:
            soak.started(w)
        for name, config in soak.configs.items():
            code, body = await c.write(
                c[0], "POST", "/connectors", {"name": name, "config": config}
            )
            assert code == 201, body
        soak.remaining = len(faults)
        producer = asyncio.create_task(soak.feed.run())
        watcher = asyncio.create_task(soak.watch())
        await strike_all(producer, faults, soak.strike)
        await wait_until(lambda: soak.progress() >= RECORDS, 1800, "caught up", interval=0.5)
        took = time.monotonic() - soak.started_at
        statuses = await _same_everywhere(c, soak.names)
        soak.watch_rss()
        ends = {}
        for w in c:
            with contextlib.suppress(psutil.Error):
                ends[(w.worker_id, w.starts)] = rss_mb(w.pid)
    finally:
        for t in (watcher, producer):
            if t is not None:
                t.cancel()
        await end_clusters([c], bootstrap)  # SIGTERM each worker; fails if a process is left

    left = alive(soak.killed | soak.fenced)
    parquet = audit(soak.parquet)
    delta = rows_with_deltalake(soak.delta, ["kafka_partition", "kafka_offset", "value"])
    delta_pairs = delta.group_by(["kafka_partition", "kafka_offset"]).aggregate([]).num_rows
    delta_values = pc.count_distinct(pc.utf8_slice_codeunits(delta.column("value"), 0, 8)).as_py()
    rss = {f"{k[0]}#{k[1]}": f"{soak.rss.get(k, 0):.0f} → {v:.0f}" for k, v in ends.items()}
    lines = [
        head,
        f"took {took:.0f} s; {len(soak.done)} faults struck",
        f"parquet: {parquet}",
        f"delta: rows {delta.num_rows}, distinct (partition, offset) {delta_pairs},"
        f" distinct values {delta_values}, committed {soak.delta_commits.committed()}",
        f"produced {soak.feed.produced}",
        f"RSS MB of each worker's last start, at its first 100k records → at the end: {rss}",
        f"processes of killed workers {len(soak.killed)}, of fenced executors"
        f" {len(soak.fenced)}, alive: {len(left)}",
        f"statuses at the end: {statuses}",
        *soak.done,
    ]
    report(f"cluster-{seed}", lines)

    assert not left, left
    assert parquet.rows == parquet.distinct == parquet.values == soak.feed.produced == RECORDS
    assert parquet.committed == RECORDS
    assert delta.num_rows == delta_pairs == delta_values == RECORDS
    assert soak.delta_commits.committed() == RECORDS
    for key, end in ends.items():
        assert key in soak.rss, f"{key}: no RSS at its 100k records ({soak.rss})"
        assert end <= soak.rss[key] * 1.2, (key, soak.rss[key], end)
