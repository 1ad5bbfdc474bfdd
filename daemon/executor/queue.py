"""Which write gets an executor, and when: the writes waiting for one, in order.

``ExecutorQueue`` hands idle executors (``Supervisor.take_idle``: the one that wrote last first)
to the writes that wait, first come first served, at most ``size`` at once (the spares stay
out of the count: a spare replaces a killed executor without a JVM start, it does not add a
concurrent write). A write that waits past its deadline gets ``ExecutorUnavailable`` naming
what the pool was doing; a write that gave up in the instant an executor was handed to it gives
the executor back. Everything runs on the pool's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from daemon.errors import ExecutorUnavailable, PoolClosed
from daemon.executor.handle import ExecutorProcess
from daemon.executor.supervisor import Supervisor


class ExecutorQueue:
    """Executors for writes, at most ``size`` leased at once (see the module docstring)."""

    def __init__(self, sup: Supervisor, size: int, busy: Callable[[], str]) -> None:
        self._sup = sup
        self._size = size
        self._busy = busy  # what the pool is doing, for the error of a write that waited
        self._waiters: deque[asyncio.Future[ExecutorProcess]] = deque()
        self._leased = 0

    async def acquire(self, deadline: float, task_id: str) -> ExecutorProcess:
        """An executor leased to ``task_id``'s write; ``ExecutorUnavailable`` past
        ``deadline`` (the loop's time)."""
        ex = self._take()
        if ex is not None:
            return ex
        waiter: asyncio.Future[ExecutorProcess] = self._sup.running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                return await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed over in the same instant the wait was abandoned: give it back.
                self.release()
                self.make_idle(waiter.result())
            if isinstance(exc, TimeoutError):
                raise ExecutorUnavailable(
                    f"task {task_id}: no executor became free in time ({self._busy()})"
                ) from None
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def release(self) -> None:
        """A leased write is over (done, failed, or its executor is being killed): its place
        goes to the next write waiting."""
        self._leased -= 1
        self.dispatch()

    def make_idle(self, ex: ExecutorProcess) -> None:
        """``ex`` finished its write and takes the next one."""
        ex.task_id, ex.seq = None, None
        self._sup.make_idle(ex)
        self.dispatch()

    def dispatch(self) -> None:
        """Hand idle executors to the writes waiting, in order (an executor became ready or
        idle, or a place came free)."""
        while self._waiters:
            waiter = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
                continue
            ex = self._take()
            if ex is None:
                return
            self._waiters.popleft()
            waiter.set_result(ex)

    def close(self) -> None:
        """Every write still waiting gets ``PoolClosed``."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(PoolClosed("the executor pool is shutting down"))
        self._waiters.clear()

    def _take(self) -> ExecutorProcess | None:
        if self._sup.closed or self._leased >= self._size:
            return None
        ex = self._sup.take_idle()
        if ex is not None:
            ex.seq = None
            self._leased += 1
        return ex
