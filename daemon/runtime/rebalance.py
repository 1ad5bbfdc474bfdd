"""How a task incarnation hears about rebalances (a part of ``Incarnation``, kept apart).

aiokafka calls its rebalance listener from its coordinator task, not from the task's coroutine.
So each callback runs as a task of its own that ``Incarnation.kill`` can cancel, takes the
incarnation's lock (one sink callback at a time: never concurrently with a ``put``), and never
raises into aiokafka (a failure is handed to the main loop, which fails the incarnation).

Revoked partitions get the closing ``pre_commit`` (``context.is_closing``), then ``close``.
Assigned partitions were paused by the consumer at once; they get ``open`` (where an
exactly-once sink seeks to its committed offsets), the seeks are applied, then they are
released. Each callback bumps the rebalance generation: records handed out before it are not
delivered (see ``Incarnation._main_loop``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from daemon.connectors.api import SinkTask, TaskContext, TaskId
from daemon.connectors.records import TopicPartition
from daemon.logs import set_task_context
from daemon.runtime.consumer import TaskConsumer
from daemon.runtime.steps import names

log = logging.getLogger("connectd.task")
T = TypeVar("T")


class Rebalancing:
    """The rebalance half of ``Incarnation`` (which provides the state and helpers below)."""

    id: TaskId
    epoch: int
    draw_epoch: Callable[[], Awaitable[int]] | None
    task: SinkTask | None
    context: TaskContext | None
    consumer: TaskConsumer | None
    topics: set[str]
    _lock: asyncio.Lock
    _stopping: bool
    _stop_event: asyncio.Event
    _generation: int
    _next: dict[TopicPartition, int]
    _side: set[asyncio.Task[None]]
    _side_failure: BaseException | None

    async def _commit(
        self, *, closing: bool, partitions: frozenset[TopicPartition] | None = None
    ) -> None:
        raise NotImplementedError

    async def _call(self, name: str, coro: Awaitable[T]) -> T:
        raise NotImplementedError

    def _apply_seeks(self) -> None:
        raise NotImplementedError

    def _apply_pause(self) -> None:
        raise NotImplementedError

    async def partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        await self._side_call(self._revoke(partitions))

    async def partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        await self._side_call(self._assign(partitions))

    async def _side_call(self, work: Awaitable[None]) -> None:
        """Run a listener callback as a task ``kill`` can cancel; never raise into aiokafka."""

        async def body() -> None:
            set_task_context(self.id.connector, self.id.task)
            await work

        task = asyncio.get_running_loop().create_task(body())
        self._side.add(task)
        try:
            await asyncio.wait([task])
        finally:
            self._side.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            assert exc is not None
            self._side_failure = exc
            self._stop_event.set()  # wake the main loop, which raises it

    async def _take_new_epoch(self) -> None:
        """Draw a fresh epoch before opening newly assigned partitions.

        A rebalance can hand a partition to a task whose incarnation started before the
        partition's last owner did; with its old epoch the sink's commit log would refuse it as
        a zombie. Drawing from the connector's counter here keeps DESIGN.md's rule: whoever owns
        a partition now holds a higher epoch than every earlier owner.
        """
        if self.draw_epoch is None or self.context is None:
            return
        async with asyncio.timeout(30.0):
            epoch = await self.draw_epoch()
        self.epoch = epoch
        self.context.set_epoch(epoch)
        log.info("Task %s takes epoch %d for its new partitions", self.id, epoch)

    async def _revoke(self, partitions: frozenset[TopicPartition]) -> None:
        async with self._lock:
            if self._stopping or self.context is None:
                return
            self._generation += 1
            owned = partitions & self.context.assignment()
            if owned:
                log.info("Partitions revoked: %s", names(owned))
                await self._commit(closing=True, partitions=owned)
                assert self.task is not None
                await self._call("close", self.task.close(owned))
            self.context.set_assignment(self.context.assignment() - owned)
            for tp in owned:
                self._next.pop(tp, None)

    async def _assign(self, partitions: frozenset[TopicPartition]) -> None:
        async with self._lock:
            if self._stopping or self.context is None or self.consumer is None:
                return
            self._generation += 1
            new = partitions - self.context.assignment()
            self.context.set_assignment(self.context.assignment() | partitions)
            if new:
                log.info("Partitions assigned: %s", names(new))
                await self._take_new_epoch()
                assert self.task is not None
                await self._call("open", self.task.open(new))
            self._apply_seeks()
            self.topics.update(tp.topic for tp in partitions)
            self.consumer.release(partitions)
            self._apply_pause()
