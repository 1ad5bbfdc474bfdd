"""When a pool starts (``executor.pool.start``): not before something needs it; then by
``start``, ``start_soon`` or the first write, once; a write waits for it under its acquire
deadline. Real executor processes, no Spark (``with_spark=False``)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from support.jars import stand_in_jar

from daemon.config import parse_worker
from daemon.config.executors import PoolStart
from daemon.connectors.registry import default_registry
from daemon.errors import ExecutorUnavailable, PoolClosed
from daemon.executor import ExecutorPool, PoolSettings, formats
from daemon.executor.formats import JarsMissing
from daemon.executor.info import PoolEventKind
from daemon.executor.lease import WriteLease
from daemon.executor.process import read_stat
from daemon.runtime.env import RuntimeEnv

T = "daemon.executor.testing"


def _settings(tmp_path: Path, **overrides: Any) -> PoolSettings:
    base: dict[str, Any] = {
        "size": 1,
        "spares": 1,
        "with_spark": False,
        "start_timeout": 30.0,
        "acquire_timeout": 30.0,
        "work_dir": tmp_path / "work",
        "handoff_dir": tmp_path / "shm",
    }
    return PoolSettings(**(base | overrides))


def _scratch(tmp_path: Path) -> list[Path]:
    """The pool's scratch directories (hand-off and work) that exist now."""
    return sorted(
        p for root in ("work", "shm") for p in (tmp_path / root).glob("connectd-*") if p.is_dir()
    )


async def test_a_pool_not_started_has_nothing_and_says_so(tmp_path: Path) -> None:
    pool = ExecutorPool(_settings(tmp_path))
    status = pool.status()
    assert not pool.started and not status.started and not status.closed
    assert (status.starting, status.idle, status.busy, status.stopping) == (0, 0, 0, 0)
    assert pool.snapshot() == [] and pool.pids() == [] and pool.events.snapshot() == []
    assert _scratch(tmp_path) == []
    await pool.close()
    assert pool.status().closed and not pool.status().started and _scratch(tmp_path) == []
    with pytest.raises(PoolClosed):
        pool.submit("conn-0", f"{T}:whoami", timeout=5)


async def test_the_first_write_starts_the_pool_and_succeeds(tmp_path: Path) -> None:
    pool = ExecutorPool(_settings(tmp_path))
    pids: list[int] = []
    try:
        lease = pool.submit("conn-0", f"{T}:whoami", timeout=5)
        got = await lease
        assert pool.started and pool.status().started
        acceptance = lease.acceptance
        assert acceptance is not None and acceptance.pid == got["pid"]
        first = pool.snapshot()[0]
        assert first.pid == got["pid"] and first.id == 1  # the pool's first executor
        assert [e.kind for e in pool.events.snapshot()] == [PoolEventKind.LEASED]
        await pool.wait_ready(2, timeout=30)
        assert [e.id for e in pool.snapshot()] == [1, 2]  # size + spares, started once
        pids = pool.pids()
    finally:
        await pool.close(graceful_timeout=0)
    assert pids and all(read_stat(pid) is None for pid in pids) and _scratch(tmp_path) == []


async def test_a_write_waits_for_the_start_under_its_acquire_deadline(tmp_path: Path) -> None:
    """The write's own deadline starts only when an executor acknowledges it: waiting for the
    pool's start (a JVM start, in production) counts against the acquire timeout."""
    pool = ExecutorPool(_settings(tmp_path))
    try:
        impatient = pool.submit("conn-0", f"{T}:whoami", timeout=5, acquire_timeout=0.05)
        with pytest.raises(ExecutorUnavailable, match="task conn-0"):
            await impatient
        assert pool.started  # the start goes on: the next write finds an executor
        got = await pool.run("conn-0", f"{T}:whoami", timeout=5)
        assert got["pid"] in pool.pids()
    finally:
        await pool.close(graceful_timeout=0)


async def test_start_soon_starts_in_the_background_once(tmp_path: Path) -> None:
    pool = ExecutorPool(_settings(tmp_path))
    try:
        for _ in range(3):
            pool.start_soon()
        writes = [pool.submit(f"conn-{i}", f"{T}:whoami", timeout=5) for i in range(2)]
        await asyncio.gather(*(w.result() for w in writes))
        await pool.wait_ready(2, timeout=30)
        assert [e.id for e in pool.snapshot()] == [1, 2]
        await pool.start()  # already started: nothing more
        assert [e.id for e in pool.snapshot()] == [1, 2]
    finally:
        await pool.close(graceful_timeout=0)


async def test_start_soon_with_formats_starts_executors_that_load_them(tmp_path: Path) -> None:
    """A task whose connector names its table formats starts the executors with them: no
    executor without them is started and then replaced at the first write (a JVM start)."""
    jars = tmp_path / "jars"
    jars.mkdir()
    for jar in formats.jar_paths(["delta"], jars):
        stand_in_jar(jar)
    pool = ExecutorPool(_settings(tmp_path, spares=0, jars_dir=jars))
    try:
        pool.start_soon(["delta"])
        assert await pool.ready(30)
        assert pool.formats == {"delta"}
        assert [(e.id, e.formats) for e in pool.snapshot()] == [(1, frozenset({"delta"}))]
        await pool.run("conn-0", f"{T}:whoami", timeout=5, formats=("delta",))
        assert [e.id for e in pool.snapshot()] == [1]  # nothing recycled
        kinds = {e.kind for e in pool.events.snapshot()}
        assert PoolEventKind.RECYCLED not in kinds, pool.events.snapshot()
    finally:
        await pool.close(graceful_timeout=0)


