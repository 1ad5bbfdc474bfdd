"""How a task incarnation retries and records its dead-letter bound (a part of ``Incarnation``,
kept apart like ``rebalance.py``).

``errors.retry.timeout`` (``steps.RetryPolicy`` has the rule): after a retriable failure of a
delivery step the incarnation seeks the failed batch's partitions back to the batch's start —
then applies the seeks the sink asked for, which win (ParquetSink asks to re-read from its
committed offsets after a failed write) — waits, and polls again; the dead-letter index reads
the topic again for those partitions, so a retry never dead-letters a record twice.

The consumer-group commit carries, with a dead-letter topic, each partition's dead-letter bound
as the offset's metadata (``deadletter/index.py``, point 3).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from daemon.connectors.api import TaskContext, TaskId
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import ConnectdError
from daemon.runtime.consumer import TaskConsumer
from daemon.runtime.deadletter.policy import ErrantRecords
from daemon.runtime.steps import RetryPolicy

log = logging.getLogger("connectd.task")


class Retrying:
    """The retry half of ``Incarnation`` (which provides the state below)."""

    id: TaskId
    context: TaskContext | None
    consumer: TaskConsumer | None
    _stop_event: asyncio.Event
    _next: dict[TopicPartition, int]
    _errant: ErrantRecords | None
    _retry: RetryPolicy
    _delivering: list[OffsetRange]

    def _apply_seeks(self) -> None:
        raise NotImplementedError

    async def _group_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """With a dead-letter topic, each offset carries its dead-letter bound (see
        ``deadletter.index``)."""
        assert self.consumer is not None
        bounds = self._errant.metadata(offsets) if self._errant is not None else None
        await self.consumer.commit(offsets, bounds)

    def _rewind(self, exc: ConnectdError, delay: float) -> None:
        """After a retriable failure: read the failed batch again (or from where the sink
        asked to seek, which wins), once ``delay`` has passed."""
        assert self.consumer is not None and self.context is not None
        for r in self._delivering:
            if r.tp in self.context.assignment():
                self.consumer.seek(r.tp, r.start)
                self._next[r.tp] = r.start
        self._delivering = []
        self._apply_seeks()
        log.warning(
            "Task %s: %s: %s (retriable; retry %d in %.1f s, errors.retry.timeout)",
            self.id,
            type(exc).__name__,
            str(exc).splitlines()[0] if str(exc) else "",
            self._retry.attempts,
            delay,
        )

    async def _pause_for(self, delay: float) -> None:
        """Wait ``delay`` seconds, or less if the stop sequence asks."""
        try:
            async with asyncio.timeout(delay):
                await self._stop_event.wait()
        except TimeoutError:
            pass
