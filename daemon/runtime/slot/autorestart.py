"""Automatic restarts of failed connectors and tasks (Strimzi's schedule, seeds/004).

The schedule. The first restart after a failure happens at once; restart ``n`` (``n`` restarts
done so far) waits ``n·(n+1)`` minutes since the previous one: 0, 2, 6, 12, 20, 30, 42, 56, then
60, 60, … (each wait capped at ``errors.restart.backoff.max.ms``, default one hour). After
``errors.restart.max`` restarts (default 7; -1: no limit) a failure is final: the status stays
FAILED and its trace says the restarts were exhausted and which REST call restarts it by hand.
The count starts again when an incarnation has run healthy for longer than the wait that would
come next (``n·(n+1)`` minutes, at most 60), or when an operator restarts it by hand.

What is retried: only failures a restart can help.

- A ``ConnectdError`` is retried when its ``retriable`` flag says so: an executor killed at its
  write deadline (``WriteTimeout``) or dead (``ExecutorDied``), a step past its deadline
  (``TaskTimeout``), an injected failure. A configuration error (``ConfigError``,
  ``InvalidConfig``), a missing connector class (``ConnectorNotFound``), a record that cannot be
  converted (``ConversionError``) or a refused commit (``CommitRejected``: a gap or an overlap,
  ``OffsetsDiverged``; a zombie's, ``ZombieEpoch``; a partition another connector owns,
  ``PartitionsOwned``) is never retried: the same configuration and the same data fail the same
  way. (An epoch that is behind because the state directory was lost is no refusal: the
  incarnation raises it while it opens its partitions.)
- An ``ImportError`` (a module or class the connector's code needs is missing) is never retried.
- Any other exception from a connector's own code (``OSError``, ``ConnectionError``, a client
  library's error, a bug) is retried, as Strimzi restarts any FAILED task: connectd cannot tell
  a network blip from a bug, and ``errors.restart.max`` bounds the cost of a bug.

Settings come from the worker (``errors.restart.*`` in the worker config, when it has them), a
connector's own keys override them. Time comes from a ``Clock`` (real time by default), so tests
run the whole schedule on a clock they move themselves (``tests/support/clocks.py``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from daemon.config import ConnectorConfig
from daemon.errors import ConnectdError
from daemon.runtime.model import AutoRestart, iso

log = logging.getLogger("connectd.restart")

MINUTE = 60.0
#: No wait of the schedule (nor the healthy period that resets the count) exceeds an hour.
LONGEST = 60 * MINUTE


def retriable(failure: BaseException) -> bool:
    """Whether a restart can help with ``failure`` (see the module docstring)."""
    if isinstance(failure, ConnectdError):
        return failure.retriable
    return not isinstance(failure, ImportError)


class Clock:
    """Real time: ``monotonic`` for intervals, ``wall`` (epoch seconds) for the status, and
    ``sleep``. The runtime takes one from its environment (``RuntimeEnv.clock``); tests pass one
    they move themselves."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


REAL_CLOCK = Clock()


class RestartSettings(Protocol):
    """``errors.restart.*`` as ``WorkerConfig`` (the defaults) and ``ConnectorConfig`` declare
    them."""

    @property
    def errors_restart_enabled(self) -> bool: ...

    @property
    def errors_restart_max(self) -> int | None: ...

    @property
    def errors_restart_backoff_max(self) -> datetime.timedelta: ...


@dataclass(frozen=True)
class RestartPolicy:
    """``errors.restart.*`` of one connector and its tasks; all durations in seconds."""

    enabled: bool = True
    max_restarts: int = 7  # -1: no limit
    backoff_max: float = LONGEST

    @classmethod
    def from_connector(cls, config: ConnectorConfig) -> RestartPolicy:
        return cls.from_configs(None, config)

    @classmethod
    def from_configs(
        cls,
        worker: RestartSettings | None,
        connector: ConnectorConfig,
        given: Collection[str] | None = None,
    ) -> RestartPolicy:
        """The worker's ``errors.restart.*`` with the keys the connector sets itself (``given``:
        the keys of its raw config; None: all) over them. No worker: the connector's values."""

        def source(key: str) -> RestartSettings:
            return connector if worker is None or given is None or key in given else worker

        max_restarts = source("errors.restart.max").errors_restart_max
        return cls(
            enabled=source("errors.restart.enabled").errors_restart_enabled,
            max_restarts=-1 if max_restarts is None else max_restarts,
            backoff_max=source(
                "errors.restart.backoff.max.ms"
            ).errors_restart_backoff_max.total_seconds(),
        )

    def exhausted(self, count: int) -> bool:
        return 0 <= self.max_restarts <= count

    def interval(self, count: int) -> float:
        """Seconds between restart ``count`` (after ``count`` restarts) and the previous one."""
        return min(count * (count + 1) * MINUTE, LONGEST, self.backoff_max)

    def healthy_after(self, count: int) -> float:
        """How long an incarnation must have run, after ``count`` restarts, for the count to
        start again: the wait that would come next (not shortened by the backoff cap, so a
        small cap does not make every short run reset the count)."""
        return min(count * (count + 1) * MINUTE, LONGEST)


