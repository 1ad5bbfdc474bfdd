"""Table formats loaded on demand by the pool, with real executor processes but no Spark
(``with_spark=False``: the session settings are not used, the bookkeeping is the same)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support.daemon import wait_until
from support.jars import stand_in_jar

from daemon.errors import ConfigError
from daemon.executor import ExecutorPool, PoolSettings, formats
from daemon.executor.formats import JarsMissing
from daemon.executor.info import PoolEventKind
from daemon.runtime.executors import ExecutorBinding
from daemon.runtime.incarnation.context import TaskContext
from daemon.structs import TaskId

T = "daemon.executor.testing"
MakePool = Callable[..., Awaitable[ExecutorPool]]


@pytest.fixture
def jars(tmp_path: Path) -> Path:
    """A jars directory holding (empty) stand-ins for Delta's jars; Iceberg's is missing."""
    directory = tmp_path / "jars"
    directory.mkdir()
    for jar in formats.jar_paths(["delta"], directory):
        stand_in_jar(jar)
    return directory


@pytest.fixture
async def make_pool(tmp_path: Path, jars: Path) -> AsyncIterator[MakePool]:
    pools: list[ExecutorPool] = []

    async def make(**overrides: Any) -> ExecutorPool:
        settings: dict[str, Any] = {
            "size": 1,
            "spares": 1,
            "with_spark": False,
            "heartbeat_interval": 0.2,
            "heartbeat_timeout": 2.0,
            "start_timeout": 30.0,
            "acquire_timeout": 30.0,
            "work_dir": tmp_path / "work",
            "handoff_dir": tmp_path / "shm",
            "jars_dir": jars,
            **overrides,
        }
        pool = ExecutorPool(PoolSettings(**settings))
        pools.append(pool)
        await pool.start()
        await pool.wait_ready(pool.settings.target, timeout=30)
        return pool

    yield make
    for pool in pools:
        await pool.close(graceful_timeout=0)


def _recycled(pool: ExecutorPool) -> list[int]:
    return [e.pid for e in pool.events.snapshot() if e.kind is PoolEventKind.RECYCLED]


async def test_a_new_format_recycles_idle_ones_now_and_busy_ones_after_their_write(
    make_pool: MakePool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connectd.executor")
    pool = await make_pool()  # 1 executor + 1 spare
    busy = pool.submit("conn-0", f"{T}:sleep", timeout=10, kwargs={"seconds": 1.0})
    held = await asyncio.wait_for(busy.accepted(), 10)
    [spare] = [e for e in pool.snapshot() if e.pid != held.pid]

    delta = pool.submit("conn-1", f"{T}:whoami", timeout=10, formats=("delta",))
    assert pool.formats == {"delta"}
    assert _recycled(pool) == [spare.pid]  # the idle spare at once; the busy one not yet
    assert "loading table format delta" in caplog.text
    assert "1 executor(s) recycled now, 1 when their write ends" in caplog.text

    assert await busy.result() == 1.0  # its write ran to its end
    got = await delta.result()
    assert got["pid"] not in (held.pid, spare.pid)
    assert _recycled(pool) == [spare.pid, held.pid]  # recycled when its write ended
    info = next(e for e in pool.snapshot() if e.pid == got["pid"])
    assert info.formats == {"delta"}

    # From now on every executor has Delta; plain writes recycle nothing more.
    await pool.wait_ready(2, timeout=30)
    await wait_until(lambda: len(pool.snapshot()) == 2, 30, "two executors, none being reaped")
    assert all(e.formats == {"delta"} for e in pool.snapshot())
    plain = await pool.run("conn-2", f"{T}:whoami", timeout=10)
    assert plain["pid"] == got["pid"]  # the hot one
    again = await pool.run("conn-1", f"{T}:whoami", timeout=10, formats=["delta"])
    assert again["pid"] == got["pid"]
    assert pool.status().recycles == 2


async def test_formats_of_the_settings_are_loaded_from_the_start(make_pool: MakePool) -> None:
    pool = await make_pool(formats=frozenset({"delta"}))
    assert all(e.formats == {"delta"} for e in pool.snapshot())
    await pool.run("conn-0", f"{T}:whoami", timeout=10, formats=("delta",))
    assert pool.status().recycles == 0


async def test_missing_jars_or_an_unknown_format_fail_at_submit(make_pool: MakePool) -> None:
    pool = await make_pool()
    with pytest.raises(JarsMissing, match=re.escape("iceberg-spark-runtime-4.1_2.13-1.12.0.jar")):
        pool.submit("conn-0", f"{T}:whoami", timeout=10, formats=("iceberg",))
    with pytest.raises(ConfigError, match="known formats: delta, iceberg"):
        await pool.run("conn-0", f"{T}:whoami", timeout=10, formats=("hudi",))
    assert pool.formats == frozenset() and pool.status().recycles == 0
    await pool.run("conn-0", f"{T}:whoami", timeout=10)


async def test_a_pool_whose_start_formats_lack_jars_does_not_start(
    tmp_path: Path, jars: Path
) -> None:
    pool = ExecutorPool(
        PoolSettings(
            with_spark=False,
            formats=frozenset({"iceberg"}),
            jars_dir=jars,
            work_dir=tmp_path / "work",
            handoff_dir=tmp_path / "shm",
        )
    )
    with pytest.raises(JarsMissing, match="connectd fetch-jars iceberg"):
        await pool.start()
    await pool.close()
    assert pool.pids() == []


async def test_formats_pass_from_a_task_context_to_the_pool_not_to_the_function(
    make_pool: MakePool,
) -> None:
    """``whoami`` takes no keyword arguments: a ``formats`` passed on to it would fail it."""
    pool = await make_pool(spares=0)
    binding = ExecutorBinding(pool, "conn-0", default_timeout=10)
    context = TaskContext(TaskId("conn", 0), 1, {}, binding)
    got = await context.run_in_executor(f"{T}:whoami", None, timeout=10, formats=["delta"])
    assert pool.formats == {"delta"}
    assert next(e for e in pool.snapshot() if e.pid == got["pid"]).formats == {"delta"}
    assert await context.run_in_executor(f"{T}:sleep", None, timeout=10, seconds=0.01) == 0.01
