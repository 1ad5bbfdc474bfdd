"""What the failover, rolling-restart and zombie tests of distributed mode share, on top of
``support.cluster`` (the harness):

- ``Stream``: a producer task that keeps records flowing into every partition of a topic while
  workers die, and says how many the broker acknowledged;
- ``placement`` / ``settled``: where each task of a connector runs, as every chosen worker
  shows it (``GET /connectors/{c}/status``), and a wait until they agree that all run;
- ``leader``: the worker whose ``/metrics`` says ``connectd_cluster_leader 1.0``;
- ``audit`` and ``commit_records``: the table read back with pyarrow (rows and distinct
  ``(kafka_partition, kafka_offset)``) and its commit log read as a test reads it, never
  through a worker; ``epochs_of`` / ``committed_again``: which incarnation (task, epoch)
  committed, to tell a task's new owner from its old one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
from aiokafka import AIOKafkaProducer

from daemon.storage.commitlog import META, CommitLog
from daemon.storage.records import CommitRecord
from support.cluster import Cluster, ClusterWorker
from support.tables import committed

PAD = b"x" * 100


def sink_config(topic: str, table: Path, tasks: int, **extra: str) -> dict[str, str]:
    """A ParquetSink that commits often (small flushes), so that a failover lands between
    commits of every task, and restarts a failed task after seconds, not minutes."""
    return {
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": str(tasks),
        "path": str(table),
        "flush.max.records": "300",
        "flush.interval.ms": "2000",
        "errors.restart.backoff.max.ms": "2000",
        **extra,
    }


class Stream:
    """Records into every partition of ``topic``, round-robin, ``rate`` a second, from a task
    on the test's loop, until ``stop()``; each value carries its sequence number, so a row
    says which record it is. Every record is acknowledged (acks=all) before ``stop`` returns
    the count."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 150.0):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.sent = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> Stream:
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        await self._producer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        assert self._producer is not None
        tick = 0.05
        per_tick = max(1, round(self.rate * tick))
        pending: list[asyncio.Future[Any]] = []
        while not self._stop.is_set():
            began = time.monotonic()
            for _ in range(per_tick):
                value = b"%08d" % self.sent + PAD
                partition = self.sent % self.partitions
                pending.append(await self._producer.send(self.topic, value, partition=partition))
                self.sent += 1
            done = [f for f in pending if f.done()]
            for f in done:
                f.result()  # a failed send fails the test, with the broker's error
            pending = [f for f in pending if not f.done()]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, tick - (time.monotonic() - began))):
                    await self._stop.wait()
        for f in pending:
            await f

    async def stop(self) -> int:
        """Stop producing; the number of records produced, every one acknowledged."""
        self._stop.set()
        try:
            if self._task is not None:
                await self._task
        finally:
            if self._producer is not None:
                await self._producer.stop()
                self._producer = None
        return self.sent

    async def close(self) -> None:
        """Teardown: stop whatever happened (idempotent)."""
        with contextlib.suppress(Exception):
            await self.stop()


Placement = dict[int, str]
"""Task number → the ``worker_id`` running it."""


def placement(worker: ClusterWorker, connector: str, tasks: int) -> Placement | None:
    """Where ``worker`` says each task runs, when it shows all ``tasks`` RUNNING; else None."""
    body = worker.status(connector)
    if body is None:
        return None
    seen = {t.get("id"): t for t in body.get("tasks", [])}
    if sorted(seen) != list(range(tasks)):
        return None
    if not all(t.get("state") == "RUNNING" for t in seen.values()):
        return None
    return {i: str(seen[i].get("worker_id")) for i in range(tasks)}


async def settled(
    c: Cluster,
    connector: str,
    tasks: int,
    timeout: float,
    *,
    on: Sequence[ClusterWorker],
    where: Any = None,
) -> Placement:
    """Until every worker of ``on`` shows all ``tasks`` RUNNING, all on workers of ``on``, and
    they agree on the placement (and ``where(placement)`` holds, when given)."""
    ids = {w.worker_id for w in on}

    def check(w: ClusterWorker) -> Placement | None:
        found = placement(w, connector, tasks)
        if found is None or not set(found.values()) <= ids:
            return None
        return found if where is None or where(found) else None

    deadline = time.monotonic() + timeout
    while True:
        left = max(0.1, deadline - time.monotonic())
        seen = await c.wait(check, left, f"{connector}: {tasks} tasks RUNNING on {ids}", workers=on)
        if all(s == seen[0] for s in seen):
            return dict(seen[0])
        await asyncio.sleep(0.1)