class AutoRestarter:
    """The automatic restarts of one connector or task: the count, the times, the pending one.

    The owner calls ``running()`` when an incarnation is up, ``failed()`` when it failed on its
    own (which schedules ``action`` or gives up), ``cancel()`` when something else ends or
    restarts it, and ``begin()`` from ``action`` once it holds its own lock and still finds the
    failure it was scheduled for. ``action`` must restart through the owner's ordinary path (for
    a task: the stop sequence, then a new incarnation).
    """

    def __init__(self, what: str, manual: str, policy: RestartPolicy, clock: Clock) -> None:
        self.what = what  # "Task echo-0", "Connector echo"
        self.manual = manual  # the REST call that restarts it by hand
        self.policy = policy
        self.clock = clock
        self.count = 0
        self.last_wall: float | None = None
        self.next_wall: float | None = None
        #: Why a failure stays (exhausted, not retriable, disabled): appended to the trace.
        self.note: str | None = None
        self._last_mono: float | None = None
        self._healthy_from: float | None = None
        self._pending: asyncio.Task[None] | None = None
        self._sleeping = False

    def running(self) -> None:
        """An incarnation is up: a healthy period starts."""
        self._healthy_from = self.clock.monotonic()
        self.note = None

    def reset(self) -> None:
        """Start counting again (a restart by hand, a new configuration)."""
        self.cancel()
        self.count = 0
        self.last_wall = self._last_mono = None
        self.note = None

    def failed(self, failure: BaseException, action: Callable[[], Awaitable[None]]) -> bool:
        """Schedule ``action`` per the policy; False when no automatic restart will come."""
        self.cancel()
        now = self.clock.monotonic()
        healthy_from, self._healthy_from = self._healthy_from, None
        if self.count and healthy_from is not None:
            ran = now - healthy_from
            if ran > self.policy.healthy_after(self.count):
                log.info(
                    "%s had run healthy for %.0f s: its automatic restart count (%d) starts again",
                    self.what,
                    ran,
                    self.count,
                )
                self.count = 0
        cause = f"{type(failure).__name__}: {_first_line(failure)}"
        if not retriable(failure):
            because = getattr(failure, "not_retried_because", ConnectdError.not_retried_because)
            self.note = (
                f"{self.what} is not restarted automatically: {type(failure).__name__} is not"
                f" retriable ({because}). Fix the cause, then restart it by hand: {self.manual}"
            )
        elif not self.policy.enabled:
            self.note = (
                f"{self.what} is not restarted automatically (errors.restart.enabled=false);"
                f" restart it by hand: {self.manual}"
            )
        elif self.policy.exhausted(self.count):
            self.note = (
                f"Automatic restarts exhausted: {self.what} failed again after {self.count}"
                f" automatic restart(s) (errors.restart.max={self.policy.max_restarts}). Fix the"
                f" cause, then restart it by hand: {self.manual}"
            )
        if self.note is not None:
            log.error("%s failed (%s). %s", self.what, cause, self.note)
            return False
        delay = 0.0
        if self.count and self._last_mono is not None:
            delay = max(0.0, self._last_mono + self.policy.interval(self.count) - now)
        self.next_wall = self.clock.wall() + delay
        limit = "∞" if self.policy.max_restarts < 0 else str(self.policy.max_restarts)
        log.warning(
            "%s failed (%s); automatic restart %d of %s %s",
            self.what,
            cause,
            self.count + 1,
            limit,
            f"in {delay:.0f} s (at {iso(self.next_wall)})" if delay else "now",
        )
        self._sleeping = True
        self._pending = asyncio.get_running_loop().create_task(
            self._later(delay, action), name=f"auto-restart {self.what}"
        )
        return True

    async def _later(self, delay: float, action: Callable[[], Awaitable[None]]) -> None:
        if delay > 0:
            await self.clock.sleep(delay)
        self._sleeping = False
        await action()

    def begin(self) -> None:
        """``action`` is restarting it now: count it."""
        self.count += 1
        self.last_wall = self.clock.wall()
        self._last_mono = self.clock.monotonic()
        self.next_wall = None
        self.note = None
        log.warning(
            "%s: automatic restart %d (errors.restart.max=%d)",
            self.what,
            self.count,
            self.policy.max_restarts,
        )

    def cancel(self) -> None:
        """Drop a restart that is still waiting (one already restarting runs to its end: the
        owner's lock orders it with whatever called this)."""
        task = self._pending
        if task is not None and self._sleeping and not task.done():
            task.cancel()
        self._pending = None
        self._sleeping = False
        self.next_wall = None

    @property
    def pending(self) -> bool:
        return self._pending is not None and not self._pending.done()

    def status(self) -> AutoRestart:
        return AutoRestart(self.count, iso(self.last_wall), iso(self.next_wall))

    def annotate(self, trace: str | None) -> str | None:
        """The failure's trace with the reason it stays FAILED, if it does."""
        if self.note is None:
            return trace
        return f"{trace.rstrip()}\n\n{self.note}" if trace else self.note


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""
