"""A submitted write's lease: acceptance (which executor, when) and result, with real executor
processes but no Spark."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from daemon.errors import PoolClosed, WriteTimeout
from daemon.executor import Acceptance, ExecutorPool, PoolSettings

T = "daemon.executor.testing"


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[ExecutorPool]:
    settings = PoolSettings(
        size=1,
        spares=1,
        with_spark=False,
        heartbeat_interval=0.2,
        start_timeout=30.0,
        acquire_timeout=30.0,
        work_dir=tmp_path / "work",
        handoff_dir=tmp_path / "shm",
    )
    pool = ExecutorPool(settings)
    await pool.start()
    await pool.wait_ready(settings.target, timeout=30)
    try:
        yield pool
    finally:
        await pool.close(graceful_timeout=0)


async def test_a_lease_says_which_executor_accepted_it_and_when(pool: ExecutorPool) -> None:
    before = time.monotonic()
    lease = pool.submit("conn-0", f"{T}:sleep", kwargs={"seconds": 0.2}, timeout=10)
    accepted = await lease.accepted()
    assert isinstance(accepted, Acceptance) and lease.acceptance == accepted
    assert before <= accepted.at <= time.monotonic()
    assert pool.current_pid("conn-0") == accepted.pid
    assert accepted.executor in {e.id for e in pool.snapshot() if e.pid == accepted.pid}
    assert await lease == 0.2
    assert lease.done() and not lease.killed


async def test_a_lease_past_its_deadline_was_killed_and_says_so(pool: ExecutorPool) -> None:
    lease = pool.submit("conn-0", f"{T}:hang_in_python", timeout=0.5)
    accepted = await lease.accepted()
    with pytest.raises(WriteTimeout):
        await lease.result()
    assert lease.killed and pool.current_pid("conn-0") is None
    assert accepted.pid not in pool.pids()


async def test_a_cancelled_result_kills_the_write_before_it_returns(pool: ExecutorPool) -> None:
    lease = pool.submit("conn-0", f"{T}:hang_in_python", timeout=60)
    accepted = await lease.accepted()
    waiting = asyncio.ensure_future(lease.result())
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert lease.done() and lease.killed
    assert accepted.pid not in pool.pids()


async def test_acceptance_of_a_write_that_never_started_raises_its_error(
    pool: ExecutorPool,
) -> None:
    first = pool.submit("conn-0", f"{T}:hang_in_python", timeout=60)
    await first.accepted()
    second = pool.submit("conn-0", f"{T}:whoami", timeout=10, acquire_timeout=0.2)
    with pytest.raises(Exception, match="previous write still holds an executor"):
        await second.accepted()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await pool.close(graceful_timeout=0)
    with pytest.raises(PoolClosed):
        pool.submit("conn-0", f"{T}:whoami", timeout=10)
