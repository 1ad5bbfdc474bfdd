"""The pool's leases, kills and replacements, with real executor processes but no Spark
(``with_spark=False``: the executors run plain Python write functions)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import uvloop
from support.daemon import wait_until

from daemon.errors import (
    ExecutorDied,
    ExecutorStartFailed,
    ExecutorUnavailable,
    PoolClosed,
    WriteFailed,
    WriteTimeout,
)
from daemon.executor import ExecutorPool, ExecutorState, PoolSettings, function_ref
from daemon.executor.info import PoolEventKind
from daemon.executor.launch import Launcher
from daemon.executor.lease import Acceptance, WriteLease
from daemon.executor.process import ProcStat, read_stat, scan, tree

T = "daemon.executor.testing"
MakePool = Callable[..., Awaitable[ExecutorPool]]


def _settings(tmp_path: Path, **overrides: Any) -> PoolSettings:
    base: dict[str, Any] = {
        "size": 1,
        "spares": 1,
        "with_spark": False,
        "heartbeat_interval": 0.2,
        "heartbeat_timeout": 2.0,
        "start_timeout": 30.0,
        "acquire_timeout": 30.0,
        "work_dir": tmp_path / "work",
        "handoff_dir": tmp_path / "shm",
    }
    base.update(overrides)
    return PoolSettings(**base)


@pytest.fixture
async def make_pool(tmp_path: Path) -> AsyncIterator[MakePool]:
    pools: list[ExecutorPool] = []

    async def make(**overrides: Any) -> ExecutorPool:
        pool = ExecutorPool(_settings(tmp_path, **overrides))
        pools.append(pool)
        await pool.start()
        await pool.wait_ready(pool.settings.target, timeout=30)
        return pool

    yield make
    for pool in pools:
        await pool.close(graceful_timeout=0)


async def _accepted(lease: WriteLease) -> Acceptance:
    """The executor's acknowledgement of ``lease``: the write is running in it now."""
    return await asyncio.wait_for(lease.accepted(), 10)


def _running(stats: dict[int, ProcStat]) -> list[int]:
    out = []
    for pid, stat in stats.items():
        now = read_stat(pid)
        if now is not None and now.starttime == stat.starttime and now.running:
            out.append(pid)
    return out


async def test_run_returns_the_value_and_sees_the_batch(make_pool: MakePool) -> None:
    pool = await make_pool()
    table = pa.table({"x": list(range(500))})
    got = await pool.run("conn-0", f"{T}:whoami", table, timeout=10)
    assert got["rows"] == 500
    assert got["pid"] in {e.pid for e in pool.snapshot()}
    assert await pool.run("conn-0", f"{T}:sleep", kwargs={"seconds": 0.01}, timeout=10) == 0.01
    info = next(e for e in pool.snapshot() if e.pid == got["pid"])
    assert info.writes_done >= 1 and info.last_write_seconds is not None
    assert info.state is ExecutorState.IDLE and info.task_id is None
    assert pool.status().writes_done == 2


async def test_the_executor_that_wrote_last_takes_the_next_write(make_pool: MakePool) -> None:
    """A hot executor first: the spare stays idle (cold and small) while one suffices, and
    is used as soon as the hot one is busy."""
    pool = await make_pool()  # 1 executor + 1 spare, both ready
    first = await pool.run("conn-0", f"{T}:whoami", timeout=10)
    again = [await pool.run(f"conn-{i}", f"{T}:whoami", timeout=10) for i in range(4)]
    assert {g["pid"] for g in again} == {first["pid"]}
    spare = next(e for e in pool.snapshot() if e.pid != first["pid"])
    assert spare.writes_done == 0
    # The hot one busy: a write of another task is leased the spare at once.
    busy = pool.submit("conn-0", f"{T}:sleep", timeout=10, kwargs={"seconds": 1.0})
    await _accepted(busy)
    other = await pool.run("conn-1", f"{T}:whoami", timeout=10, acquire_timeout=10)
    assert other["pid"] == spare.pid
    await busy.result()


