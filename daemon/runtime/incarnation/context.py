"""The runtime's ``SinkTaskContext``: what a task's requests (seeks, pauses, commits) become.

A task calls the connector-facing half (``daemon.connectors.protocols.SinkTaskContext``); the
incarnation that owns the context reads and resets the requests through the runtime half
after each callback returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, overload

import pyarrow as pa

from daemon.connectors.protocols import ExecutorRunner
from daemon.structs import TaskId, TopicPartition

log = logging.getLogger("connectd.task")
#: Reads what the consumer group committed for some partitions (``TaskConsumer.committed_offsets``).
GroupReader = Callable[[Collection[TopicPartition]], Awaitable[Mapping[TopicPartition, int]]]


class TaskContext:
    """The runtime's ``SinkTaskContext``. Methods below the line are for the runtime only."""

    def __init__(
        self, task_id: TaskId, epoch: int, config: Mapping[str, str], runner: ExecutorRunner
    ) -> None:
        self._task_id = task_id
        self._epoch = epoch
        self._config = dict(config)
        self._runner = runner
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._paused: set[TopicPartition] = set()
        self._seeks: dict[TopicPartition, int] = {}
        self._commit_requested = False
        self._closing = False
        #: While ``open`` runs (``opening``): draws an epoch ≥ its argument and adopts it.
        self._raiser: Callable[[int], Awaitable[int]] | None = None
        self._background: set[asyncio.Task[None]] = set()
        #: Reads the consumer group's committed offsets (the task's consumer, once it exists).
        self._group_reader: GroupReader | None = None
        #: ``timeout(ms)``: the wait before the next retry, in seconds (taken once).
        self._retry_wait: float | None = None

    @property
    def task_id(self) -> TaskId:
        return self._task_id

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def config(self) -> Mapping[str, str]:
        return self._config

    @property
    def is_closing(self) -> bool:
        return self._closing

    @overload
    def offset(self, tp: TopicPartition, offset: int, /) -> None: ...
    @overload
    def offset(self, offsets: Mapping[TopicPartition, int], /) -> None: ...
    def offset(self, *args: Any) -> None:
        if len(args) == 2:
            requests = {args[0]: args[1]}
        elif len(args) == 1 and isinstance(args[0], Mapping):
            requests = dict(args[0])
        else:
            raise TypeError("offset() takes (tp, offset) or ({tp: offset, ...})")
        for tp, off in requests.items():
            if not isinstance(tp, TopicPartition) or not isinstance(off, int) or off < 0:
                raise ValueError(
                    f"cannot seek {tp!r} to {off!r}: need a TopicPartition and an offset ≥ 0"
                )
        self._seeks.update(requests)

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused.update(self._assigned(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused.difference_update(self._assigned(partitions))

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(self._paused)

    def assignment(self) -> frozenset[TopicPartition]:
        return self._assignment

    async def raise_epoch(self, *, above: int) -> int:
        if self._epoch > above or self._raiser is None:
            return self._epoch
        return await self._raiser(above + 1)

    def request_commit(self) -> None:
        self._commit_requested = True

    def timeout(self, ms: int, /) -> None:
        if isinstance(ms, bool) or not isinstance(ms, int):
            raise TypeError(f"timeout() takes milliseconds as an int, not {ms!r}")
        self._retry_wait = ms / 1000 if ms >= 0 else None

    async def group_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        if self._group_reader is None or not partitions:
            return {}
        return await self._group_reader(partitions)

    async def run_in_executor(
        self,
        fn: str,
        batch: pa.Table | None,
        *,
        timeout: float,
        formats: Collection[str] = (),
        spark: bool = True,
        **kwargs: Any,
    ) -> Any:
        run = self._runner.run_in_executor
        # Each only when it says something: a runner written before ``formats`` or ``spark``
        # would pass it on to fn.
        if formats:
            kwargs["formats"] = tuple(formats)
        if not spark:
            kwargs["spark"] = False
        return await run(fn, batch, timeout=timeout, **kwargs)

    def start_background(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self._task_id} {name}")
        self._background.add(task)
        return task

    def _assigned(self, partitions: Collection[TopicPartition]) -> Collection[TopicPartition]:
        stray = set(partitions) - self._assignment
        if stray:
            names = ", ".join(sorted(map(str, stray)))
            raise ValueError(f"{names} not assigned to task {self._task_id}")
        return partitions

    # ---- runtime side ----

    def set_group_reader(self, reader: GroupReader) -> None:
        """How ``group_offsets`` reads the consumer group's committed offsets."""
        self._group_reader = reader

    def set_epoch(self, epoch: int) -> None:
        """A newer epoch for this incarnation, drawn when it takes over partitions: whoever owns
        a partition now holds a higher epoch than every earlier owner (the commit log fences on
        it), also when a rebalance moves a partition to a task that started earlier."""
        if epoch < self._epoch:
            raise ValueError(f"task {self._task_id}: epoch {epoch} is older than {self._epoch}")
        self._epoch = epoch

    def set_assignment(self, partitions: Collection[TopicPartition]) -> None:
        """The runtime's new assignment; pauses and pending seeks of lost partitions are dropped."""
        self._assignment = frozenset(partitions)
        self._paused &= self._assignment
        self._seeks = {tp: o for tp, o in self._seeks.items() if tp in self._assignment}

    @contextmanager
    def opening(self, raiser: Callable[[int], Awaitable[int]] | None) -> Iterator[None]:
        """Wrap the ``open`` call: inside, ``raise_epoch`` may take a newer epoch through
        ``raiser(floor)`` (draw one ≥ ``floor``, adopt it, return it). Only the opening path
        raises an epoch; anywhere else an older epoch stays older, and is fenced out."""
        self._raiser = raiser
        try:
            yield
        finally:
            self._raiser = None

    @contextmanager
    def closing(self) -> Iterator[None]:
        """Wrap the ``pre_commit`` call that precedes a close: ``is_closing`` is true inside."""
        self._closing = True
        try:
            yield
        finally:
            self._closing = False

    def take_seeks(self) -> dict[TopicPartition, int]:
        """The seeks requested since the last call (assigned partitions only), cleared."""
        seeks = {tp: o for tp, o in self._seeks.items() if tp in self._assignment}
        self._seeks.clear()
        return seeks

    async def end_background(self) -> None:
        """Cancel what ``start_background`` runs and wait until it has ended (a write it held
        is killed and reaped by then: cancelling an executor call does that before it returns)."""
        tasks, self._background = self._background, set()
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                # Cancelled while waiting (a kill during a graceful end): the task is cancelled
                # already; its end is still waited for, so no write outlives the incarnation.
                await asyncio.wait([task])
                raise
            if not task.cancelled() and task.exception() is not None:
                log.warning(
                    "Task %s: %s failed: %r", self._task_id, task.get_name(), task.exception()
                )

    def take_retry_wait(self) -> float | None:
        """The wait the sink asked for its next retry (``timeout``), once."""
        wait, self._retry_wait = self._retry_wait, None
        return wait

    def take_commit_request(self) -> bool:
        requested, self._commit_requested = self._commit_requested, False
        return requested
