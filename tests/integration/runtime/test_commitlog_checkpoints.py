"""Issue 16 item 1 on real parts: a table whose commit log was written before checkpoints (no
``_connectd/checkpoint``) is continued by a real daemon (ParquetSink, Spark executor, session
broker), which upgrades it in place: it gets a checkpoint once its seq reaches the interval
(100), a SIGKILLed daemon's successor opens it from that checkpoint and carries on, and a
reader opening the log reads only the records after the latest checkpoint — exactly once all
along.
"""

from __future__ import annotations

import asyncio
import os
import signal
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
from daemon.structs import OffsetRange, TopicPartition

pytestmark = pytest.mark.integration

NAME = "ck-sink"
LEGACY = 98  # records written by the old code: one offset each, seq 1..98 (the fence: 99)
FIRST, SECOND = 200, 100  # records the daemon writes before and after its SIGKILL


class CountingFs(LocalFs):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.record_reads = 0

    def read(self, name: str) -> bytes | None:
        self.record_reads += name.startswith(f"{META}/log/")
        return super().read(name)


def _ends(table: Path) -> dict[TopicPartition, int]:
    if not (table / META / "log").is_dir():
        return {}
    return CommitLog(table).open_read_only().committed_offsets()


async def test_a_table_from_before_checkpoints_is_upgraded_by_the_daemon(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    table = tmp_path / "table"
    # The layout of the previous version: records and done markers, no checkpoint dir.
    with CommitLog(table, checkpoint_interval=10**15) as old:
        for i in range(LEGACY):
            old.commit(NAME, 0, 1, [OffsetRange(topic, 0, i, i + 1)], commit_id=old.new_commit_id())
    os.rmdir(table / META / "checkpoint")
    await produce(kafka_bootstrap, topic, [(None, b"%06d" % i) for i in range(LEGACY + FIRST)])

    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    sink = {
        "name": NAME,
        "connector.class": "ParquetSink",
        "tasks.max": "1",
        "topics": topic,
        "path": str(table),
        "flush.max.records": "20",
        "flush.interval.ms": "300",
    }
    p = daemon_process(worker, [sink])
    target = {tp: LEGACY + FIRST}
    await wait_until(lambda: _ends(table) == target, 240, f"{target} committed")
    # The checkpoint follows its record (once the record is applied): when the JVM starts
    # slowly, one flush takes every offset, and its record alone reaches the target.
    await wait_until(lambda: checkpoint_seqs(LocalFs(table)) == [100], 30, "checkpoint 100")

    p.signal(signal.SIGKILL)  # the next daemon opens from the checkpoint
    await asyncio.to_thread(p.wait, 10)
    await produce(
        kafka_bootstrap, topic, [(None, b"%06d" % (LEGACY + FIRST + i)) for i in range(SECOND)]
    )
    p = daemon_process(worker, [sink])
    target = {tp: LEGACY + FIRST + SECOND}
    await wait_until(lambda: _ends(table) == target, 240, f"{target} committed")
    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60) == 0, p.log()

    rows = ds.dataset(table, format="parquet").to_table(columns=["kafka_offset"])
    offsets = sorted(rows.column("kafka_offset").to_pylist())
    assert offsets == list(range(LEGACY, LEGACY + FIRST + SECOND))  # each exactly once
    fs = CountingFs(table)
    log = CommitLog(table, fs=fs).open()
    reads, latest = fs.record_reads, checkpoint_seqs(fs)[-1]
    # Only the records after the latest checkpoint (and the end of the log, read twice).
    assert reads == log.last_seq() - latest + 2, (reads, latest)
    assert log.committed_offsets() == target and log.owners() == {tp: NAME}
    # The whole history (the audit) gives the same end as the checkpoint and what follows it.
    audit_end = max(r.end for rec in log.records() for r in rec.ranges)
    assert audit_end == LEGACY + FIRST + SECOND