async def test_start_soon_with_jars_missing_starts_without_them(tmp_path: Path) -> None:
    """Jars missing for a connector's format: the executors start anyway (a warning); the
    connector's first write meets the error, as it would have without the hint."""
    jars = tmp_path / "jars"
    jars.mkdir()
    pool = ExecutorPool(_settings(tmp_path, spares=0, jars_dir=jars))
    try:
        pool.start_soon(["delta"])
        assert await pool.ready(30)
        assert pool.formats == frozenset()
        with pytest.raises(JarsMissing):
            await pool.run("conn-0", f"{T}:whoami", timeout=5, formats=("delta",))
    finally:
        await pool.close(graceful_timeout=0)


async def test_ready_says_false_past_its_deadline(tmp_path: Path) -> None:
    pool = ExecutorPool(_settings(tmp_path, spares=0))
    try:
        assert not await pool.ready(0.001)  # no executor process starts that fast
        assert await pool.ready(30)  # the start went on
    finally:
        await pool.close(graceful_timeout=0)


async def test_closing_while_the_pool_starts_leaves_nothing(tmp_path: Path) -> None:
    pool = ExecutorPool(_settings(tmp_path))
    pool.start_soon()
    waiting = pool.submit("conn-0", f"{T}:whoami", timeout=5)
    await pool.close(graceful_timeout=0)
    with pytest.raises(PoolClosed):
        await waiting
    assert not pool.started and pool.pids() == [] and _scratch(tmp_path) == []


async def test_a_pool_never_started_starts_nothing_once_shutting_down(tmp_path: Path) -> None:
    """A write during the daemon's shutdown (a task's last flush) would only start a JVM to
    kill it: it is refused at once."""
    pool = ExecutorPool(_settings(tmp_path))
    pool.begin_shutdown()
    pool.start_soon()
    with pytest.raises(PoolClosed, match="never started"):
        pool.submit("conn-0", f"{T}:whoami", timeout=5)
    assert not pool.started
    await pool.close()


async def test_a_start_that_fails_fails_the_write_and_is_tried_again(tmp_path: Path) -> None:
    """Jars missing for a format loaded from the start: the daemon's check finds it without
    starting anything; a write that starts the pool fails with it (not retriable). The failed
    start is not kept: once the jars are there, the next write starts the pool."""
    jars = tmp_path / "jars"
    jars.mkdir()
    pool = ExecutorPool(_settings(tmp_path, formats=frozenset({"delta"}), jars_dir=jars))
    try:
        with pytest.raises(JarsMissing, match="connectd fetch-jars delta"):
            await pool.check_jars()
        with pytest.raises(JarsMissing):
            await pool.run("conn-0", f"{T}:whoami", timeout=5)
        assert not pool.started and pool.pids() == []
        for jar in formats.jar_paths(["delta"], jars):
            stand_in_jar(jar)
        await pool.check_jars()
        got = await pool.run("conn-0", f"{T}:whoami", timeout=5)
        assert pool.started and got["pid"] in pool.pids()
    finally:
        await pool.close(graceful_timeout=0)


class _Recording:
    """An ``Executors`` that records ``start_soon`` calls."""

    def __init__(self) -> None:
        self.starts = 0
        self.formats: frozenset[str] = frozenset()

    def submit(self, *args: Any, **kwargs: Any) -> WriteLease:
        raise AssertionError("no write expected")

    def start_soon(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        self.starts += 1
        self.formats = frozenset(formats)

    async def ready(self, timeout: float) -> bool:
        return True

    def current_pid(self, task_id: str) -> int | None:
        return None

    def snapshot(self) -> list[Any]:
        return []

    def status(self) -> Any:
        raise AssertionError("no status expected")


@pytest.mark.parametrize(
    ("setting", "starts"), [("auto", 1), ("on-demand", 0), ("eager", 0), (None, 1)]
)
def test_only_auto_starts_executors_for_a_task_that_needs_them(
    setting: str | None, starts: int, tmp_path: Path
) -> None:
    props = {"bootstrap.servers": "127.0.0.1:1", "state.dir": str(tmp_path)}
    if setting is not None:
        props["executor.pool.start"] = setting
    config = parse_worker(props).config
    assert config.executor_pool_start is PoolStart(setting or "auto")
    executors = _Recording()
    RuntimeEnv.of_worker(config, executors).executors_needed(frozenset({"delta"}))
    assert executors.starts == starts
    assert executors.formats == (frozenset({"delta"}) if starts else frozenset())


def test_the_spark_sinks_need_executors_and_echo_sink_does_not() -> None:
    import daemon.connectors.builtin  # noqa: F401 (registers the aliases)

    needs = {
        alias: default_registry.resolve(alias).needs_executors
        for alias in ("ParquetSink", "DeltaSink", "IcebergSink", "HangSink", "EchoSink")
    }
    formats = {
        alias: default_registry.resolve(alias).executor_formats
        for alias in ("ParquetSink", "DeltaSink", "IcebergSink", "EchoSink")
    }
    assert formats == {
        "ParquetSink": frozenset(),
        "DeltaSink": {"delta"},
        "IcebergSink": {"iceberg"},
        "EchoSink": frozenset(),
    }
    assert needs == {
        "ParquetSink": True,
        "DeltaSink": True,
        "IcebergSink": True,
        "HangSink": True,
        "EchoSink": False,
    }
