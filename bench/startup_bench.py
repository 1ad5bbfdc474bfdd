"""Launch → first new row of ``connectd standalone`` on a ParquetSink table whose commit log is
long, against an empty table (issue 32 item 4: within 1.5 s of the empty table's).

    .venv/bin/python bench/startup_bench.py --bootstrap 127.0.0.1:9092 [--commits N] [--runs R]

The long table: ``--commits`` commits (default 100,000: seven days of the default retention at
one commit every 10 s is 60,000) made through ``CommitLog`` itself by connector ``bench``, one
record each, to partition 0 of a topic that holds those records (the fsyncs of the history
skipped, as ``commitlog_bench.py --fast-history`` does; what a start reads is the same files),
then one new record (the table copied from that history for each run, synced to disk before the
launch). The empty table: a new topic with one record; the two alternate which starts first.
Each run launches
``connectd standalone worker.properties connector.properties`` (connector ``bench``,
ParquetSink, ``flush.interval.ms=100``) and times launch → the first data file of the new row;
the daemon is then stopped by PID (SIGTERM). Medians of ``--runs`` per table, printed, never
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from aiokafka import AIOKafkaProducer  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from commitlog_bench import _OsWithoutFsync, no_fsync  # noqa: E402
from ss.tree import Tree  # noqa: E402
from ss.variants import free_port  # noqa: E402

from daemon.storage import CommitLog  # noqa: E402
from daemon.structs import OffsetRange  # noqa: E402

BIN = Path(sys.executable).parent
TIMEOUT_S = 300.0


async def _topic(bootstrap: str, records: int) -> str:
    name = f"startup-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
    await producer.start()
    try:
        batch = [await producer.send(name, b'{"i": %d}' % i, partition=0) for i in range(records)]
        await asyncio.gather(*batch)
    finally:
        await producer.stop()
    return name


def _history(table: Path, topic: str, commits: int) -> float:
    """``commits`` one-record commits of connector ``bench`` to ``topic`` partition 0."""
    began = time.monotonic()
    log = CommitLog(table).open()
    with no_fsync(_OsWithoutFsync()):
        for i in range(commits):
            log.commit(
                "bench", 0, 1, [OffsetRange(topic, 0, i, i + 1)], commit_id=log.new_commit_id()
            )
            if (i + 1) % 100 == 0:
                log.clean_up(deadline=time.monotonic() + 10.0)
    log.close()
    return time.monotonic() - began


def _has_rows(table: Path) -> bool:
    """A data file is in place. The walk skips the commit log's and staging directories
    (``_connectd``: 100,000 files here, which a full walk every 20 ms would read, competing
    with the daemon's start for the CPU)."""
    for _, dirs, files in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        if any(f.endswith(".parquet") and not f.startswith(("_", ".")) for f in files):
            return True
    return False


def _first_row(run_dir: Path, bootstrap: str, topic: str, table: Path) -> float:
    worker, connector = run_dir / "worker.properties", run_dir / "connector.properties"
    worker.write_text(
        f"bootstrap.servers={bootstrap}\nlisteners=http://127.0.0.1:{free_port()}\n"
        f"state.dir={run_dir / 'state'}\nexecutor.spark.conf.spark.ui.enabled=false\n"
        "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
        "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
    )
    connector.write_text(
        f"name=bench\nconnector.class=ParquetSink\ntopics={topic}\npath={table}\n"
        "flush.interval.ms=100\n"
    )
    tree = Tree([str(BIN / "connectd"), "standalone", str(worker), str(connector)], run_dir / "log")
    began = time.monotonic()
    tree.launch()
    try:
        while not _has_rows(table):
            if not tree.alive():
                raise SystemExit(f"connectd exited ({tree.returncode}): {run_dir / 'log'}")
            if time.monotonic() - began > TIMEOUT_S:
                raise SystemExit(f"no row within {TIMEOUT_S:g} s: {run_dir / 'log'}")
            time.sleep(0.02)
        return time.monotonic() - began
    finally:
        tree.stop(30.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--commits", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="startup-bench-", dir="/var/tmp"))
    results: dict[str, list[float]] = {"empty": [], "long": []}
    try:
        long_topic = asyncio.run(_topic(a.bootstrap, a.commits + 1))
        template = root / "long-template"
        built = _history(template, long_topic, a.commits)
        print(f"history: {a.commits:,} commits in {built:.0f} s (fsync skipped)", flush=True)
        for run in range(a.runs):
            empty_topic = asyncio.run(_topic(a.bootstrap, 1))
            order = [("empty", empty_topic), ("long", long_topic)]
            for kind, topic in order if run % 2 == 0 else order[::-1]:
                run_dir = root / f"{kind}-{run}"
                run_dir.mkdir()
                table = run_dir / "table"
                if kind == "long":
                    shutil.copytree(template, table)
                    # the copy's writeback must not compete with the JVM's start: a table's
                    # log is on disk long before a daemon starts on it
                    os.sync()
                took = _first_row(run_dir, a.bootstrap, topic, table)
                results[kind].append(took)
                print(f"run {run + 1}: {kind:<5} launch → first new row {took:.2f} s", flush=True)
        empty, long = (statistics.median(results[k]) for k in ("empty", "long"))
        print(
            f"median of {a.runs}: empty {empty:.2f} s, {a.commits:,}-commit log {long:.2f} s "
            f"(+{long - empty:.2f} s, {long / empty:.2f}x)"
        )
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
