"""A table sink task's writer: one write (one commit per table) in flight per task, while the
task goes on reading.

A task's ``put`` only buffers (``buffer.py``). The writer is one background coroutine per
incarnation (``SinkTaskContext.start_background``: the runtime cancels it, and the executor
write it holds is killed and reaped, before the incarnation counts as over). It takes the whole
buffer and writes and commits it as one batch when a write is due:

- ``flush.max.records`` records are buffered;
- the oldest buffered record has waited ``flush.interval.ms``;
- no record came for ``flush.linger.ms``: the task has read what there is (caught up), so what
  it holds is written now instead of at the end of the interval;
- the task asks (``drain``: a closing ``pre_commit``, a skip record to write after the data).

Writes and commits happen one at a time, in the order the records came: the table sees the
same sequence a task that wrote inside ``put`` would produce. While a write runs, the task keeps
reading and converting; what arrives meanwhile goes into the next write. So behind a backlog
each write holds what came during the one before, and writes grow until the buffer reaches
``buffer.max.records`` / ``buffer.max.bytes``, where ``put`` waits for the write in flight (the
bound on memory); once the task has caught up they shrink to what comes in a linger.

A failed write has been cleaned up by the table format (a staged write deleted, or what
landed read back); the writer keeps the failure, writes nothing more, and the task's next
``put``, ``pre_commit`` or ``drain`` raises it (``take_failure``), where the sink drops the
buffer and asks to re-read from the committed offsets. A failure is never swallowed, and
nothing is written past it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from daemon.connectors.protocols import SinkTaskContext
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.buffer import RecordBuffer

#: Writes and commits one batch; raises (after cleaning up what it can) when it failed.
WriteBatch = Callable[[pa.Table, tuple[OffsetRange, ...]], Awaitable[None]]


@dataclass(frozen=True)
class FlushPolicy:
    """When the writer writes (seconds; ``linger`` None: only by size and interval)."""

    max_records: int
    interval: float
    linger: float | None
    buffer_records: int  # put waits beyond this many buffered records ...
    buffer_bytes: int  # ... or bytes of buffered Arrow data

    def due_in(self, buffer: RecordBuffer, draining: bool) -> float | None:
        """Seconds until the buffer is due to be written (≤ 0: now; None: not until more comes)."""
        if not buffer.waiting:
            return None
        if draining or buffer.rows >= self.max_records:
            return 0.0
        due = self.interval - buffer.age
        if self.linger is not None:
            due = min(due, self.linger - buffer.idle)
        return due

    def full(self, buffer: RecordBuffer) -> bool:
        return buffer.rows >= self.buffer_records or buffer.nbytes >= self.buffer_bytes


class Writer:
    """The writer of one task; ``run`` is its coroutine (see the module docs)."""

    def __init__(self, buffer: RecordBuffer, policy: FlushPolicy, write: WriteBatch) -> None:
        self._buffer = buffer
        self._policy = policy
        self._write = write
        self._wake = asyncio.Event()  # for the writer: the buffer or a request changed
        self._changed = asyncio.Event()  # for waiters: a write ended, or the writer idles
        self._draining = 0
        self._failure: BaseException | None = None
        #: The ranges of the write in flight: the buffer continues after them.
        self.in_flight: tuple[OffsetRange, ...] = ()

    # ---- the task's side ----

    def poke(self) -> None:
        """The buffer changed: look again at whether a write is due."""
        self._wake.set()

    def take_failure(self) -> BaseException | None:
        """The failure of the last write, if one failed; the writer resumes afterwards."""
        failure, self._failure = self._failure, None
        if failure is not None:
            self._wake.set()
        return failure

    def raise_failure(
        self, committed: Mapping[TopicPartition, int], context: SinkTaskContext
    ) -> None:
        """Raise the failure of the last write, if one failed: first drop what is buffered and
        ask to re-read from ``committed`` (what a new incarnation does too, so no later batch
        can leave a gap)."""
        failure = self.take_failure()
        if failure is None:
            return
        self._buffer.clear()
        seeks = {tp: o for tp, o in committed.items() if tp in context.assignment()}
        if seeks:
            context.offset(seeks)
        raise failure

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def continues_after(self, committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Where each partition's next buffered record must start: after the write in flight,
        else after what is committed."""
        return {**committed, **{r.tp: r.end for r in self.in_flight}}

    async def make_room(self) -> None:
        """Wait while the buffer is full (the write in flight frees it); returns at once if not,
        or when a write failed (the caller raises the failure)."""
        while self._policy.full(self._buffer) and self._failure is None:
            self._wake.set()
            await self._next_change()

    async def drain(self) -> None:
        """Until everything buffered now is written and committed, or a write failed."""
        self._draining += 1
        try:
            while (self.in_flight or self._buffer.waiting) and self._failure is None:
                self._wake.set()
                await self._next_change()
        finally:
            self._draining -= 1

    async def quiet(self) -> None:
        """Until no write is in flight or due now (one that is due is started first)."""
        while self._failure is None:
            due = self._policy.due_in(self._buffer, self._draining > 0)
            if not self.in_flight and (due is None or due > 0):
                return
            self._wake.set()
            await self._next_change()

    async def settle(self) -> None:
        """Until no write is in flight (nothing new is started for it)."""
        while self.in_flight:
            await self._next_change()

    async def _next_change(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    # ---- the writer's coroutine ----

    async def run(self) -> None:
        while True:
            await self._until_due()
            table, ranges = self._buffer.take()
            if not ranges:  # only progress without offsets: nothing to commit
                self._announce()
                continue
            self.in_flight = ranges
            try:
                await self._write(table, ranges)
            except Exception as exc:
                self._failure = exc
                self._buffer.clear()  # continues after a write that never landed
            finally:
                self.in_flight = ()
                self._announce()

    async def _until_due(self) -> None:
        while True:
            delay = None
            if self._failure is None:
                delay = self._policy.due_in(self._buffer, self._draining > 0)
                if delay is not None and delay <= 0:
                    return
            self._wake.clear()
            self._announce()  # idle: a drain waiting for an empty buffer may look again
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _announce(self) -> None:
        self._changed.set()
