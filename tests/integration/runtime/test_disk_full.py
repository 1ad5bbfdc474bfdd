"""Issue 13, item 6: a ParquetSink table on a full disk (a real 2 MB tmpfs), with real Spark.

- The task's error line names the root cause and the path (``No space left on device on
  <table>/...``), not Py4J's ``An error occurred while calling o574.save.``;
- the executor whose write failed is recycled (killed, reaped, replaced in the background):
  its JVM held the failed job's staged files open, so deleting them freed nothing until it
  went. Once it is gone, no process holds a deleted file on the disk;
- once space is back, the next automatic restart writes every record, exactly once, with no
  restart by hand.

Needs root to mount the tmpfs (the test session here runs as root); it is unmounted at the end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool
from support.tables import committed

from daemon.executor.info import PoolEventKind
from daemon.runtime.model import State

pytestmark = pytest.mark.integration

RECORDS = 300
VALUE_CHARS = 4_000  # hex: Parquet's encodings and snappy cannot shrink it much
BALLAST = 1_500_000  # of the 2 MB: what is left cannot hold the batch (~1.2 MB)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs mounted for this test, unmounted at teardown."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _deleted_but_open(mount: Path) -> list[str]:
    """Files under ``mount`` that are deleted but still held open by some process."""
    held = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith(str(mount)) and target.endswith(" (deleted)"):
                        held.append(f"{fd}: {target}")
    return held


async def test_disk_full_names_the_cause_recycles_the_executor_and_recovers(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    small_disk: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    table = small_disk / "table"
    ballast = small_disk / "ballast"
    ballast.write_bytes(secrets.token_bytes(BALLAST))
    topic = await kafka_topic(partitions=1)
    values = [secrets.token_hex(VALUE_CHARS // 2).encode() for _ in range(RECORDS)]
    await produce(kafka_bootstrap, topic, [(None, v) for v in values])
    d = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"), executors=warm_spark
    )
    assert d.herder is not None
    worker = d.herder
    name = f"full-{uuid.uuid4().hex[:6]}"
    task_id = f"{name}-0"
    await worker.create_connector(
        name,
        {
            "connector.class": "ParquetSink",
            "topics": topic,
            "tasks.max": "1",
            "path": str(table),
            "flush.max.records": "1000",
            "flush.interval.ms": "300",
            "errors.restart.max": "-1",
            "errors.restart.backoff.max.ms": "1000",
        },
    )

    def recycled() -> list[int]:
        return [
            e.pid
            for e in warm_spark.pool.events.snapshot()
            if e.kind is PoolEventKind.RECYCLED and e.task_id == task_id
        ]

    pids = await wait_until(recycled, 120, "a failed write's executor recycled")
    failed = f"failed (WriteFailed: task {task_id}: No space left on device on {table}"
    await wait_until(lambda: failed in caplog.text, 10, "the cause in the restart's log line")
    headline = f"failed: WriteFailed: task {task_id}: No space left on device on {table}"
    assert any(
        r.message.startswith(f"Task {task_id}") and headline in r.message for r in caplog.records
    ), "the task's error line does not lead with the root cause"
    # Reaped, not merely signalled: gone from /proc; and with it the open deleted files.
    await wait_until(lambda: not any(Path(f"/proc/{p}").exists() for p in pids), 10, "reaped")
    assert pids[0] not in warm_spark.pids()
    assert await wait_until(lambda: not _deleted_but_open(small_disk), 5, "space released")

    ballast.unlink()  # the operator frees space; nobody restarts anything by hand
    await wait_until(lambda: committed(table) == RECORDS, 240, "every record committed")
    status = worker.task_status(name, 0)
    assert status.state is State.RUNNING
    assert status.auto_restart is not None and status.auto_restart.count >= 1
    assert not _deleted_but_open(small_disk)
