"""One worker carrying 1, 20 and 100 ParquetSink connectors: memory, processes, and how soon
new records reach every table.

For each count (and, as the peer, with ``write.engine=spark`` for ``--spark-counts``), a real
``python -m daemon standalone`` (the worker file and one properties file per connector, as a
user runs it; default executor pool: one executor, one spare) runs
that many ParquetSink connectors with ``tasks.max=2`` on two-partition topics. Each topic gets
20 records and the bench waits until every table holds them (every task has written), then
measures:

- **latency**: 100 new records per topic, one producer; seconds from the last acknowledgement
  until every table's commit log covers them (median of ``--rounds``);
- **memory when idle**: once the pool's class-data archive is built (a builder executor runs
  once per JDK, Spark and settings), ``--idle`` seconds later, the RSS and PSS of the whole
  process tree (PSS shares pages between processes fairly: the tree's PSS is what it costs the
  machine), per kind of process: the daemon, the REST front, executors' Python processes,
  their JVMs, PySpark's workers.

The daemon is ended with SIGTERM (its tree by PID after 60 s). Numbers are printed, never
asserted.

    .venv/bin/python bench/many_connectors_bench.py                 # starts its own broker
    .venv/bin/python bench/many_connectors_bench.py --counts 1,20 --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from aiokafka import AIOKafkaProducer  # noqa: E402
from support.kafka import KafkaBroker, create_topic, unique_topic_name  # noqa: E402

from daemon.storage.commitlog import CommitLog  # noqa: E402
from daemon.storage.staging import META  # noqa: E402

PARTITIONS = 2


def committed(table: Path) -> int:
    if not (table / META / "log").is_dir():
        return 0
    try:
        return sum(CommitLog(table).open_read_only().committed_offsets().values())
    except Exception:  # a record being published or cleaned up: read it next time
        return -1


def tree(root: int) -> list[int]:
    """``root`` and every descendant, by /proc's children lists."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return out


