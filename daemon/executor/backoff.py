"""Backing off executor starts: consecutive failures wait ``initial * 2**(n-1)`` seconds, at most
``maximum``; a successful start ends the streak."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class StartBackoff:
    """The start-failure streak of one pool and the timer that ends its wait."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = maximum
        self.streak = 0  # failures in a row
        self.failures = 0  # failures ever
        self._until = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def failed(self, now: float) -> float:
        """Count a failure at loop time ``now``; the wait before the next start."""
        self.failures += 1
        self.streak += 1
        delay: float = min(self.initial * 2 ** (self.streak - 1), self.maximum)
        self._until = now + delay
        return delay

    def succeeded(self) -> None:
        self.streak = 0

    def waiting(self, loop: asyncio.AbstractEventLoop, then: Callable[[], None]) -> bool:
        """True while backing off; ``then`` is called (once) when the wait is over."""
        if not self.streak or loop.time() >= self._until:
            return False
        if self._timer is None:
            self._timer = loop.call_at(self._until, self._over, then)
        return True

    def remaining(self, now: float) -> float:
        return max(0.0, self._until - now) if self.streak else 0.0

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _over(self, then: Callable[[], None]) -> None:
        self._timer = None
        then()