async def test_hung_write_is_killed_at_its_deadline_and_the_spare_takes_over(
    make_pool: MakePool, tmp_path: Path
) -> None:
    pool = await make_pool()
    marker = tmp_path / "hung"
    write = asyncio.create_task(
        pool.run("conn-0", f"{T}:hang_in_python", kwargs={"marker": str(marker)}, timeout=1.0)
    )
    await wait_until(marker.exists, 10, "the write hanging in its executor")
    pid = pool.current_pid("conn-0")
    assert pid is not None and pid == int(marker.read_text())
    hung_tree = tree(pid, scan(), session=pid)
    began = time.monotonic()
    with pytest.raises(WriteTimeout) as err:
        await write
    assert _running(hung_tree) == []
    assert "conn-0" in str(err.value) and "1 s" in str(err.value) and str(pid) in str(err.value)
    assert time.monotonic() - began < 2.0
    took = time.monotonic()
    got = await pool.run("conn-0", f"{T}:whoami", timeout=5, acquire_timeout=1.0)
    assert got["pid"] != pid and time.monotonic() - took < 1.0
    assert pool.status().kills == 1
    await pool.wait_ready(2, timeout=30)  # the replacement came up
    assert len(pool.snapshot()) == 2


async def test_executor_that_dies_fails_the_write_and_is_replaced(make_pool: MakePool) -> None:
    pool = await make_pool()
    with pytest.raises(ExecutorDied, match="exit code 9"):
        await pool.run("conn-0", f"{T}:crash", kwargs={"code": 9}, timeout=10)
    assert (await pool.run("conn-0", f"{T}:whoami", timeout=10))["rows"] == 0
    await pool.wait_ready(2, timeout=30)
    assert pool.status().deaths == 1


async def test_failing_function_keeps_the_executor(make_pool: MakePool) -> None:
    pool = await make_pool(spares=0)
    first = await pool.run("conn-0", f"{T}:whoami", timeout=10)
    with pytest.raises(WriteFailed, match="ValueError: nope") as err:
        await pool.run("conn-0", f"{T}:fail", kwargs={"message": "nope"}, timeout=10)
    assert "Traceback" in str(err.value)
    assert (await pool.run("conn-0", f"{T}:whoami", timeout=10))["pid"] == first["pid"]


