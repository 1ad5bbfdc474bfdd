"""Retries of a task's delivery steps: the rule (``RetryPolicy``) and what a retry does
(``Retrier``, the retry part an ``Incarnation`` holds).

The whole story, in the order it happens:

1. The main loop (``Incarnation._main_loop``) delivers a batch and, now and then, commits. A
   ``ConnectdError`` from either goes to ``Retrier.after``; a success to ``Retrier.succeeded``.
2. ``RetryPolicy.next_delay`` decides (``errors.retry.timeout``, ``errors.retry.delay.max.ms``;
   the rule is in its docstring; a sink's ``RetriableError`` is retried without a time budget,
   as Connect retries a ``RetriableException`` from ``put``). No retry — or a stop was asked —
   and the error fails the incarnation (the slot's restart policy takes over). While a retry
   is pending the task stays RUNNING and its status says why (``Retrier.state``).
3. A retry rewinds: the failed batch's partitions still owned are sought back to the batch's
   start (``PartitionProgress.rewind``), then the seeks the sink asked for are applied, and they
   win (ParquetSink asks to re-read from its committed offsets after a failed write).
4. The main loop waits the delay outside the lock (``Retrier.wait``; a stop cuts it short) and
   polls again. The re-read batch starts where the failed one did, so the dead-letter index
   sees a start it did not expect and reads the dead-letter topic again for those partitions
   (``ErrantRecords``; also when producing the dead letters itself failed, it forgets them): a
   retry never dead-letters a record twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from daemon.config import ConnectorConfig
from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import ConnectdError, RetriableError
from daemon.runtime.incarnation.progress import PartitionProgress
from daemon.runtime.model import Retrying

log = logging.getLogger("connectd.task")


class RetryPolicy:
    """``errors.retry.timeout`` / ``errors.retry.delay.max.ms`` for a task's delivery steps.

    What is retried: a *retriable* ``ConnectdError`` (``WriteTimeout``, ``ExecutorDied``,
    ``TaskTimeout``, ``DeadLetterQueueError``, ...) raised while delivering a batch (reading or
    producing the dead-letter topic, the sink's ``reject`` or ``put``) or by the periodic
    ``pre_commit``. Not retried: conversion (deterministic: the same bytes fail again), errors
    that are not retriable, anything during a stop. A retry re-reads the failed batch from Kafka
    (or from where the sink asked to seek), after a wait of 0.3 s doubling up to
    ``errors.retry.delay.max.ms``; the time budget, counted from the first failure, is
    ``errors.retry.timeout`` (0: no retry, the task fails at once; -1: no limit) and starts
    again after a step succeeds. Once spent, the error fails the task (and the restart policy
    takes over). ``clock`` is injectable for tests.

    A sink's own ``RetriableError`` (Connect's ``RetriableException``, from ``put`` or
    ``pre_commit``) is retried until it succeeds: no time budget, ``errors.retry.timeout``
    does not apply (Connect's rule for ``put``), and the wait is the one the sink asked with
    ``context.timeout(ms)`` when it did, else the same doubling.
    """

    FIRST_DELAY = 0.3

    def __init__(
        self,
        timeout: float | None,
        delay_max: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.delay_max = delay_max
        self.clock = clock
        self.attempts = 0
        self._first: float | None = None

    @classmethod
    def from_config(cls, config: ConnectorConfig) -> RetryPolicy:
        timeout = config.errors_retry_timeout
        return cls(
            None if timeout is None else timeout.total_seconds(),
            config.errors_retry_delay_max.total_seconds(),
        )

    def next_delay(self, exc: BaseException, asked: float | None = None) -> float | None:
        """Seconds to wait before retrying after ``exc``; ``None``: do not retry, fail.
        ``asked``: the wait the sink asked for (``context.timeout``), for its own
        ``RetriableError``."""
        if not (isinstance(exc, ConnectdError) and exc.retriable):
            return None
        now = self.clock()
        if self._first is None:
            self._first = now
        delay = min(self.FIRST_DELAY * float(1 << min(self.attempts, 30)), self.delay_max)
        if isinstance(exc, RetriableError):
            self.attempts += 1
            return delay if asked is None else asked
        left = None if self.timeout is None else self._first + self.timeout - now
        if left is not None and left <= 0:
            return None
        self.attempts += 1
        return delay if left is None else min(delay, left)

    def succeeded(self) -> None:
        self.attempts = 0
        self._first = None


class RetryHost(Protocol):
    """What the retry part needs from its incarnation (``Incarnation`` fits)."""

    @property
    def id(self) -> TaskId: ...

    @property
    def asked(self) -> bool:
        """The stop sequence asked the incarnation to stop: nothing is retried any more."""
        ...

    @property
    def progress(self) -> PartitionProgress: ...

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the sink has open."""
        ...

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next (the consumer's position and the progress)."""
        ...

    def apply_seeks(self) -> None:
        """Apply the seeks the sink asked for."""
        ...

    def take_retry_wait(self) -> float | None:
        """The wait the sink asked for its next retry (``context.timeout``), once."""
        ...


class Retrier:
    """The retry part of one incarnation (module docstring). Called from its main loop only,
    under its lock except for ``wait``."""

    def __init__(self, host: RetryHost, wake: asyncio.Event) -> None:
        """``wake``: set when the stop sequence asks (or the main loop must wake up)."""
        self.host = host
        self.policy = RetryPolicy(0.0, 0.0)  # no retries until configured (``configure``)
        self._wake = wake
        #: While a retry is pending (from the failure until a step succeeds): why, for the
        #: task's status.
        self.state: Retrying | None = None
        self._failed_step: str | None = None

    def configure(self, config: ConnectorConfig) -> None:
        self.policy = RetryPolicy.from_config(config)

    def succeeded(self, step: str) -> None:
        """``step`` (``deliver`` or ``commit``) succeeded: if it is the step that failed (or
        none did), the next failure starts a new time budget. The other step's success ends
        nothing: a periodic commit that works while every ``put`` fails is no recovery."""
        if self._failed_step in (None, step):
            self.policy.succeeded()
            self.state = None
            self._failed_step = None

    def after(self, exc: ConnectdError, step: str) -> float | None:
        """After ``exc`` failed ``step`` (``deliver`` or ``commit``): ``None`` if it fails the
        incarnation (the caller re-raises it); else the failed batch is rewound and this is how
        long to wait."""
        delay = self.policy.next_delay(exc, self.host.take_retry_wait())
        if delay is None or self.host.asked:
            return None
        self._failed_step = step
        self._rewind(exc, delay)
        text = str(exc).splitlines()[0] if str(exc) else ""
        now = time.time()
        self.state = Retrying(
            reason=f"{type(exc).__name__}: {text}",
            attempts=self.policy.attempts,
            since=self.state.since if self.state is not None else now,
            next_retry=now + delay,
        )
        return delay

    def _rewind(self, exc: ConnectdError, delay: float) -> None:
        """Read the failed batch again (or from where the sink asked to seek, which wins), once
        ``delay`` has passed."""
        host = self.host
        for tp, offset in host.progress.rewind(host.assignment()):
            host.seek(tp, offset)
        host.apply_seeks()
        rule = (
            "the sink's RetriableError: retried until it succeeds"
            if isinstance(exc, RetriableError)
            else "retriable; errors.retry.timeout"
        )
        log.warning(
            "Task %s: %s: %s (%s; retry %d in %.1f s)",
            host.id,
            type(exc).__name__,
            str(exc).splitlines()[0] if str(exc) else "",
            rule,
            self.policy.attempts,
            delay,
        )

    async def wait(self, delay: float) -> None:
        """Wait ``delay`` seconds, or less if the stop sequence asks."""
        try:
            async with asyncio.timeout(delay):
                await self._wake.wait()
        except TimeoutError:
            pass
