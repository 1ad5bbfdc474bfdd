"""Table formats loaded on demand: a write that asks for Delta gets an executor whose session
has Delta's jars and extensions; the executor without them is recycled (killed, reaped,
replaced) and no executor lacking Delta is leased again. Missing jars fail the write at once."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from support.spark import wait_gone, walk_tree

from daemon.executor import ExecutorPool
from daemon.executor.formats import JarsMissing, missing_jars
from daemon.executor.info import PoolEventKind

pytestmark = pytest.mark.integration

JOBS = "integration.executor.format_jobs"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


async def test_delta_is_loaded_on_demand_and_the_old_executor_recycled(
    make_pool: Callable[..., Awaitable[ExecutorPool]], tmp_path: Path
) -> None:
    if missing_jars(["delta"]):
        pytest.fail(f"Delta's jars are missing: {missing_jars(['delta'])}; run `make jars`")
    pool = await make_pool(spares=0)
    began = time.monotonic()
    plain = await pool.run("fmt-0", f"{JOBS}:session", timeout=120)
    assert DELTA_EXTENSION not in plain["extensions"]
    [first] = pool.snapshot()
    assert first.formats == frozenset() and first.pid == plain["pid"]
    old_tree = walk_tree(first.pid)
    assert len(old_tree) > 1  # the executor, its JVM, PySpark's workers
    plain_at = time.monotonic()

    table = tmp_path / "delta-table"
    got = await pool.run(
        "fmt-0", f"{JOBS}:delta_round_trip", timeout=240, kwargs={"path": str(table)},
        formats=("delta",),
    )  # fmt: skip
    delta_at = time.monotonic()
    assert DELTA_EXTENSION in got["extensions"].split(",")
    assert got["catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert got["rows"] == 3 and got["ids"] == [1, 2, 3]
    assert (table / "_delta_log").is_dir()
    assert got["pid"] != plain["pid"]
    assert wait_gone(old_tree.values(), 10.0) == []  # the old executor's whole tree is gone
    assert pool.formats == frozenset({"delta"})
    [upgraded] = [e for e in pool.snapshot() if e.pid == got["pid"]]
    assert upgraded.formats == frozenset({"delta"})
    archive = pool.status().cds_archive
    if upgraded.uses_cds and archive is not None and upgraded.java_pid is not None:
        # The archive (named without the formats' jars: launch.py) is used with them too.
        assert archive in Path(f"/proc/{upgraded.java_pid}/maps").read_text()
    kinds = [(e.kind, e.pid) for e in pool.events.snapshot()]
    assert (PoolEventKind.RECYCLED, first.pid) in kinds
    assert (PoolEventKind.REAPED, first.pid) in kinds

    # Plain writes (no formats) and another Delta write run on the upgraded executor as is.
    recycles = pool.status().recycles
    again = await pool.run("fmt-1", f"{JOBS}:session", timeout=120)
    more = await pool.run(
        "fmt-0", f"{JOBS}:delta_round_trip", timeout=240, kwargs={"path": str(table)},
        formats=["delta"],
    )  # fmt: skip
    assert again["pid"] == more["pid"] == got["pid"]
    assert more["rows"] == 6
    assert pool.status().recycles == recycles == 1
    print(
        f"\nplain write {plain_at - began:.1f} s (with the start), first Delta write"
        f" {delta_at - plain_at:.1f} s (recycle + start + write), then"
        f" {time.monotonic() - delta_at:.1f} s for a plain and a Delta write; archive used by the"
        f" Delta executor: {upgraded.uses_cds}"
    )


async def test_missing_jars_fail_the_write_at_once_naming_the_directory(
    make_pool: Callable[..., Awaitable[ExecutorPool]], tmp_path: Path
) -> None:
    empty = tmp_path / "no-jars"
    empty.mkdir()
    # No JVM needed: the jars are checked before any executor is asked.
    pool = await make_pool(spares=0, with_spark=False, jars_dir=empty)
    began = time.monotonic()
    with pytest.raises(JarsMissing) as caught:
        await pool.run("fmt-0", f"{JOBS}:session", timeout=30, formats=("delta",))
    assert time.monotonic() - began < 1.0
    message = str(caught.value)
    assert str(empty) in message
    assert "delta-spark_4.1_2.13-4.4.0.jar" in message and "delta-storage-4.4.0.jar" in message
    assert "connectd fetch-jars delta" in message and "make jars" in message
    assert not caught.value.retriable
    assert pool.formats == frozenset()  # nothing was loaded: later writes are not held up
    await pool.wait_ready(1)
    assert [e.formats for e in pool.snapshot()] == [frozenset()]
    assert pool.status().recycles == 0


async def test_spark_is_opened_on_demand_and_the_executors_without_it_recycled(
    make_pool: Callable[..., Awaitable[ExecutorPool]],
) -> None:
    """``spark_on_demand``: executors start as Python processes with no JVM (their whole tree
    is one process) and run writes that need no session with ``spark=None``; the first write
    that needs one recycles them (killed, reaped, replaced by executors with a session), waits
    for one, and runs in a JVM; from then on every executor has a session."""
    pool = await make_pool(spares=1, spark_on_demand=True)
    await pool.wait_ready(2, timeout=60)
    light = pool.snapshot()
    assert [(e.spark, e.java_pid) for e in light] == [(False, None), (False, None)]
    assert all(set(walk_tree(e.pid)) == {e.pid} for e in light)  # no JVM, no worker below
    assert all(e.startup_seconds is not None and e.startup_seconds < 10 for e in light)
    plain = await pool.run("od-0", "daemon.executor.testing:whoami", timeout=30, spark=False)
    assert plain["java_pid"] is None and plain["pid"] in {e.pid for e in light}
    assert pool.status().recycles == 0

    began = time.monotonic()
    got = await pool.run("od-0", "daemon.executor.testing:whoami", timeout=120)
    opened = time.monotonic() - began
    assert got["java_pid"] is not None and got["pid"] not in {e.pid for e in light}
    assert wait_gone([s for e in light for s in walk_tree(e.pid).values()], 10.0) == []
    recycled = [e.pid for e in pool.events.snapshot() if e.kind is PoolEventKind.RECYCLED]
    assert sorted(recycled) == sorted(e.pid for e in light)
    await pool.wait_ready(2, timeout=180)
    assert all(e.spark and e.java_pid is not None for e in pool.snapshot())
    # A write that needs no session runs on one that has it, as it is.
    again = await pool.run("od-1", "daemon.executor.testing:whoami", timeout=30, spark=False)
    assert again["java_pid"] is not None
    assert pool.status().recycles == 2
    print(f"\nfirst write that needs Spark: {opened:.1f} s (recycle + JVM start + write)")
