"""A clock the test moves: the restart policy's time (``daemon.runtime.slot.autorestart.Clock``)
without real waiting.

``ManualClock`` starts at the real readings and stands still; ``advance(seconds)`` moves it and
wakes every ``sleep`` whose end it reached, in order. A sleep of 0 or less returns at once (a
restart "now" happens now). Use it on one event loop (the in-process daemon's, which is the
test's own).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time

from daemon.runtime.slot.autorestart import Clock


class ManualClock(Clock):
    def __init__(self) -> None:
        self._mono = time.monotonic()
        self._wall = time.time()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def wall(self) -> float:
        return self._wall

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._order), waiter))
        await waiter

    @property
    def sleeping(self) -> list[float]:
        """Seconds until each pending sleep ends, soonest first (cancelled ones left out)."""
        return sorted(end - self._mono for end, _, w in self._sleepers if not w.done())

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``; every sleep that ends by then is woken."""
        if seconds < 0:
            raise ValueError("time does not go back")
        self._mono += seconds
        self._wall += seconds
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, waiter = heapq.heappop(self._sleepers)
            if not waiter.done():
                waiter.set_result(None)

    async def advance_to_next(self) -> float:
        """Move time on to the end of the soonest pending sleep (which is woken); the seconds
        moved. ``ValueError`` if nothing sleeps."""
        pending = self.sleeping
        if not pending:
            raise ValueError("nothing sleeps on this clock")
        self.advance(pending[0])
        await asyncio.sleep(0)
        return pending[0]