def metrics(worker: ClusterWorker, timeout: float = 5.0) -> str:
    """``GET /metrics`` (Prometheus text); empty when the worker does not answer."""
    try:
        with urllib.request.urlopen(worker.url + "/metrics", timeout=timeout) as response:
            return str(response.read().decode())
    except (OSError, urllib.error.URLError):
        return ""


LEADER_GAUGE = "connectd_cluster_leader"


def leads(worker: ClusterWorker) -> bool:
    """Whether ``worker`` says it leads: ``connectd_cluster_leader 1.0`` in its ``/metrics``."""
    found = [ln.split() for ln in metrics(worker).splitlines() if ln.startswith(LEADER_GAUGE + " ")]
    return bool(found) and float(found[0][1]) == 1.0


def _find_leader(workers: Sequence[ClusterWorker]) -> ClusterWorker | None:
    found = [w for w in workers if leads(w)]
    return found[0] if len(found) == 1 else None


async def leader(c: Cluster, timeout: float = 60.0) -> ClusterWorker:
    """The one live worker that leads, as ``/metrics`` says (waits through a rebalance)."""
    deadline = time.monotonic() + timeout
    while True:
        live = [w for w in c if w.alive]
        if found := await asyncio.to_thread(_find_leader, live):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no single leader within {timeout} s")
        await asyncio.sleep(0.2)


@dataclass(frozen=True)
class Audit:
    rows: int
    distinct: int
    values: int
    committed: int


def audit(table: Path) -> Audit:
    """The table as any reader sees it (pyarrow skips the ``_``-prefixed staging and log
    directories): rows, distinct (partition, offset), distinct record numbers; and the offsets
    its commit log covers."""
    data = ds.dataset(table, format="parquet").to_table(
        columns=["kafka_partition", "kafka_offset", "value"]
    )
    pairs = data.group_by(["kafka_partition", "kafka_offset"]).aggregate([])
    numbers = pc.count_distinct(pc.utf8_slice_codeunits(data.column("value"), 0, 8)).as_py()
    return Audit(data.num_rows, pairs.num_rows, numbers, committed(table))


async def caught_up(table: Path, produced: int, timeout: float) -> float:
    """Until the commit log covers ``produced`` offsets; the seconds it took."""
    began = time.monotonic()
    deadline = began + timeout
    while (done := await asyncio.to_thread(committed, table)) < produced:
        if time.monotonic() > deadline:
            raise AssertionError(f"{done} of {produced} offsets committed after {timeout} s")
        await asyncio.sleep(0.2)
    return time.monotonic() - began


def commit_records(table: Path) -> list[CommitRecord]:
    """Every record of the table's commit log still on disk (the audit trail), in order."""
    if not (table / META / "log").is_dir():
        return []
    log = CommitLog(table).open_read_only()
    try:
        return log.records()
    finally:
        log.close()


def last_seq(table: Path) -> int:
    records = commit_records(table)
    return records[-1].seq if records else 0


def epochs_of(table: Path, tasks: Sequence[int]) -> dict[int, int]:
    """Each task's newest epoch in the commit log (its claim or its commits): while a task's
    partitions stay with one incarnation, that incarnation's epoch."""
    records = commit_records(table)
    return {t: max((r.epoch or 0 for r in records if r.task == t), default=0) for t in tasks}


def committed_again(table: Path, epochs: dict[int, int]) -> bool:
    """Whether every task of ``epochs`` has committed data as a newer incarnation."""
    newer = {
        r.task
        for r in commit_records(table)
        if r.kind == "commit" and r.task in epochs and (r.epoch or 0) > epochs[r.task]
    }
    return newer == set(epochs)
