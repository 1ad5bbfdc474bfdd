"""The long soak (``make soak``, never ``make test``): 1,000,000 records into 6 partitions streamed
through ``connectd standalone`` (a real process, a real broker of its own, Spark) into a Parquet
table while, at random moments, the daemon is SIGKILLed 30 times, executor JVMs 40 times, the
broker is stopped and started 5 times and SIGHUP reloads 25 times.

At the end: rows == distinct (partition, offset) == produced, every record's value once; no
process of any killed incarnation (daemon, executor, JVM) is alive; the commit log opens in
bounded time with a bounded number of records on disk (checkpoints and clean-up run: a short
``commit.log.retention.ms``); the last daemon's RSS after the run is within 20% of its RSS after
its first 100,000 records.

The plan of faults comes from a seed, printed first (``CONNECTD_SOAK_SEED=<n>`` replays it). Each
fault strikes once the table's commit log (read by this test, never through the daemon) covers a
progress point, after a random delay of up to 3 s; a quarter of the daemon kills and reloads are
"early": they strike a random 0–12 s after the previous daemon start, whatever it is doing
(loading files, starting executors, restoring offsets). Daemon kills fall in the first 55% of
the run, so the last incarnation lives through at least 450,000 records, broker outages, JVM
kills and reloads, which is what its RSS is compared over.

``CONNECTD_SOAK_SCALE=0.1`` runs a tenth (records and faults) for a trial. The figures go to
stdout and to ``.cache/soak/<seed>.txt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka import KafkaBroker, create_topic
from support.soak import SCALE, Feed, alive, report, rss_mb, strike_all, tree
from support.soak import seed as soak_seed
from support.tables import committed

from daemon.storage.commitlog import META, CommitLog

pytestmark = [pytest.mark.integration, pytest.mark.soak, pytest.mark.timeout(5400)]

RECORDS = int(1_000_000 * SCALE)
PARTITIONS = 6
COUNTS = {"daemon": 30, "jvm": 40, "broker": 5, "hup": 25}
BACKLOG = 150_000  # the producer stays at most this far ahead of the table


@dataclass
class Fault:
    kind: str
    at: int  # committed offsets that must be reached first (ignored if early)
    delay: float  # then this long (a random moment, not a synchronisation)
    early: bool = False  # strike `delay` s after the last daemon start instead

    def __str__(self) -> str:
        when = f"{self.delay:.1f}s after a start" if self.early else f"@{self.at}+{self.delay:.1f}s"
        return f"{self.kind} {when}"


def plan(rng: random.Random) -> list[Fault]:
    """The faults in the order they strike."""
    faults = []
    for kind, count in COUNTS.items():
        n = max(1, round(count * SCALE))
        top = 0.55 if kind == "daemon" else 0.93
        for _ in range(n):
            at = int(RECORDS * rng.uniform(0.03, top))
            early = kind in ("daemon", "hup") and rng.random() < 0.25
            delay = rng.uniform(0.5, 12.0) if early else rng.uniform(0.0, 3.0)
            faults.append(Fault(kind, at, delay, early))
    faults.sort(key=lambda f: f.at)
    return faults


def _jvms(p: DaemonProcess) -> list[int]:
    """The executors' Spark JVMs (not, say, the ``java -version`` of the daemon's start-up)."""
    out = []
    for pid in p.descendants():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.name() == "java" and "org.apache.spark.deploy.SparkSubmit" in proc.cmdline():
                out.append(pid)
    return out


class Soak:
    def __init__(self, broker: KafkaBroker, p: DaemonProcess, table: Path, topic: str) -> None:
        self.broker, self.p, self.table, self.topic = broker, p, table, topic
        self.feed = Feed(broker, topic, RECORDS, self.progress, BACKLOG)
        self.started_at = time.monotonic()
        self.killed: dict[int, float] = {}  # every process of every killed incarnation
        self.done: list[str] = []
        self.rss: dict[str, float] = {}
        self.reloads = 0
        self.flush_records = ["5000", "7000"]
        self.last_start_committed = 0
        self.last_start = time.monotonic()
        self.killing = False

    def progress(self) -> int:
        """Offsets committed; fails at once if the daemon ended without being killed."""
        proc = self.p.proc
        if not self.killing and proc is not None and proc.poll() is not None:
            raise AssertionError(f"the daemon exited ({proc.returncode}):\n{self.p.log()}")
        return committed(self.table)

    async def strike(self, fault: Fault) -> str:
        if fault.early:
            await asyncio.sleep(max(0.0, self.last_start + fault.delay - time.monotonic()))
        else:
            await wait_until(
                lambda: self.progress() >= fault.at, 1800, f"{fault.at} committed", interval=0.5
            )
            await asyncio.sleep(fault.delay)
        at = self.progress()
        what = await getattr(self, f"fault_{fault.kind}")()
        self.done.append(f"{fault}: {what} at {at}")
        self.watch_rss()
        return self.done[-1]

    async def fault_daemon(self) -> str:
        self.progress()  # alive until now
        victims = tree(self.p.pid, self.p.descendants())
        self.killing = True
        self.p.signal(signal.SIGKILL)
        await asyncio.to_thread(self.p.wait, 10)
        self.killed.update(victims)
        # Its executors and their JVMs die with it (parent-death signal, end of pipe).
        await wait_until(
            lambda: not alive(victims),
            20,
            "the killed daemon's processes gone",
        )
        self.p.start()
        self.killing = False
        self.last_start = time.monotonic()
        self.last_start_committed = self.progress()
        self.rss.pop("incarnation 100k", None)
        return f"pid {next(iter(victims))} and {len(victims) - 1} below it"

    async def fault_jvm(self) -> str:
        found: list[int] = []

        def some() -> bool:
            found[:] = _jvms(self.p)
            return bool(found)

        await wait_until(some, 120, "an executor JVM to kill")
        victim = random.Random(self.p.pid + len(self.done)).choice(found)
        with contextlib.suppress(psutil.Error):
            self.killed[victim] = psutil.Process(victim).create_time()
        os.kill(victim, signal.SIGKILL)
        return f"JVM {victim}"

    async def fault_broker(self) -> str:
        return await self.feed.outage(random.Random(len(self.done)))

    async def fault_hup(self) -> str:
        # Every other reload changes the connector (a restart of its tasks, a new epoch).
        self.flush_records.reverse()
        path = self.p.connector_files[0]
        text = path.read_text().splitlines()
        lines = [
            f"flush.max.records={self.flush_records[0]}"
            if line.startswith("flush.max.records=")
            else line
            for line in text
        ]
        path.write_text("\n".join(lines) + "\n")
        self.p.signal(signal.SIGHUP)
        self.reloads += 1
        return f"reload {self.reloads} (flush.max.records={self.flush_records[0]})"

    def watch_rss(self) -> None:
        """The daemon's RSS at its first 100,000 records, the run's and this incarnation's."""
        now = self.progress()
        with contextlib.suppress(psutil.Error, AssertionError):
            if "run 100k" not in self.rss and now >= 100_000 * SCALE:
                self.rss["run 100k"] = rss_mb(self.p.pid)
            if (
                "incarnation 100k" not in self.rss
                and now >= self.last_start_committed + 100_000 * SCALE
            ):
                self.rss["incarnation 100k"] = rss_mb(self.p.pid)

    async def watch(self) -> None:
        while True:
            self.watch_rss()
            await asyncio.sleep(1.0)  # a sampling period, not a synchronisation


