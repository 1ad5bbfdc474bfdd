"""A submitted write: the hand-off object that says who accepted it, when, and how it ended.

``ExecutorPool.submit`` returns a ``WriteLease`` at once; the write runs in a task of the pool's
event loop whether or not anybody awaits it::

    lease = pool.submit("conn-0", "pkg.mod:write", table, timeout=60.0)
    acceptance = await lease.accepted()     # Acceptance(executor=3, pid=4242, at=...)
    result = await lease.result()           # or simply: await lease

Guarantees:

* ``accepted()`` resolves once an executor has acknowledged the write (its deadline starts then),
  with that executor's id and pid and the ``time.monotonic()`` of the acknowledgement; if the
  write ends before that (no executor free in time, the pool closed, a cancellation), it raises
  what ended the write.
* ``result()`` returns the write function's value or raises what the pool's ``run`` documents.
  If the coroutine awaiting ``result()`` is cancelled, the write is cancelled, and ``result()``
  re-raises only once the write's executor tree was killed and reaped (unless cancelled again).
* ``killed`` is True once the pool started to kill the executor that held this write (deadline,
  cancellation, no acknowledgement, a broken session); the kill is always finished before the
  write's task ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from daemon.executor import protocol


@dataclass(frozen=True)
class Acceptance:
    """Which executor acknowledged a write, and when (``time.monotonic()``)."""

    executor: int
    pid: int
    at: float


class WriteLease:
    """One write handed to the executor pool; see the module docstring for the guarantees."""

    def __init__(self, task_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.task_id = task_id
        self.killed = False
        self._accepted: asyncio.Future[Acceptance] = loop.create_future()
        self._accepted.add_done_callback(_consume)
        self._task: asyncio.Task[Any] | None = None

    # -- the submitter's side ------------------------------------------------------------------

    @property
    def acceptance(self) -> Acceptance | None:
        """The acknowledgement, once there is one."""
        fut = self._accepted
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            return fut.result()
        return None

    async def accepted(self) -> Acceptance:
        """Wait for an executor to acknowledge the write (see the module docstring)."""
        if not self._accepted.done():
            await asyncio.wait(
                [self._accepted, self._running()], return_when=asyncio.FIRST_COMPLETED
            )
        if self._accepted.done():
            return self._accepted.result()
        await self._running()  # ended before acceptance: raises what ended it
        raise RuntimeError(f"task {self.task_id}: the write ended without being accepted")

    async def result(self) -> Any:
        """The write's value; cancelling this await cancels the write (see the module
        docstring)."""
        task = self._running()
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                task.cancel()
                await asyncio.wait([task])  # the kill and the reap; a second cancel ends it
            raise

    def __await__(self) -> Generator[Any, None, Any]:
        return self.result().__await__()

    def cancel(self) -> None:
        """Cancel the write: its executor, if one holds it, is killed and reaped."""
        self._running().cancel()

    def done(self) -> bool:
        return self._task is not None and self._task.done()

    # -- the pool's side -----------------------------------------------------------------------

    def start(self, write: Coroutine[Any, Any, Any]) -> None:
        """Run ``write`` (the pool's coroutine for this write) as the lease's task."""
        self._task = asyncio.get_running_loop().create_task(write)
        self._task.add_done_callback(self._ended)

    def accept(self, executor: int, pid: int, at: float) -> None:
        if not self._accepted.done():
            self._accepted.set_result(Acceptance(executor, pid, at))

    def _running(self) -> asyncio.Task[Any]:
        if self._task is None:
            raise RuntimeError(f"task {self.task_id}: the write was not started")
        return self._task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        _consume(task)
        if self._accepted.done():
            return
        if task.cancelled():
            self._accepted.cancel()
        else:
            self._accepted.set_exception(
                task.exception()
                or RuntimeError(f"task {self.task_id}: the write ended without being accepted")
            )


class WriteSignals:
    """The executor's answers to one write, fed by the pool from the executor's messages."""

    def __init__(self, seq: int, loop: asyncio.AbstractEventLoop) -> None:
        self.seq = seq
        self.acknowledged: asyncio.Future[None] = loop.create_future()
        self.outcome: asyncio.Future[protocol.Done | protocol.Failed] = loop.create_future()
        for fut in (self.acknowledged, self.outcome):
            fut.add_done_callback(_consume)

    def feed(self, msg: protocol.Message) -> None:
        ack, outcome = self.acknowledged, self.outcome
        match msg:
            case protocol.Accepted(seq=seq) if seq == self.seq and not ack.done():
                ack.set_result(None)
            case protocol.Done(seq=seq) | protocol.Failed(seq=seq) if (
                seq == self.seq and not outcome.done()
            ):
                outcome.set_result(msg)

    def fail(self, error: BaseException) -> None:
        for fut in (self.acknowledged, self.outcome):
            if not fut.done():
                fut.set_exception(error)


def _consume(fut: asyncio.Future[Any]) -> None:
    # Nobody may be waiting any more (a cancelled run): mark the exception retrieved.
    if not fut.cancelled():
        fut.exception()
