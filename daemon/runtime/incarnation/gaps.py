"""Offsets out of range: what a task does when the offset it resumes from is no longer in the
partition's log (``errors.offset.out.of.range``), the part an ``Incarnation`` holds as ``gaps``.

The consumer never resets a position on its own (``consumer.py``): a fetch at an offset the log
no longer has raises ``OutOfRange``, and the main loop hands the offsets here, under the
incarnation's lock, only if no rebalance callback ran since the fetch. For each partition still
assigned whose position is still that offset:

- below the log start (retention deleted records not consumed yet): ``fail`` (the default)
  fails the task with ``OffsetOutOfRange`` naming the partition, the offset and the log start;
  ``earliest`` tells the sink (``SinkTask.offsets_skipped(tp, start, end)``: ParquetSink writes
  what it buffered, then records the skip in its commit log), seeks to the log start, logs a
  warning naming how many offsets were skipped and counts them
  (``connectd_offsets_skipped_total``). Never silent.
- beyond the log end (the topic was recreated, or the log truncated): the task fails under
  either policy; reading from the log start would read offsets the sink already has.
- inside the log by now (the log start moved between the fetch and the look-up, a leader
  changed): nothing; the next fetch reads it.

The look-up of the log bounds (``BOUNDS_TIMEOUT`` an attempt) may fail (a broker that does
not answer ListOffsets, a leader moving). The position did not move, so the next fetch raises
the same ``OutOfRange`` at once and the look-up is tried again: not at once, but after a wait
(``RETRY_FIRST`` doubling up to ``RETRY_MAX``; a stop cuts it short), one warning per attempt.
A look-up that keeps failing for the same offsets for ``BOUNDS_DEADLINE`` fails the task with
``LogBoundsUnavailable`` (retriable: the restart policy takes over) instead of retrying
forever in silence. The wait runs under the incarnation's lock, like the look-up itself:
bounded by ``RETRY_MAX``, it delays a rebalance callback no longer than one slow look-up does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from daemon.config.connector import ConnectorConfig, OutOfRangePolicy
from daemon.connectors.api import SinkTask, TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import ConnectdError
from daemon.runtime.incarnation.consumer import TaskConsumer
from daemon.runtime.settings import TaskMetrics

log = logging.getLogger("connectd.task")

#: Looking up a partition's log start and end (two ListOffsets requests): one attempt.
BOUNDS_TIMEOUT = 30.0
#: The wait after a failed look-up: this, doubling after each failure up to ``RETRY_MAX``.
RETRY_FIRST = 0.5
RETRY_MAX = 5.0
#: How long the look-up may keep failing for the same offsets before the task fails.
BOUNDS_DEADLINE = 300.0


class OffsetOutOfRange(ConnectdError):
    """The offset a task resumes from is not in the partition's log: below its start
    (retention deleted records the sink had not written) under
    ``errors.offset.out.of.range=fail``, or beyond its end. Not retriable: the records do not
    come back; the message says what to change."""

    retriable = False


class LogBoundsUnavailable(ConnectdError):
    """Offsets are out of range and their partitions' log bounds could not be read for
    ``BOUNDS_DEADLINE``: what to do about them cannot be decided. Retriable: a new incarnation
    (the restart policy) tries again."""

    retriable = True


class GapHost(Protocol):
    """What the out-of-range part needs from its incarnation (``Incarnation`` fits)."""

    @property
    def id(self) -> TaskId: ...

    @property
    def consumer(self) -> TaskConsumer | None: ...

    @property
    def task(self) -> SinkTask | None: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next (the consumer's position and the progress)."""
        ...

    async def call(self, name: str, coro: Awaitable[None]) -> None:
        """A sink callback under its deadline."""
        ...


