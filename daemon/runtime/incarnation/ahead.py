"""The next poll, made while the current one is delivered.

A task's loop used to run its steps one after another: poll, convert (in a thread, the loop
waiting), ``reject``, ``put``, commit, then the next poll. ``PollAhead`` lets the incarnation
start poll N+1 and its conversion as soon as poll N's conversion is done, so they overlap the
sink's work on poll N (``reject``, ``put``, a commit's executor write): the loop fetches while
the conversion thread converts, and Arrow's parse runs beside the loop.

It guarantees:

- at most one poll ahead at a time, and the next poll is the one made ahead (never two
  ``getmany`` at once); conversions still run one at a time, in the pipeline's one thread;
- records polled ahead reach ``put`` only under the conditions every poll's do (their
  rebalance generation is current, the connector is not paused) and only if nothing moved the
  consumer or changed what is paused since the poll began: a seek (the sink's, a retry's
  rewind, an offset gap's) or a partition the sink paused or resumed makes the poll *stale*.
  A stale poll's records are given back: each partition it handed records out of is sought to
  where delivery continues (``PartitionProgress.refetch``: a seek made since the poll began
  set that, so it wins), and fetched again by the next poll;
- a conversion that fails ahead is not a failure there: the records are converted again at
  delivery, after the delivery's ranges are remembered, where a failure is retried or fails
  the incarnation as it always did;
- a poll ahead that did not return within its bound (a rebalance waiting for the lock the
  delivery holds) is made again, with its own bound, when its turn comes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from daemon.connectors.records import TopicPartition
from daemon.runtime.incarnation.pipeline import Converted

log = logging.getLogger("connectd.task")

#: A poll: its rebalance generation, its records, the offsets it found out of range.
Fetched = tuple[int, dict[TopicPartition, list[Any]], dict[TopicPartition, int]]


@dataclass
class Ahead:
    """A poll made ahead, once done. ``fetched`` is ``None`` when it has to be made again (its
    bound passed); ``converted`` when its records were not converted ahead."""

    fetched: Fetched | None
    converted: Converted | None
    #: The partitions the sink had paused when the poll began.
    paused: frozenset[TopicPartition]
    #: The partitions sought since the poll began.
    sought: set[TopicPartition] = field(default_factory=set)

    def stale(self, paused: frozenset[TopicPartition]) -> bool:
        """Something moved the consumer, or changed what is paused, since the poll began."""
        return bool(self.sought) or paused != self.paused


class PollAhead:
    """One incarnation's poll ahead (see the module docstring)."""

    def __init__(self) -> None:
        self._task: asyncio.Task[tuple[Fetched | None, Converted | None]] | None = None
        self._ahead: Ahead | None = None

    @property
    def pending(self) -> bool:
        return self._task is not None

    def begin(
        self,
        job: Coroutine[Any, Any, tuple[Fetched | None, Converted | None]],
        paused: frozenset[TopicPartition],
        name: str,
    ) -> None:
        """Run ``job`` (poll, then convert) as the next poll."""
        assert self._task is None, "one poll ahead at a time"
        self._ahead = Ahead(None, None, paused)
        self._task = asyncio.get_running_loop().create_task(job, name=name)

    def sought(self, tp: TopicPartition) -> None:
        """A seek was made on ``tp``: a poll ahead in flight is stale."""
        if self._ahead is not None:
            self._ahead.sought.add(tp)

    async def take(self) -> Ahead | None:
        """The poll ahead once it is done, or ``None`` if none was begun. What its poll raised
        is raised here, at the turn it would have been raised without a poll ahead."""
        task, ahead = self._task, self._ahead
        if task is None or ahead is None:
            return None
        try:
            ahead.fetched, ahead.converted = await asyncio.shield(task)
        finally:
            if task.done():
                self._task = self._ahead = None
        return ahead

    async def drop(self) -> None:
        """Cancel a poll ahead (the task ends: its records are not delivered, and the consumer
        that handed them out is closed or told where to go next by the caller)."""
        task, self._task, self._ahead = self._task, None, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            log.debug("A poll ahead ended with %r", task.exception())
