"""Arrow hand-off files and the pool's scratch directories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from daemon.executor import handoff


def _table(n: int) -> pa.Table:
    return pa.table(
        {
            "kafka_offset": pa.array(range(n), pa.int64()),
            "value": pa.array([f"v{i}" for i in range(n)]),
        }
    )


def test_batch_reads_back_the_written_table_memory_mapped(tmp_path: Path) -> None:
    table = _table(1000)
    path = handoff.write_table(table, tmp_path / "b.arrow")
    assert [p.name for p in tmp_path.iterdir()] == ["b.arrow"]  # no temporary left
    batch = handoff.Batch(path, spark=None)
    assert batch.num_rows == 1000
    assert batch.table.equals(table)
    with pytest.raises(RuntimeError, match="without Spark"):
        _ = batch.df
    with pytest.raises(RuntimeError, match="without Spark"):
        batch.arrow_df()
    batch.release()
    assert handoff.staging_path(path) == tmp_path / "b.arrow.parquet"


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    class Broken:
        schema = _table(1).schema

    with pytest.raises(Exception):  # noqa: B017 - whatever pyarrow raises for a non-table
        handoff.write_table(Broken(), tmp_path / "b.arrow")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_scratch_dir_lifecycle(tmp_path: Path) -> None:
    one, two = handoff.ScratchDir(tmp_path), handoff.ScratchDir(tmp_path)
    one.create()
    two.create()
    assert one.daemon_dir == tmp_path / f"connectd-{os.getpid()}" == two.daemon_dir
    assert one.path != two.path
    p1, p2 = one.new_path("conn/0 weird", ".arrow"), one.new_path("conn/0 weird", ".arrow")
    assert p1 != p2 and p1.parent == one.path and "/" not in p1.name
    p1.write_bytes(b"x")
    one.remove()
    assert not one.path.exists() and one.daemon_dir.exists()  # `two` still uses it
    two.remove()
    assert not one.daemon_dir.exists()


def test_sweep_removes_only_dead_daemons_dirs(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = tmp_path / f"connectd-{dead.stdout.strip()}"
    live = tmp_path / f"connectd-{os.getpid()}"
    other = tmp_path / "unrelated"
    for d in (stale, live, other):
        (d / "pool-1").mkdir(parents=True)
    assert handoff.sweep_stale(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_default_handoff_root_is_ram_backed_here() -> None:
    assert handoff.default_handoff_root() == Path("/dev/shm")