class OffsetGaps:
    """The out-of-range part of one incarnation (see the module docstring)."""

    def __init__(
        self,
        host: GapHost,
        metrics: TaskMetrics | None = None,
        *,
        wake: asyncio.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``wake``: set when the stop sequence asks (cuts a wait between look-ups short)."""
        self.host = host
        self.policy = OutOfRangePolicy.FAIL
        self._metrics = metrics
        self._wake = wake
        self._clock = clock
        # The failing look-ups of the same offsets: which, since when, how many.
        self._failing: frozenset[tuple[TopicPartition, int]] = frozenset()
        self._failing_since = 0.0
        self._failures = 0

    def configure(self, config: ConnectorConfig) -> None:
        self.policy = config.errors_offset_out_of_range

    async def handle(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Apply the policy to the partitions a fetch found out of range (module docstring)."""
        host, consumer = self.host, self.host.consumer
        if consumer is None:
            return
        owned = host.assignment()
        current = {
            tp: o
            for tp, o in offsets.items()
            if tp in owned and consumer.fetch_position(tp) == o  # not sought elsewhere since
        }
        if not current:
            return
        bounds = await self._bounds(consumer, current)
        if bounds is None:
            return
        for tp, offset in sorted(current.items()):
            start, end = bounds[tp]
            if offset > end:
                raise OffsetOutOfRange(
                    f"task {host.id}: partition {tp}: the committed offset {offset} is beyond"
                    f" the log end {end} (log start {start}): the topic was recreated or its"
                    " log truncated. Stop the connector and set the partition's offset with the"
                    " offsets API (PATCH /connectors/<name>/offsets)"
                )
            if offset >= start:
                continue  # in the log by now: the next fetch reads it
            if self.policy is OutOfRangePolicy.FAIL:
                raise OffsetOutOfRange(
                    f"task {host.id}: partition {tp}: the committed offset {offset} is below"
                    f" the log start {start}: {start - offset} offsets were deleted (retention)"
                    " before the sink wrote them (errors.offset.out.of.range=fail). To skip them"
                    " and continue from the log start, set errors.offset.out.of.range=earliest,"
                    " or set the partition's offset with the offsets API"
                )
            await self._skip(tp, offset, start)

    async def _bounds(
        self, consumer: TaskConsumer, current: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]] | None:
        """The log bounds of ``current``'s partitions; ``None`` after a failed attempt and the
        wait that follows it (module docstring)."""
        key = frozenset(current.items())
        if key != self._failing:  # new offsets: a new count
            self._failing, self._failing_since, self._failures = key, self._clock(), 0
        try:
            async with asyncio.timeout(BOUNDS_TIMEOUT):
                bounds = await consumer.log_bounds(current)
        except Exception as exc:  # the position did not move: the next fetch asks again
            self._failures += 1
            failing = self._clock() - self._failing_since
            cause = f"{type(exc).__name__}: {exc}"
            if failing >= BOUNDS_DEADLINE:
                self._failing = frozenset()
                raise LogBoundsUnavailable(
                    f"task {self.host.id}: offsets {_names(current)} are out of range, and"
                    f" their log bounds could not be read in {self._failures} attempts over"
                    f" {failing:.0f} s: {cause}. Check that the partitions' leaders are"
                    " available and answer ListOffsets"
                ) from exc
            delay = min(RETRY_FIRST * 2.0 ** min(self._failures - 1, 30), RETRY_MAX)
            log.warning(
                "Task %s: offsets %s are out of range, and their log bounds could not be read:"
                " %s (attempt %d; again in %.1f s)",
                *(self.host.id, _names(current), cause, self._failures, delay),
            )
            await self._wait(delay)
            return None
        self._failing = frozenset()
        return bounds

    async def _wait(self, delay: float) -> None:
        if self._wake is None:
            await asyncio.sleep(delay)
            return
        try:
            async with asyncio.timeout(delay):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _skip(self, tp: TopicPartition, start: int, end: int) -> None:
        host = self.host
        if host.task is not None:
            # First: if the sink cannot record the gap, nothing moved and the task fails.
            await host.call("offsets_skipped", host.task.offsets_skipped(tp, start, end))
        host.seek(tp, end)
        log.warning(
            "Task %s: partition %s: offsets %d..%d are no longer in the log (retention deleted"
            " them before they were consumed): %d offsets skipped, continuing from the log start"
            " %d (errors.offset.out.of.range=earliest)",
            *(host.id, tp, start, end - 1, end - start, end),
        )
        if self._metrics is not None:
            self._metrics.record_offsets_skipped(host.id.connector, host.id.task, tp, end - start)


def _names(offsets: Mapping[TopicPartition, int]) -> str:
    return ", ".join(f"{tp}@{o}" for tp, o in sorted(offsets.items()))
