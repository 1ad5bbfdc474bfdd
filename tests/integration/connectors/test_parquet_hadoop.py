"""ParquetSink on a Hadoop filesystem, end to end: a ``viewfs://`` table (a ViewFs mount on a
local directory, configured through the executors' Spark conf), so the daemon cannot reach it
and every commit-log step runs in executor jobs through the JVM (``daemon.storage.hadoopfs``).

A real topic, the runtime, the daemon's own pool; executors SIGKILLed mid-commit (right after
the commit record was created, before its files moved) and mid-flush (after the staged write);
afterwards every record is in the table exactly once, as pyarrow reads it from the mounted
directory (skipping underscore paths), and the offsets API answers through an executor.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import ClassVar

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory

from daemon.connectors.api import SinkTask
from daemon.connectors.parquet.sink import ParquetSinkConnector, ParquetSinkTask
from daemon.runtime.model import SinkOffset
from daemon.storage.commitlog import META, CommitRecord

pytestmark = pytest.mark.integration

HERE = __name__
RECORDS = 3_000


class CrashingTask(ParquetSinkTask):
    """A ParquetSink task whose next flushes SIGKILL their executor at the points listed."""

    crashes: ClassVar[list[str]] = []

    def crash_after(self) -> str | None:
        return type(self).crashes.pop(0) if type(self).crashes else None


class CrashingSink(ParquetSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return CrashingTask


def read_log(table: Path) -> list[CommitRecord]:
    log = table / META / "log"
    records = []
    for name in sorted(os.listdir(log)) if log.is_dir() else []:
        if name.endswith(".json") and not name.startswith("."):
            try:
                records.append(CommitRecord.from_json((log / name).read_bytes(), source=name))
            except Exception:  # being published: read it next time
                break
    return records


def committed(table: Path) -> dict[int, int]:
    ends: dict[int, int] = {}
    for record in read_log(table):
        for r in record.ranges:
            ends[r.partition] = r.end
        if record.kind == "offsets":
            for tp, offset in record.offsets:
                if offset is None:
                    ends.pop(tp.partition, None)
                else:
                    ends[tp.partition] = offset
    return ends


async def test_viewfs_table_exactly_once_through_executor_kills(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="connectd")
    topic = await kafka_topic(partitions=2)
    await produce(kafka_bootstrap, topic, [(None, b"%06d" % i) for i in range(RECORDS)])
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    cluster = f"c{uuid.uuid4().hex[:8]}"
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    props[f"executor.spark.conf.spark.hadoop.fs.viewfs.mounttable.{cluster}.link./tables"] = (
        f"file://{mounted}"
    )
    daemon = await run_daemon(props)
    worker = daemon.herder
    assert worker is not None
    table = mounted / "orders"
    CrashingTask.crashes[:] = ["publish", "write"]
    await worker.create_connector(
        "hsink",
        {
            "connector.class": f"{HERE}:CrashingSink",
            "topics": topic,
            "tasks.max": "1",
            "path": f"viewfs://{cluster}/tables/orders",
            "flush.max.records": "400",
            "flush.interval.ms": "500",
            "errors.restart.backoff.max.ms": "500",  # restart each killed incarnation soon
        },
    )

    def settled() -> bool:
        """Every offset committed, and each commit finished: its record is published before
        its files move and its staging dir goes (``CommitLog._apply``), so the last one may
        still be moving when the offsets are all there. A staging dir a record names that
        never goes fails the wait."""
        if sum(committed(table).values()) < RECORDS:
            return False
        named = {r.commit_id for r in read_log(table)}
        return not named & set(os.listdir(table / META / "staging"))

    await wait_until(settled, 300, "every offset committed and every commit finished", 0.2)
    assert CrashingTask.crashes == [], "the executor kills did not happen"
    failures = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("hsink-0: commit of") and " failed: " in r.getMessage()
    ]
    assert len(failures) >= 2 and all("ExecutorDied" in m for m in failures[:2]), failures

    data = ds.dataset(table, format="parquet").to_table(
        columns=["kafka_partition", "kafka_offset", "value"]
    )
    assert data.num_rows == RECORDS
    assert data.group_by(["kafka_partition", "kafka_offset"]).aggregate([]).num_rows == RECORDS
    assert sorted(v.as_py() for v in data.column("value")) == [f"{i:06d}" for i in range(RECORDS)]
    # The killed writes left nothing behind: the record created before the kill was rolled
    # forward (its files are in place), the write killed before its record was deleted.
    records = read_log(table)
    for record in records:
        for f in record.files:
            assert (table / f.final).is_file(), f"{f.final} of commit {record.seq} missing"
    # A killed write's staging dir is deleted by the task's abort job, or else once its lease
    # ran out (daemon.storage.hadoopfs); either way no record may name a leftover.
    named = {r.commit_id for r in records}
    leftovers = os.listdir(table / META / "staging")
    assert not named & set(leftovers), (leftovers, [r.commit_id for r in records])
    if leftovers:
        print(f"staging dirs awaiting their lease: {leftovers}")
    assert len(os.listdir(table / META / "done")) >= len(records)

    # The offsets API reaches the table through an executor.
    ends = committed(table)
    expected = [SinkOffset(topic, p, o) for p, o in sorted(ends.items())]
    assert await worker.get_offsets("hsink") == expected
    await worker.stop_connector("hsink")
    await worker.alter_offsets("hsink", [SinkOffset(topic, 0, 5)])
    assert committed(table)[0] == 5
    assert (await worker.get_offsets("hsink"))[0] == SinkOffset(topic, 0, 5)
    await worker.reset_offsets("hsink")
    assert committed(table) == {}
