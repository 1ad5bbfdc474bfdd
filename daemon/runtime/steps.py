"""The pieces of a task's step that need no task state: deadlines, offset ranges, retries.

Kept apart from ``task.py`` so the incarnation's control flow reads on one screen and these
rules can be tested on their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from daemon.config import ConnectorConfig, WorkerConfig
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import ConnectdError, TaskTimeout

log = logging.getLogger("connectd.task")
T = TypeVar("T")


class TaskMetrics(Protocol):
    """What the runtime records (``daemon.metrics.Metrics`` fits); calls never block."""

    def record_consumed(self, connector: str, task: int, count: int) -> None: ...

    def record_written(self, connector: str, task: int, count: int, seconds: float) -> None: ...

    def set_consumer_lags(
        self, connector: str, task: int, lags: Mapping[TopicPartition, int]
    ) -> None: ...

    def task_restarted(self, connector: str, task: int, cause: str) -> None: ...

    def executor_killed(self, reason: str) -> None: ...


@dataclass(frozen=True)
class TaskSettings:
    """Deadlines and pacing of a task, in seconds, from the worker config."""

    write_timeout: float = 60.0
    flush_interval: float = 10.0
    poll_timeout: float = 1.0

    @classmethod
    def from_worker(cls, worker: WorkerConfig) -> TaskSettings:
        return cls(
            write_timeout=worker.task_write_timeout.total_seconds(),
            flush_interval=worker.offset_flush_interval.total_seconds(),
            poll_timeout=min(1.0, max(0.05, worker.offset_flush_interval.total_seconds())),
        )

    @property
    def callback_timeout(self) -> float:
        """Deadline of one sink callback: room for two writes and a commit."""
        return 2 * self.write_timeout + 30.0


async def with_deadline(what: str, coro: Awaitable[T], timeout: float) -> T:
    """Await ``coro`` for at most ``timeout`` seconds; ``TaskTimeout`` naming ``what`` past it
    (a ``TimeoutError`` raised by ``coro`` itself passes through unchanged)."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await coro
    except TimeoutError:
        if not deadline.expired():
            raise
        raise TaskTimeout(
            f"{what} did not return within {timeout:g} s; it was cancelled (an executor write"
            " it waited for was killed). Raise task.write.timeout.ms if writes really take that"
            " long"
        ) from None


def offset_ranges(
    polled: Mapping[TopicPartition, Sequence[Any]], positions: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """The ranges one poll covers: from each partition's position before the poll (the offset
    after the last record delivered, or the seek target) to its last record + 1. Starting at the
    position, not at the first record, keeps consecutive ranges chained across offsets that hold
    no record (compaction, transaction markers)."""
    ranges = []
    for tp, records in polled.items():
        first, last = records[0].offset, records[-1].offset
        start = positions.get(tp, first)
        if start > first:  # never expected: aiokafka drops records fetched before a seek
            log.warning("%s: record %d comes before the position %d", tp, first, start)
            start = first
        ranges.append(OffsetRange(tp.topic, tp.partition, start, last + 1))
    return ranges


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


def names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(tps))


def task_converter_options(
    base: Mapping[str, str], task_config: Mapping[str, str], side: str
) -> dict[str, str]:
    """The converter options for one side, with the task configuration's ``<side>.converter.*``
    keys over the connector's: a connector may set them per task (ParquetSink maps its
    ``value.fields`` to ``value.converter.fields`` in ``task_configs``)."""
    prefix = f"{side}.converter."
    return {
        **base,
        **{k.removeprefix(prefix): v for k, v in task_config.items() if k.startswith(prefix)},
    }