async def test_a_million_records_exactly_once_through_a_hundred_faults(
    daemon_process: ProcessFactory, own_broker: KafkaBroker, tmp_path: Path
) -> None:
    seed = soak_seed()
    rng = random.Random(seed)
    faults = plan(rng)
    head = f"soak seed {seed} (CONNECTD_SOAK_SEED={seed} to replay), {RECORDS} records"
    print(f"\n{head}\nplan: {'; '.join(map(str, faults))}", flush=True)

    topic = await create_topic(own_broker.bootstrap, "soak", PARTITIONS)
    table = tmp_path / "table"
    worker = worker_properties(
        own_broker.bootstrap,
        tmp_path / "state",
        **{
            "task.shutdown.graceful.timeout.ms": "2000",
            "executor.spark.master": "local[2]",
            # JVMs to kill: ParquetSink's pyarrow writes alone would start none.
            "executor.spark.session": "always",
        },
    )
    sink = {
        "name": "soak",
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "3",
        "path": str(table),
        "flush.max.records": "5000",
        "flush.interval.ms": "2000",
        # Killed JVMs fail tasks over and over: restart them always, quickly.
        "errors.restart.max": "-1",
        "errors.restart.backoff.max.ms": "2000",
        # Checkpoints and clean-up at work during the run.
        "commit.log.checkpoint.interval": "10",
        "commit.log.retention.ms": "60000",
    }
    p = daemon_process(worker, [sink], wait=False)
    soak = Soak(own_broker, p, table, topic)
    producer = asyncio.create_task(soak.feed.run())
    watcher = asyncio.create_task(soak.watch())
    try:
        await strike_all(producer, faults, soak.strike)
        await wait_until(lambda: soak.progress() >= RECORDS, 1800, "caught up", interval=0.5)
        soak.watch_rss()
        with contextlib.suppress(psutil.Error):
            soak.rss["end"] = rss_mb(p.pid)
    finally:
        watcher.cancel()
        producer.cancel()
    took = time.monotonic() - soak.started_at
    final_tree = tree(p.pid, p.descendants())
    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 120) == 0, p.log()

    # Every process of every killed incarnation is gone; the last one left nothing either.
    left = alive(soak.killed | final_tree)
    assert not left, left

    t0 = time.monotonic()
    log = CommitLog(table).open_read_only()
    opened_s = time.monotonic() - t0
    ends = log.committed_offsets()
    on_disk = len(os.listdir(table / META / "log"))
    data = ds.dataset(table, format="parquet").to_table(
        columns=["kafka_partition", "kafka_offset", "value"]
    )
    pairs = data.group_by(["kafka_partition", "kafka_offset"]).aggregate([]).num_rows
    values = pc.count_distinct(pc.utf8_slice_codeunits(data.column("value"), 0, 8)).as_py()
    lines = [
        head,
        f"took {took:.0f} s; {len(soak.done)} faults struck",
        f"rows {data.num_rows}, distinct (partition, offset) {pairs}, distinct values {values},"
        f" produced {soak.feed.produced}, committed {sum(ends.values())}",
        f"commit log: open {opened_s:.3f} s, {log.last_seq()} records in all, {on_disk} on disk,"
        f" {log.records_in_memory()} in memory",
        f"daemon RSS MB: {soak.rss}",
        f"processes of killed incarnations: {len(soak.killed)}, alive: {len(left)}",
        *soak.done,
    ]
    report(str(seed), lines)

    assert data.num_rows == pairs == soak.feed.produced == RECORDS
    assert values == RECORDS  # every record, none twice
    assert sum(ends.values()) == RECORDS
    assert opened_s < 2.0, opened_s
    # Retention 60 s and a checkpoint every 10: the clean-up ran, however often tasks restarted.
    assert on_disk < log.last_seq() // 2, (on_disk, log.last_seq())
    base, end = soak.rss["incarnation 100k"], soak.rss["end"]
    assert end <= base * 1.2, soak.rss
