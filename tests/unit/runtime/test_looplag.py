"""The loop-lag monitor sees a blocked loop."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from daemon.runtime import looplag
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


# Eight CPU hogs share one core with a loop thread of the idle scheduling class: the thread is
# ready to run most of the time but waits for the core. Each hog says when it is on that core
# and spinning, and the loop is measured only after all eight have said so (a CI run measured
# nine samples in the 0.2 s before the hogs' interpreters had started: 2 ms wall lag). Each hog
# ends itself once its parent is gone.
_CONTENDED = """
import asyncio, dataclasses, json, os, subprocess, sys
from daemon.runtime.looplag import LoopLag

HOG = (
    "import os, sys\\n"
    "os.sched_setaffinity(0, {0})\\n"
    "parent = os.getppid()\\n"
    "sys.stdout.write('spinning\\\\n')\\n"
    "sys.stdout.flush()\\n"
    "while os.getppid() == parent:\\n"
    "    for _ in range(100000): pass\\n"
)


async def main():
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    try:
        for hog in hogs:
            assert hog.stdout.readline() == "spinning\\n", "a hog did not start"
        os.sched_setaffinity(0, {0})
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # runs when the hogs let it
        lag = LoopLag(interval=0.02)
        lag.start()
        # Samples, however long a starved loop takes to take them (at most 30 s).
        deadline = asyncio.get_running_loop().time() + 30
        while lag.stats().samples < 5 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        await lag.stop()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(json.dumps(dataclasses.asdict(lag.stats())))


asyncio.run(main())
"""


def test_own_lag_leaves_out_the_wait_for_a_core() -> None:
    if looplag.run_queue_wait() is None:
        pytest.skip("the kernel reports no run-queue delay (/proc/thread-self/schedstat)")
    root = Path(__file__).resolve().parents[3]
    # The scheduler does not always starve the idle-class loop: measured here (kernel 6.18, 2
    # cores), about one run in four let it run at every 4 ms tick, hogs spinning or not. Whatever
    # the wall lag, the loop's own lag stays nil; the test needs one run where the loop really
    # waited for the core, and takes up to five runs to see one.
    runs = []
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-c", _CONTENDED], cwd=root, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)
        runs.append(stats)
        # The loop's own work and blocking were nil, however long it waited for the core.
        assert stats["own_max"] < 0.01 and stats["busy_max"] < 0.01, stats
        if stats["max"] > 0.02:
            break
    assert stats["max"] > 0.02, f"the loop never waited for a core in {len(runs)} runs: {runs}"
    assert stats["own_max"] < stats["max"] / 4, stats


async def test_own_lag_keeps_a_blocking_call() -> None:
    lag = LoopLag(interval=0.02)
    lag.start()
    try:
        await asyncio.sleep(0.05)
        time.sleep(0.25)  # off the CPU, but not waiting for a core: the loop's own doing
        await asyncio.sleep(0.05)
    finally:
        await lag.stop()
    stats = lag.stats()
    assert 0.2 < stats.own_max <= stats.total_max
