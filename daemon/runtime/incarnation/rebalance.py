"""How a task incarnation hears about rebalances: ``Rebalancer``, the rebalance part an
``Incarnation`` holds and hands to its consumer as the listener (``consumer.Partitions``).

aiokafka calls the listener from its coordinator task, not from the task's coroutine. So each
callback runs as a task of its own that ``cancel`` (from ``Incarnation.kill``) can cancel, takes
the incarnation's lock (one sink callback at a time: never concurrently with a ``put``), and
never raises into aiokafka: a failure is kept in ``failure`` and the main loop is woken, which
raises it and so fails the incarnation.

Revoked partitions get the closing ``pre_commit`` (``context.is_closing``), then ``close``, and
their positions are forgotten. Assigned partitions were paused by the consumer at once; new ones
get a fresh epoch and ``open`` (where an exactly-once sink seeks to its committed offsets), then
the seeks are applied and the partitions released. During ``open`` the sink may raise the epoch
above one its own store has seen (``context.raise_epoch``: the state directory that counts
epochs was lost or is another one); the new epoch is drawn from the same counter, with that
floor, so the counter catches up with the sink. Each callback bumps the rebalance generation
(``PartitionProgress``): records handed out before it are not delivered.

aiokafka sends no heartbeat while the assignment callback runs (it stops its heartbeat task
for the join and starts it again after the callback), so a callback that outlasts
``session.timeout.ms`` gets the member thrown out of the sink group and the whole group
rebalances again. An assignment waits for the lock (a ``put`` may hold it, itself waiting for
an executor to start), draws an epoch from Kafka and opens (an executor job for a Delta or
Iceberg table): each can take longer. So the callback returns to aiokafka after
``assign_budget`` seconds (a third of the session) whatever the assignment's state, and the
assignment goes on beside the task: its partitions stay held (nothing of them is fetched or
delivered) until it releases them, and the next callback (a revocation) waits for it on the
lock. Revocations are waited for in full: aiokafka keeps heartbeating during them.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.logs import set_task_context
from daemon.runtime.incarnation.context import TaskContext
from daemon.runtime.incarnation.deadlines import names
from daemon.runtime.incarnation.progress import PartitionProgress

log = logging.getLogger("connectd.task")


class RebalanceHost(Protocol):
    """What the rebalance part needs from its incarnation (``Incarnation`` fits)."""

    @property
    def id(self) -> TaskId: ...

    @property
    def asked(self) -> bool:
        """The stop sequence asked the incarnation to stop: rebalances change nothing more."""
        ...

    @property
    def context(self) -> TaskContext | None:
        """The sink's context (its assignment); ``None`` before the sink was started."""
        ...

    @property
    def progress(self) -> PartitionProgress: ...

    @property
    def lock(self) -> asyncio.Lock:
        """Held by whoever calls the sink: callbacks never overlap."""
        ...

    async def close_partitions(self, owned: frozenset[TopicPartition]) -> None:
        """The closing ``pre_commit`` of ``owned``, then the sink's ``close``."""
        ...

    async def open_partitions(self, new: frozenset[TopicPartition]) -> None:
        """The sink's ``open``."""
        ...

    def adopt_epoch(self, epoch: int) -> None:
        """From now on the incarnation (and its sink's writes) hold ``epoch``."""
        ...

    def release(self, partitions: frozenset[TopicPartition]) -> None:
        """Apply the sink's seeks, let the consumer fetch ``partitions`` (unless paused)."""
        ...


