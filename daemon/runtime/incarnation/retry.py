"""Retries of a task's delivery steps: the rule (``RetryPolicy``) and what a retry does
(``Retrier``, the retry part an ``Incarnation`` holds).

The whole story, in the order it happens:

1. The main loop (``Incarnation._main_loop``) delivers a batch and, now and then, commits. A
   ``ConnectdError`` from either goes to ``Retrier.after``; a success to ``Retrier.succeeded``.
2. ``RetryPolicy.next_delay`` decides (``errors.retry.timeout``, ``errors.retry.delay.max.ms``;
   the rule is in its docstring). No retry — or a stop was asked — and the error fails the
   incarnation (the slot's restart policy takes over).
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
from daemon.errors import ConnectdError
from daemon.runtime.incarnation.progress import PartitionProgress

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

    def next_delay(self, exc: BaseException) -> float | None:
        """Seconds to wait before retrying after ``exc``; ``None``: do not retry, fail."""
        if not (isinstance(exc, ConnectdError) and exc.retriable):
            return None
        now = self.clock()
        if self._first is None:
            self._first = now
        left = None if self.timeout is None else self._first + self.timeout - now
        if left is not None and left <= 0:
            return None
        delay = min(self.FIRST_DELAY * float(1 << min(self.attempts, 30)), self.delay_max)
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


class Retrier:
    """The retry part of one incarnation (module docstring). Called from its main loop only,
    under its lock except for ``wait``."""

    def __init__(self, host: RetryHost, wake: asyncio.Event) -> None:
        """``wake``: set when the stop sequence asks (or the main loop must wake up)."""
        self.host = host
        self.policy = RetryPolicy(0.0, 0.0)  # no retries until configured (``configure``)
        self._wake = wake

    def configure(self, config: ConnectorConfig) -> None:
        self.policy = RetryPolicy.from_config(config)

    def succeeded(self) -> None:
        """A delivery step succeeded: the next failure starts a new time budget."""
        self.policy.succeeded()

    def after(self, exc: ConnectdError) -> float | None:
        """After ``exc`` failed a delivery step: ``None`` if it fails the incarnation (the caller
        re-raises it); else the failed batch is rewound and this is how long to wait."""
        delay = self.policy.next_delay(exc)
        if delay is None or self.host.asked:
            return None
        self._rewind(exc, delay)
        return delay

    def _rewind(self, exc: ConnectdError, delay: float) -> None:
        """Read the failed batch again (or from where the sink asked to seek, which wins), once
        ``delay`` has passed."""
        host = self.host
        for tp, offset in host.progress.rewind(host.assignment()):
            host.seek(tp, offset)
        host.apply_seeks()
        log.warning(
            "Task %s: %s: %s (retriable; retry %d in %.1f s, errors.retry.timeout)",
            host.id,
            type(exc).__name__,
            str(exc).splitlines()[0] if str(exc) else "",
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