async def test_failed_write_that_leaves_state_recycles_its_executor(
    make_pool: MakePool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "connectd.executor")
    # Issue 13, item 6: a failed Spark job's JVM keeps the files it had open (deleted or not),
    # so the executor is replaced; the error's first line names the root cause.
    pool = await make_pool()
    target = str(tmp_path / "table" / "_connectd" / "staging" / "c1")
    with pytest.raises(WriteFailed) as err:
        await pool.run("conn-0", f"{T}:fail_io", kwargs={"path": target}, timeout=10)
    line = str(err.value).splitlines()[0]
    assert line == (
        f"task conn-0: No space left on device on {target}/part-00000.parquet"
        f" (write function {T}:fail_io raised OSError)"
    )
    (leased,) = [e for e in pool.events.snapshot() if e.kind is PoolEventKind.LEASED]
    assert read_stat(leased.pid) is None  # reaped before the error was raised
    mine = [(e.kind, e.task_id) for e in pool.events.snapshot() if e.pid == leased.pid]
    assert mine == [
        (PoolEventKind.LEASED, "conn-0"),
        (PoolEventKind.RECYCLED, "conn-0"),
        (PoolEventKind.REAPED, "conn-0"),
    ]
    status = pool.status()
    assert (status.recycles, status.kills, status.deaths) == (1, 0, 0)
    assert (await pool.run("conn-0", f"{T}:whoami", timeout=10))["pid"] != leased.pid
    await pool.wait_ready(2, timeout=30)  # the replacement came up
    assert "recycled after a failed write for task conn-0" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_shutdown_replaces_nothing_and_closing_warns_about_nothing(
    make_pool: MakePool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 13, item 14: an executor that ends during a shutdown is not replaced (a JVM start
    # outlasts the shutdown's wait), and closing idle executors is not a warning.
    pool = await make_pool()
    pool.begin_shutdown()
    with pytest.raises(WriteFailed):
        await pool.run("conn-0", f"{T}:fail_io", kwargs={"path": str(tmp_path)}, timeout=10)
    assert len(pool.snapshot()) == 1 and pool.status().starting == 0
    assert (await pool.run("conn-0", f"{T}:whoami", timeout=10))["rows"] == 0  # still writes
    caplog.clear()
    caplog.set_level(logging.INFO, "connectd.executor")
    await pool.close(graceful_timeout=1.0)
    assert pool.pids() == []
    assert "the pool is closing" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "started" not in caplog.text


async def test_cancelling_the_await_kills_the_executor(make_pool: MakePool, tmp_path: Path) -> None:
    pool = await make_pool()
    marker = tmp_path / "hung"
    write = asyncio.create_task(
        pool.run("conn-0", f"{T}:hang_in_python", kwargs={"marker": str(marker)}, timeout=60)
    )
    await wait_until(marker.exists, 10, "the write hanging in its executor")
    pid = int(marker.read_text())
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    assert read_stat(pid) is None  # killed and reaped before the cancellation was reported
    assert pool.current_pid("conn-0") is None


async def test_one_task_never_writes_twice_at_once(make_pool: MakePool) -> None:
    # Two executors that may both write: what makes a task's writes wait is its own gate,
    # not a full pool.
    pool = await make_pool(size=2, spares=0)
    first = pool.submit("conn-0", f"{T}:sleep", kwargs={"seconds": 0.5}, timeout=5)
    await _accepted(first)
    began = time.monotonic()
    # The other executor is idle, but this task's previous write still holds one: the next
    # write waits for it to end.
    await pool.run("conn-0", f"{T}:whoami", timeout=5)
    assert time.monotonic() - began > 0.3 and first.done()
    assert await first == 0.5
    # Past its acquire deadline, a second write of a busy task is refused...
    other = pool.submit("conn-0", f"{T}:sleep", kwargs={"seconds": 2.0}, timeout=5)
    holder = (await _accepted(other)).pid
    with pytest.raises(ExecutorUnavailable, match="previous write"):
        await pool.run("conn-0", f"{T}:whoami", timeout=5, acquire_timeout=0.1)
    # ...while another task takes the idle executor at once.
    took = time.monotonic()
    got = await pool.run("conn-1", f"{T}:whoami", timeout=5, acquire_timeout=1.0)
    assert not other.done(), "conn-0's write ended early: the check proves nothing"
    assert got["pid"] != holder and time.monotonic() - took < 1.0
    assert pool.current_pid("conn-0") == holder
    assert await other == 2.0


async def test_waiting_for_a_free_executor_is_bounded(make_pool: MakePool) -> None:
    pool = await make_pool(spares=0)
    busy = pool.submit("a", f"{T}:sleep", kwargs={"seconds": 1.0}, timeout=5)
    await _accepted(busy)
    with pytest.raises(ExecutorUnavailable, match="1 busy"):
        await pool.run("b", f"{T}:whoami", timeout=5, acquire_timeout=0.2)
    assert await busy == 1.0
    assert (await pool.run("b", f"{T}:whoami", timeout=5))["rows"] == 0


async def test_idle_executor_without_heartbeat_is_replaced(make_pool: MakePool) -> None:
    pool = await make_pool(spares=0)
    (victim,) = pool.snapshot()
    os.kill(victim.pid, signal.SIGSTOP)  # alive, but its heartbeats stop
    await wait_until(
        lambda: all(e.pid != victim.pid for e in pool.snapshot()), 10, "the silent one removed"
    )
    assert read_stat(victim.pid) is None
    assert "heartbeat" in (pool.status().problem or "")
    await pool.wait_ready(1, timeout=30)
    assert pool.snapshot()[0].pid != victim.pid


async def test_close_finishes_running_writes_then_kills_everything(
    make_pool: MakePool, tmp_path: Path
) -> None:
    pool = await make_pool()
    pids = [e.pid for e in pool.snapshot()]
    write = pool.submit("a", f"{T}:sleep", kwargs={"seconds": 0.3}, timeout=5)
    await _accepted(write)  # running when the close comes
    await pool.close(graceful_timeout=5)
    assert await write == 0.3
    assert all(read_stat(p) is None for p in pids)
    assert list((tmp_path / "shm").glob("connectd-*/*")) == []
    assert list((tmp_path / "work").glob("connectd-*/*")) == []
    with pytest.raises(PoolClosed):
        await pool.run("a", f"{T}:whoami", timeout=5)


async def test_close_kills_writes_past_the_graceful_deadline(make_pool: MakePool) -> None:
    pool = await make_pool(spares=0)
    write = pool.submit("a", f"{T}:hang_in_python", timeout=60)
    pid = (await _accepted(write)).pid
    assert pool.current_pid("a") == pid
    await pool.close(graceful_timeout=0.2)
    with pytest.raises(PoolClosed):
        await write
    assert read_stat(pid) is None


async def test_executors_start_one_at_a_time_until_one_is_ready(tmp_path: Path) -> None:
    # Issue 15: JVM starts share the cores, so executors started together are each ready late
    # and the first write waits for all of them. The first starts alone; the rest once it is
    # ready, and the first write runs on it.
    async with ExecutorPool(_settings(tmp_path, size=2, spares=1)) as pool:
        (first,) = pool.snapshot()
        assert first.state is ExecutorState.STARTING
        got = await pool.run("conn-0", f"{T}:whoami", timeout=10)
        assert got["pid"] == first.pid
        await pool.wait_ready(3, timeout=30)
        first, *rest = pool.snapshot()
        assert first.startup_seconds is not None and [e.id for e in rest] == [2, 3]
        ready_at = first.started_at + first.startup_seconds
        assert all(e.started_at >= ready_at - 0.01 for e in rest), (first, rest)


async def test_a_failed_start_backs_off_then_the_next_one_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawn = Launcher.spawn
    broken: list[int] = []

    def spawn_first_broken(self: Launcher, ident: int, *args: Any, **kwargs: Any) -> Any:
        if broken:
            return spawn(self, ident, *args, **kwargs)
        broken.append(ident)
        # An interpreter that cannot start: the executor exits during its start-up.
        env, self._env = self._env, {**self._env, "PYTHONHOME": str(tmp_path / "nowhere")}
        try:
            return spawn(self, ident, *args, **kwargs)
        finally:
            self._env = env

    monkeypatch.setattr(Launcher, "spawn", spawn_first_broken)
    async with ExecutorPool(_settings(tmp_path, backoff_initial=0.3)) as pool:
        (first,) = pool.snapshot()  # nothing else starts while it does
        got = await pool.run("conn-0", f"{T}:whoami", timeout=10)
        assert broken == [first.id] and read_stat(first.pid) is None
        status = pool.status()
        assert (status.start_failures, status.failure_streak, status.problem) == (1, 0, None)
        await pool.wait_ready(2, timeout=30)
        second, third = pool.snapshot()
        assert got["pid"] == second.pid and (second.id, third.id) == (2, 3)
        assert second.startup_seconds is not None
        assert third.started_at >= second.started_at + second.startup_seconds - 0.01


async def test_closing_while_the_first_executor_starts_starts_no_other(tmp_path: Path) -> None:
    pool = ExecutorPool(_settings(tmp_path))
    await pool.start()
    (only,) = pool.snapshot()
    await pool.close(graceful_timeout=0)
    assert pool.pids() == [] and read_stat(only.pid) is None


def test_the_pool_runs_under_uvloop(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, int, int]:
        async with ExecutorPool(_settings(tmp_path)) as pool:
            await pool.wait_ready(2, timeout=30)
            got = await pool.run("u", f"{T}:whoami", pa.table({"x": [1, 2]}), timeout=5)
            with pytest.raises(WriteTimeout):
                await pool.run("u", f"{T}:hang_in_python", timeout=0.5)
            with pytest.raises(ExecutorDied):
                await pool.run("u", f"{T}:crash", timeout=5)
            return type(asyncio.get_running_loop()).__module__, got["rows"], pool.status().kills

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        loop_module, rows, kills = runner.run(scenario())
    assert loop_module.startswith("uvloop") and rows == 2 and kills == 1


def test_function_refs() -> None:
    from daemon.executor import testing

    assert function_ref(testing.whoami) == "daemon.executor.testing:whoami"
    assert function_ref("a.b:c") == "a.b:c"
    with pytest.raises(TypeError):
        function_ref("a.b.c")
    with pytest.raises(TypeError):
        function_ref(lambda spark, batch: None)


async def test_a_pool_refuses_to_start_inside_an_executor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A write function's module that starts a pool at import would make executors spawn
    executors without end; inside an executor (CONNECTD_PARENT_PID set) start() refuses."""
    monkeypatch.setenv("CONNECTD_PARENT_PID", str(os.getppid()))
    pool = ExecutorPool(PoolSettings(with_spark=False, work_dir=tmp_path, handoff_dir=tmp_path))
    with pytest.raises(ExecutorStartFailed, match="cannot start inside an executor process"):
        await pool.start()
    assert pool.snapshot() == []


# -- one connector's long writes never hold the others' back (queue.py) ---------------------


async def test_a_hung_write_steps_aside_for_another_connectors_write(
    make_pool: MakePool, tmp_path: Path
) -> None:
    """1 executor + 1 spare: connector ``hang``'s write blocks on the one place. Once it has
    run ``overdue_after`` and connector ``ok``'s write waits, it steps aside: ``ok`` writes on
    the spare, a third executor starts (the spare's place), ``hang`` keeps its executor until
    its deadline kills it, and then the pool is back to two."""
    pool = await make_pool(overdue_after=0.3)
    marker = tmp_path / "hung"
    hung = pool.submit(
        "hang-0", f"{T}:hang_in_python", kwargs={"marker": str(marker)}, timeout=4.0, group="hang"
    )
    await wait_until(marker.exists, 10, "the write hanging in its executor")
    hung_pid = pool.current_pid("hang-0")
    began = time.monotonic()
    got = await pool.run("ok-0", f"{T}:whoami", timeout=5, acquire_timeout=5, group="ok")
    assert got["pid"] != hung_pid and time.monotonic() - began < 1.5
    assert pool.status().aside == 1
    await pool.wait_ready(3, timeout=30)  # one more executor, for the place given up
    # The others keep writing, one after the other, while the hang lasts.
    for _ in range(3):
        got = await pool.run("ok-0", f"{T}:whoami", timeout=5, acquire_timeout=1.0, group="ok")
        assert got["pid"] != hung_pid
    assert not hung.done()
    with pytest.raises(WriteTimeout):
        await hung
    assert pool.status().aside == 0 and pool.status().kills == 1
    await wait_until(lambda: len(pool.snapshot()) == 2, 10, "the killed one reaped, none again")
    assert hung_pid not in {e.pid for e in pool.snapshot()}


async def test_a_long_write_steps_aside_only_for_another_connector(
    make_pool: MakePool,
) -> None:
    """A connector's own writes queue behind its long write (its limit is the pool's size): no
    write steps aside and no executor starts for them."""
    pool = await make_pool(overdue_after=0.2)
    long = pool.submit("c-0", f"{T}:sleep", kwargs={"seconds": 1.0}, timeout=5, group="c")
    await _accepted(long)
    began = time.monotonic()
    await pool.run("c-1", f"{T}:whoami", timeout=5, group="c")
    assert long.done() and time.monotonic() - began > 0.6
    assert pool.status().aside == 0 and len(pool.snapshot()) == 2


async def test_the_extra_executor_is_retired_once_the_long_write_ends(
    make_pool: MakePool,
) -> None:
    """A slow write that stepped aside and then finished: once the excess has lasted
    ``excess_idle``, the pool keeps ``size + spares`` again, retiring an idle one (not counted
    as a kill or death)."""
    pool = await make_pool(overdue_after=0.2, excess_idle=1.0)
    slow = pool.submit("slow-0", f"{T}:sleep", kwargs={"seconds": 2.0}, timeout=10, group="slow")
    await _accepted(slow)
    await pool.run("fast-0", f"{T}:whoami", timeout=5, acquire_timeout=5, group="fast")
    assert pool.status().aside == 1
    await pool.wait_ready(3, timeout=30)
    assert await slow == 2.0
    ended = time.monotonic()
    await asyncio.sleep(0.5)
    assert len(pool.snapshot()) == 3, "retired before the excess lasted excess_idle"
    await wait_until(lambda: len(pool.snapshot()) == 2, 10, "back to size + spares")
    assert time.monotonic() - ended >= 0.9
    status = pool.status()
    assert (status.aside, status.kills, status.deaths) == (0, 0, 0)


async def test_a_connector_holds_at_most_its_limit_of_executors(make_pool: MakePool) -> None:
    """Two places, connector ``c`` limited to one: its second write waits although an
    executor is idle, another connector's write takes that one at once, and a wait past the
    acquire deadline names the limit."""
    pool = await make_pool(size=2, spares=0)
    first = pool.submit(
        "c-0", f"{T}:sleep", kwargs={"seconds": 1.0}, timeout=5, group="c", group_limit=1
    )
    await _accepted(first)
    with pytest.raises(ExecutorUnavailable, match=r"executor\.writes\.max=1"):
        await pool.run(
            "c-1", f"{T}:whoami", timeout=5, acquire_timeout=0.2, group="c", group_limit=1
        )
    took = time.monotonic()
    await pool.run("d-0", f"{T}:whoami", timeout=5, acquire_timeout=1.0, group="d")
    assert time.monotonic() - took < 0.5 and not first.done()
    waiting = pool.submit("c-1", f"{T}:whoami", timeout=5, group="c", group_limit=1)
    assert (await waiting)["pid"] > 0 and first.done()


async def test_writes_aside_never_make_more_executors_than_the_most(
    make_pool: MakePool, tmp_path: Path
) -> None:
    """``max_size`` 2 with 1 executor + 1 spare: a hung write steps aside, the other
    connector's write takes the spare, and no third executor starts."""
    pool = await make_pool(overdue_after=0.2, max_size=2)
    marker = tmp_path / "hung"
    hung = pool.submit(
        "hang-0", f"{T}:hang_in_python", kwargs={"marker": str(marker)}, timeout=2.0, group="hang"
    )
    await wait_until(marker.exists, 10, "the write hanging in its executor")
    await pool.run("ok-0", f"{T}:whoami", timeout=5, acquire_timeout=5, group="ok")
    assert pool.status().aside == 1
    assert len(pool.snapshot()) == 2 and pool.status().starting == 0
    with pytest.raises(WriteTimeout):
        await hung


async def test_a_waiter_freed_from_its_limit_gets_an_overdue_writes_place(
    make_pool: MakePool, tmp_path: Path
) -> None:
    """Connector ``c``'s second write waits on its limit (its first hangs, aside); when the
    hang is killed, the limit frees it but the one place is held by ``d``'s long write: that
    write is overdue and steps aside, so ``c``'s write goes on without waiting for it."""
    pool = await make_pool(overdue_after=0.2)
    marker = tmp_path / "hung"
    hung = pool.submit(
        "c-0",
        f"{T}:hang_in_python",
        kwargs={"marker": str(marker)},
        timeout=2.0,
        group="c",
        group_limit=1,
    )
    await wait_until(marker.exists, 10, "c's first write hanging")
    long = pool.submit("d-0", f"{T}:sleep", kwargs={"seconds": 6.0}, timeout=10, group="d")
    await _accepted(long)  # c-0 stepped aside for it
    waiting = pool.submit(
        "c-1", f"{T}:whoami", timeout=5, acquire_timeout=10, group="c", group_limit=1
    )
    with pytest.raises(WriteTimeout):
        await hung
    assert (await waiting)["pid"] > 0
    assert not long.done(), "c's write waited for d's long write to end"
    assert pool.status().aside == 1  # d's, now
    assert await long == 6.0