def archive_builder(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"-XX:ArchiveClassesAtExit" in f.read()
    except OSError:
        return False


async def settled(root: int, quiet: float = 30.0, timeout: float = 900.0) -> None:
    """Until the pool is as it stays: its executor and spare up (two JVMs) and no class-data
    archive builder for ``quiet`` seconds. The builder (an executor started with
    ``-XX:ArchiveClassesAtExit`` once every executor is ready, once per JDK, Spark and
    settings) is a one-time cost, not what connectors hold."""
    deadline, since = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() < deadline:
        pids = tree(root)
        jvms = [p for p in pids if kind(p) == "executor JVM" and not archive_builder(p)]
        if any(map(archive_builder, pids)) or len(jvms) < 2:
            since = time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        await asyncio.sleep(1)


def kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "java" in cmd.split(" ", 1)[0]:
        return "archive builder" if "-XX:ArchiveClassesAtExit" in cmd else "executor JVM"
    if "daemon.executor.child" in cmd:
        return "executor Python"
    if "pyworker" in cmd or "pyspark" in cmd:
        return "PySpark worker"
    if "daemon.rest" in cmd or "front" in cmd:
        return "REST front"
    if "daemon" in cmd:
        return "daemon"
    return "other"


def memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def census(root: int) -> dict[str, list[int]]:
    """Per kind of process: [count, RSS KiB, PSS KiB]."""
    out: dict[str, list[int]] = {}
    for pid in tree(root):
        rss, pss = memory(pid)
        row = out.setdefault(kind(pid), [0, 0, 0])
        row[0] += 1
        row[1] += rss
        row[2] += pss
    return out


async def produce_all(bootstrap: str, topics: list[str], n: int) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [await producer.send(t, value=b"value-%d" % i) for t in topics for i in range(n)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return time.monotonic()


async def until_all(tables: list[Path], n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(await asyncio.to_thread(lambda: [committed(t) == n for t in tables])):
        if time.monotonic() > deadline:
            behind = [t.name for t in tables if committed(t) != n]
            raise TimeoutError(f"{len(behind)} tables short of {n} after {timeout} s: {behind[:5]}")
        await asyncio.sleep(0.05)


def write_properties(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


async def one_count(
    bootstrap: str, count: int, engine: str, args: Any, scratch: Path
) -> dict[str, Any]:
    work = scratch / f"n{count}-{engine}"
    work.mkdir()
    topics = []
    for _ in range(count):
        topic = unique_topic_name("many")
        await create_topic(bootstrap, topic, partitions=PARTITIONS)
        topics.append(topic)
    tables = [work / f"table-{i}" for i in range(count)]
    worker = write_properties(
        work / "worker.properties",
        {
            "bootstrap.servers": bootstrap,
            "listeners": "http://127.0.0.1:0",
            "state.dir": str(work / "state"),
            "key.converter": "string",
            "value.converter": "string",
            "log.level": "WARNING",
        },
    )
    files = [
        write_properties(
            work / f"c{i}.properties",
            {
                "name": f"many-{i}",
                "connector.class": "ParquetSink",
                "topics": topic,
                "tasks.max": str(PARTITIONS),
                "path": str(table),
                "flush.interval.ms": "1000",
                "write.engine": engine,
            },
        )
        for i, (topic, table) in enumerate(zip(topics, tables, strict=True))
    ]
    log = open(work / "daemon.log", "wb")  # noqa: SIM115 - closed below
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "daemon", "standalone", str(worker), *map(str, files)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        await produce_all(bootstrap, topics, 20)
        await until_all(tables, 20, 600)
        warm = time.monotonic() - began
        produced, latencies = 20, []
        for _ in range(args.rounds):
            acked = await produce_all(bootstrap, topics, 100)
            produced += 100
            await until_all(tables, produced, 300)
            latencies.append(time.monotonic() - acked)
        await settled(proc.pid)
        await asyncio.sleep(args.idle)  # idle: what the tree holds between bursts
        return {
            "count": count,
            "engine": engine,
            "warm": warm,
            "latency": statistics.median(latencies),
            "latencies": latencies,
            "census": census(proc.pid),
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            for pid in reversed(tree(proc.pid)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            proc.wait()
        log.close()


def report(results: list[dict[str, Any]]) -> None:
    kinds = [
        "daemon",
        "REST front",
        "executor Python",
        "executor JVM",
        "PySpark worker",
        "archive builder",
        "other",
    ]
    print(
        f"\n{'connectors':>10} {'engine':>7} {'tasks':>6} {'warm s':>7} {'100/topic s':>12} "
        f"{'procs':>6} {'tree RSS MB':>12} {'tree PSS MB':>12}  PSS MB by kind"
    )
    for r in results:
        c = r["census"]
        procs = sum(v[0] for v in c.values())
        rss = sum(v[1] for v in c.values()) / 1024
        pss = sum(v[2] for v in c.values()) / 1024
        by = ", ".join(f"{k} {c[k][0]}x {c[k][2] / 1024:.0f}" for k in kinds if k in c)
        print(
            f"{r['count']:>10} {r['engine']:>7} {r['count'] * PARTITIONS:>6} {r['warm']:>7.1f} "
            f"{r['latency']:>12.2f} {procs:>6} {rss:>12.0f} {pss:>12.0f}  {by}"
        )
        print(f"{'':>10} rounds: {[round(x, 2) for x in r['latencies']]}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing broker; default: start one")
    parser.add_argument("--counts", default="1,20,100")
    parser.add_argument(
        "--spark-counts",
        default="20",
        help="counts also run with write.engine=spark (every write a Spark job), the peer",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=20.0)
    args = parser.parse_args()
    broker = None if args.bootstrap else KafkaBroker()
    try:
        bootstrap = args.bootstrap or broker.start()  # type: ignore[union-attr]
        results = []
        with tempfile.TemporaryDirectory(prefix="many-bench-") as scratch:
            runs = [(int(c), "auto") for c in args.counts.split(",") if c]
            runs += [(int(c), "spark") for c in args.spark_counts.split(",") if c]
            for count, engine in runs:
                results.append(await one_count(bootstrap, count, engine, args, Path(scratch)))
                report(results[-1:])
        report(results)
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
