"""The loop-lag monitor sees a blocked loop."""

from __future__ import annotations

import asyncio
import time

from daemon.runtime.looplag import LoopLag


async def test_lag_monitor_sees_a_blocked_loop() -> None:
    seen: list[float] = []
    lag = LoopLag(interval=0.02, on_sample=seen.append)
    lag.start()
    try:
        await asyncio.sleep(0.1)
        time.sleep(0.3)  # block the loop on purpose
        await asyncio.sleep(0.1)
    finally:
        await lag.stop()
    stats = lag.stats()
    assert stats.samples == len(seen) >= 3
    assert 0.2 < stats.max == stats.total_max < 1.0
    assert stats.p50 < 0.1
    assert stats.busy_max < 0.1, "a sleeping thread is not a busy loop"
    lag.reset()
    assert lag.stats().samples == 0


async def test_busy_max_is_the_lateness_the_loop_spent_computing() -> None:
    lag = LoopLag(interval=0.02)
    lag.start()
    try:
        await asyncio.sleep(0.05)
        spin_until = time.thread_time() + 0.25  # the loop's own callback, on the CPU
        while time.thread_time() < spin_until:
            pass
        await asyncio.sleep(0.05)
    finally:
        await lag.stop()
    stats = lag.stats()
    assert 0.2 < stats.busy_max <= stats.total_max