class Rebalancer:
    """The rebalance part of one incarnation (see the module docstring)."""

    def __init__(
        self,
        host: RebalanceHost,
        wake: asyncio.Event,
        draw_epoch: Callable[..., Awaitable[int]] | None,
        epoch_timeout: float,
        assign_budget: float = math.inf,
    ) -> None:
        """``wake``: set to wake the main loop after a failure. ``draw_epoch``: a fresh epoch
        from the connector's counter, drawn within ``epoch_timeout`` seconds; called with no
        argument, or with ``floor=n`` for one at least ``n`` (``context.raise_epoch``).
        ``assign_budget``: how long the assignment callback holds aiokafka up (see the module
        docstring)."""
        self.host = host
        self._task_id = host.id  # the callbacks' log context, kept should the host be freed
        self.draw_epoch = draw_epoch
        self.epoch_timeout = epoch_timeout
        self.assign_budget = assign_budget
        #: The first failure of a callback; the main loop raises it.
        self.failure: BaseException | None = None
        self._wake = wake
        self._running: set[asyncio.Task[None]] = set()

    async def partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        await asyncio.wait([self._side_call(self._revoke, partitions)])

    async def partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        task = self._side_call(self._assign, partitions)
        await asyncio.wait([task], timeout=self.assign_budget)
        if not task.done():
            log.info(
                "Task %s: the assignment of %s goes on beside the rebalance (after %.1f s;"
                " no heartbeat goes out while the callback runs); its partitions are held"
                " until it is done",
                self._task_id,
                names(partitions),
                self.assign_budget,
            )

    def cancel(self) -> None:
        """Cancel the callbacks in progress (the incarnation is being killed)."""
        for task in self._running:
            if not task.done():
                task.cancel()

    def _side_call(
        self,
        callback: Callable[[frozenset[TopicPartition]], Awaitable[None]],
        partitions: frozenset[TopicPartition],
    ) -> asyncio.Task[None]:
        """Run a listener callback as a task ``cancel`` can cancel; its failure never
        reaches aiokafka: it is kept in ``failure`` and wakes the main loop. The callback's
        coroutine is made in the task: a task cancelled before its first step (the
        incarnation killed in the same turn) leaves no coroutine behind never awaited."""
        task_id = self._task_id

        async def body() -> None:
            set_task_context(task_id.connector, task_id.task)
            await callback(partitions)

        task = asyncio.get_running_loop().create_task(body())
        self._running.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            if self.failure is None:
                self.failure = task.exception()
            self._wake.set()  # wake the main loop, which raises it

    async def _take_new_epoch(self) -> None:
        """Draw a fresh epoch before opening newly assigned partitions.

        A rebalance can hand a partition to a task whose incarnation started before the
        partition's last owner did; with its old epoch the sink's commit log would refuse it as
        a zombie. Drawing from the connector's counter here keeps DESIGN.md's rule: whoever owns
        a partition now holds a higher epoch than every earlier owner.
        """
        if self.draw_epoch is None or self.host.context is None:
            return
        async with asyncio.timeout(self.epoch_timeout):
            epoch = await self.draw_epoch()
        self.host.adopt_epoch(epoch)
        log.info("Task %s takes epoch %d for its new partitions", self._task_id, epoch)

    async def _raise_epoch(self, floor: int) -> int:
        """``context.raise_epoch`` during ``open``: an epoch ≥ ``floor`` from the connector's
        counter, adopted by the incarnation (and its sink's writes)."""
        context = self.host.context
        assert context is not None
        if self.draw_epoch is None:
            return context.epoch
        async with asyncio.timeout(self.epoch_timeout):
            epoch: int = await self.draw_epoch(floor=floor)
        self.host.adopt_epoch(epoch)
        log.info(
            "Task %s takes epoch %d: its sink has seen epoch %d of the connector (the state "
            "directory's counter was behind)",
            self._task_id,
            epoch,
            floor - 1,
        )
        return epoch

    async def _revoke(self, partitions: frozenset[TopicPartition]) -> None:
        host = self.host
        async with host.lock:
            context = host.context
            if host.asked or context is None:
                return
            host.progress.rebalanced()
            owned = partitions & context.assignment()
            if owned:
                log.info("Partitions revoked: %s", names(owned))
                await host.close_partitions(owned)
            context.set_assignment(context.assignment() - owned)
            host.progress.forget(owned)

    async def _assign(self, partitions: frozenset[TopicPartition]) -> None:
        host = self.host
        async with host.lock:
            context = host.context
            if host.asked or context is None:
                return
            host.progress.rebalanced()
            new = partitions - context.assignment()
            context.set_assignment(context.assignment() | partitions)
            if new:
                log.info("Partitions assigned: %s", names(new))
                await self._take_new_epoch()
                with context.opening(self._raise_epoch):
                    await host.open_partitions(new)
            host.release(partitions)
