"""The sink's commit-log clean-up on real parts (issue 16 review): a real daemon (subprocess),
the session broker and Spark executors: two ParquetSink connectors with
``commit.log.checkpoint.interval=5`` and ``commit.log.retention.ms=0`` and small flushes, one on
a local table (its log kept in the daemon, cleaned in a thread) and one on a ``viewfs://``
table (a ViewFs mount on a local directory: its log is kept in executor jobs, through the JVM,
and cleaned in a flush job now and then). After many flushes each log directory holds a
bounded number of records and ``done`` markers (not one per flush), and both tables checkpoint
every 5 records (the settings reached the log the executor keeps for the Hadoop table); a
SIGKILLed daemon's successor opens both tables and continues; every row is there once: rows ==
distinct (partition, offset) == produced.

The sink cleans up at most every ``commit.log.cleanup.interval.ms`` after a flush (a minute by
default; 2 s here), so records are produced at a steady pace until both logs were cleaned.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory

from daemon.storage import CommitLog
from daemon.storage.checkpoint import checkpoint_seqs
from daemon.storage.commitlog import META
from daemon.storage.fs import LocalFs

# JVM starts of two daemons, and two rounds of clean-up a minute apart at worst.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

INTERVAL = 5
#: Records (and markers) a cleaned log holds: those after the checkpoint before the latest
#: (fewer than two intervals) and the few flushes committed since that clean-up.
BOUND = 3 * INTERVAL
#: Flushes before the logs must have been cleaned (with no clean-up: one record each).
FLUSHES = 30
FIRST, SECOND = 50, 100  # records per topic produced before the start, and after the kill


def _seqs(table: Path, sub: str) -> list[int]:
    path = table / META / sub
    names = os.listdir(path) if path.is_dir() else []
    return sorted(int(n.split(".")[0]) for n in names if not n.startswith("."))


def _cleaned(table: Path) -> bool:
    """Many flushes committed, yet the log holds only a bounded tail of them."""
    records, markers = _seqs(table, "log"), _seqs(table, "done")
    if not records or records[-1] < FLUSHES:
        return False
    return len(records) <= BOUND and len(markers) <= BOUND


def _committed(table: Path) -> int:
    if not (table / META / "log").is_dir():
        return 0
    return sum(CommitLog(table).open_read_only().committed_offsets().values())


def _rows(table: Path) -> tuple[int, int]:
    """(rows, distinct (partition, offset)) as a reader of the table sees them."""
    data = ds.dataset(table, format="parquet").to_table(columns=["kafka_partition", "kafka_offset"])
    pairs = Counter(
        zip(
            data.column("kafka_partition").to_pylist(),
            data.column("kafka_offset").to_pylist(),
            strict=True,
        )
    )
    return data.num_rows, len(pairs)


async def test_the_sinks_clean_up_keeps_both_logs_small_and_a_restart_continues(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topics = [await kafka_topic(partitions=2), await kafka_topic(partitions=2)]
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    cluster = f"c{uuid.uuid4().hex[:8]}"
    local, hadoop = tmp_path / "local", mounted / "orders"
    tables = (local, hadoop)
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    worker[f"executor.spark.conf.spark.hadoop.fs.viewfs.mounttable.{cluster}.link./tables"] = (
        f"file://{mounted}"
    )
    sinks = [
        {
            "name": name,
            "connector.class": "ParquetSink",
            "tasks.max": "1",
            "topics": topic,
            "path": path,
            "flush.max.records": "10",
            "flush.interval.ms": "300",
            "commit.log.checkpoint.interval": str(INTERVAL),
            "commit.log.retention.ms": "0",
            "commit.log.cleanup.interval.ms": "2000",
        }
        for name, topic, path in (
            ("cl-local", topics[0], str(local)),
            ("cl-viewfs", topics[1], f"viewfs://{cluster}/tables/orders"),
        )
    ]
    produced = [0, 0]

    async def send(n: int) -> None:
        for i, topic in enumerate(topics):
            values = [(None, b"%06d" % (produced[i] + j)) for j in range(n)]
            produced[i] += await produce(kafka_bootstrap, topic, values)

    await send(FIRST)
    p = daemon_process(worker, sinks)

    enough = asyncio.Event()

    async def steady() -> None:
        """About a flush per table and second: the clean-up runs after a flush."""
        while not enough.is_set():
            await send(10)
            await asyncio.sleep(0.5)  # pacing the load, not waiting for anything

    cleaned: set[Path] = set()

    def both_cleaned() -> bool:
        # Each task cleans on its own minute, and its log grows again by a record a flush
        # until its next clean-up: note each table when its log is small.
        cleaned.update(t for t in tables if _cleaned(t))
        return len(cleaned) == len(tables)

    feeder = asyncio.create_task(steady())
    try:
        await wait_until(both_cleaned, 240, "both commit logs cleaned", interval=0.2)
    finally:
        enough.set()  # not a cancel: ``produced`` must count every record sent
        await feeder
    # Both checkpoint every 5 records: for the Hadoop table, the settings reached the executor.
    for table in tables:
        seqs = checkpoint_seqs(LocalFs(table))
        assert seqs and all(s % INTERVAL == 0 for s in seqs), (table, seqs)
    await wait_until(
        lambda: [_committed(t) for t in tables] == produced, 120, f"{produced} committed"
    )

    p.signal(signal.SIGKILL)  # the next daemon opens both logs from their checkpoints
    await asyncio.to_thread(p.wait, 10)
    await send(SECOND)
    p = daemon_process(worker, sinks)
    await wait_until(
        lambda: [_committed(t) for t in tables] == produced, 240, f"{produced} committed"
    )
    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60) == 0, p.log()

    for table, total in zip(tables, produced, strict=True):
        assert _rows(table) == (total, total), table  # each offset exactly once
        log = CommitLog(table).open()
        assert sum(log.committed_offsets().values()) == total
        # What was cleaned stays cleaned: the log starts well after record 1.
        assert _seqs(table, "log")[0] > FLUSHES - BOUND, table
