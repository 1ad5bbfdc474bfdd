"""Event-loop lag: how late the loop runs a coroutine that asked to sleep 0.1 s.

A connector that blocks the loop (a Spark call, a large file read, a CPU-heavy loop over
records) shows here first: every task, heartbeat and REST request of the daemon waits behind it.
The monitor keeps the last ``window`` samples; ``stats()`` gives p50, p99 and the maximum.

A late sample has two causes: the loop's own thread was busy (its callbacks ran long: the
daemon's fault), or the thread was not running at all (the machine's other processes had the
cores, or another thread held the GIL). ``busy_max`` keeps the first apart: of each sample's
lateness, the part the loop thread spent on the CPU (``time.thread_time``). ``own_p99`` and
``own_max`` are the lateness less the time the thread was ready to run but waited for a core
(the kernel's run-queue delay, ``/proc/thread-self/schedstat`` on Linux): what the loop's own
work and its blocking calls cost, which a neighbour's load on the machine cannot inflate. Where
the kernel does not report it, they equal the wall figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

_SCHEDSTAT = "/proc/thread-self/schedstat"


def run_queue_wait() -> float | None:
    """Seconds the calling thread has spent ready to run but waiting for a core, since it
    started (None where the kernel does not say)."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def settle_heap() -> None:
    """What start-up made (modules, classes, settings) is never garbage: collect once, then
    freeze what is left, so that later full collections skip it. Unfrozen, each full
    collection scanned all of it and stalled the loop for 20-300 ms (bench/README.md). Call
    once start-up's imports are done, before the loop carries work."""
    gc.collect()
    gc.freeze()


@dataclass(frozen=True)
class LagStats:
    samples: int
    last: float
    p50: float
    p99: float
    max: float
    total_max: float  # since start, not only the window
    busy_max: float = 0.0  # since start: the largest lateness the loop thread spent computing
    own_p99: float = 0.0  # the window's p99 of lateness less run-queue wait
    own_max: float = 0.0  # since start: the largest lateness less run-queue wait


class LoopLag:
    """Samples the running loop's lag every ``interval`` seconds (start it on that loop)."""

    def __init__(
        self,
        interval: float = 0.1,
        window: int = 3000,
        on_sample: Callable[[float], None] | None = None,
    ) -> None:
        self.interval = interval
        self.on_sample = on_sample
        self._samples: deque[float] = deque(maxlen=window)
        self._own: deque[float] = deque(maxlen=window)
        self._task: asyncio.Task[None] | None = None
        self._total_max = 0.0
        self._busy_max = 0.0
        self._own_max = 0.0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            # The wait is read outside the wall-clock pair: a preemption between the two reads
            # counts as wait, never as the loop's own lateness.
            wait_before = run_queue_wait()
            before, cpu_before = time.monotonic(), time.thread_time()
            await asyncio.sleep(self.interval)
            lag = max(0.0, time.monotonic() - before - self.interval)
            busy = time.thread_time() - cpu_before
            wait_after = run_queue_wait()
            waited = 0.0 if wait_before is None or wait_after is None else wait_after - wait_before
            own = max(0.0, lag - waited)
            self._samples.append(lag)
            self._own.append(own)
            self._total_max = max(self._total_max, lag)
            self._own_max = max(self._own_max, own)
            self._busy_max = max(self._busy_max, min(own, busy))
            if self.on_sample is not None:
                self.on_sample(lag)

    def reset(self) -> None:
        self._samples.clear()
        self._own.clear()
        self._total_max = 0.0
        self._busy_max = 0.0
        self._own_max = 0.0

    def stats(self) -> LagStats:
        ordered = sorted(self._samples)
        if not ordered:
            return LagStats(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        own = sorted(self._own)

        def pct(values: list[float], p: float) -> float:
            return values[min(len(values) - 1, int(p * len(values)))]

        return LagStats(
            samples=len(ordered),
            last=self._samples[-1],
            p50=pct(ordered, 0.50),
            p99=pct(ordered, 0.99),
            max=ordered[-1],
            total_max=self._total_max,
            busy_max=self._busy_max,
            own_p99=pct(own, 0.99),
            own_max=self._own_max,
        )
