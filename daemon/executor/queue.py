"""Which write gets an executor, and when: the writes waiting for one, in order.

``ExecutorQueue`` hands idle executors (``Supervisor.take_idle``: the one that wrote last first)
to the writes that wait, first come first served, with two bounds:

* at most ``size`` writes hold a place at once (the spares stay out of the count: a spare
  replaces a killed executor without a JVM start, it does not add a concurrent write);
* a connector's writes hold at most ``limit`` executors at once (its ``executor.writes.max``;
  by default ``size``), counting the ones that stepped aside below: a waiting write whose
  connector is at its limit lets the writes behind it go first.

A write that runs past ``overdue`` seconds on its executor while another connector's write
waits **steps aside** (``step_aside``): it keeps its executor and its deadline but no longer
holds one of the ``size`` places, so the waiting write takes an idle executor (the spare) at
once and the pool starts one more in its place (``aside`` tells the supervisor how many). A
hung connector thus holds its own executors until its deadline kills them, never the other
connectors' writes. A write that waits past its deadline gets ``ExecutorUnavailable`` naming
what the pool was doing; a write that gave up in the instant an executor was handed to it gives
the executor back. Everything runs on the pool's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from daemon.errors import ExecutorUnavailable, PoolClosed
from daemon.executor.handle import ExecutorProcess
from daemon.executor.supervisor import Supervisor


@dataclass(eq=False)
class _Waiter:
    group: str
    limit: int
    future: asyncio.Future[ExecutorProcess] = field(repr=False)


class ExecutorQueue:
    """Executors for writes (see the module docstring)."""

    def __init__(
        self,
        sup: Supervisor,
        size: int,
        busy: Callable[[], str],
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        self._sup = sup
        self._size = size
        self._busy = busy  # what the pool is doing, for the error of a write that waited
        self._on_wait = on_wait  # a write has to wait: the pool may let an overdue one step aside
        self._waiters: deque[_Waiter] = deque()
        self._leased = 0  # writes holding one of the ``size`` places
        self._aside = 0  # writes that stepped aside (still on their executors)
        self._held: Counter[str] = Counter()  # executors held per connector, aside included

    @property
    def aside(self) -> int:
        """Writes that stepped aside and still run."""
        return self._aside

    async def acquire(
        self, deadline: float, task_id: str, group: str, limit: int | None = None
    ) -> ExecutorProcess:
        """An executor leased to ``task_id``'s write (of connector ``group``, which may hold
        at most ``limit`` executors at once; default ``size``); ``ExecutorUnavailable`` past
        ``deadline`` (the loop's time)."""
        limit = self._size if limit is None else max(1, min(limit, self._size))
        # ``dispatch`` ran after every change: an idle executor left now is wanted by no
        # write waiting ahead of this one (their connectors are at their limits).
        ex = self._take(group, limit)
        if ex is not None:
            return ex
        waiter = _Waiter(group, limit, self._sup.running_loop().create_future())
        self._waiters.append(waiter)
        if self._on_wait is not None:
            self._on_wait()
        try:
            async with asyncio.timeout_at(deadline):
                return await waiter.future
        except BaseException as exc:
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                # Handed over in the same instant the wait was abandoned: give it back.
                self.release(group)
                self.make_idle(future.result())
            if isinstance(exc, TimeoutError):
                at_limit = self._held[group] >= limit
                why = (
                    f"connector {group} holds {self._held[group]} executors, its limit"
                    f" (executor.writes.max={limit}); "
                    if at_limit
                    else ""
                )
                raise ExecutorUnavailable(
                    f"task {task_id}: no executor became free in time ({why}{self._busy()})"
                ) from None
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def wanted_by_others(self, group: str) -> bool:
        """A write of another connector waits and its connector is below its limit: a write
        of ``group`` that runs long should step aside for it."""
        return any(
            w.group != group and not w.future.done() and self._held[w.group] < w.limit
            for w in self._waiters
        )

    def step_aside(self) -> None:
        """A leased write ran long: it keeps its executor but gives its place up."""
        self._leased -= 1
        self._aside += 1
        self.dispatch()

    def release(self, group: str, *, aside: bool = False) -> None:
        """A write of ``group`` is over (done, failed, or its executor is being killed): its
        place (or, if it stepped aside, its extra executor) goes to the next write waiting."""
        if aside:
            self._aside -= 1
        else:
            self._leased -= 1
        self._held[group] -= 1
        if self._held[group] <= 0:
            del self._held[group]
        self.dispatch()
        if self._waiters and self._on_wait is not None:
            # A waiter whose connector was at its limit may now take a place an overdue
            # write would give up.
            self._on_wait()

    def make_idle(self, ex: ExecutorProcess) -> None:
        """``ex`` finished its write and takes the next one."""
        ex.task_id, ex.seq = None, None
        self._sup.make_idle(ex)
        self.dispatch()

    def dispatch(self) -> None:
        """Hand idle executors to the writes waiting, in order, skipping the ones whose
        connector is at its limit (an executor became ready or idle, or a place came free)."""
        for waiter in list(self._waiters):
            if waiter.future.done():
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
                continue
            if self._sup.closed or self._leased >= self._size:
                return
            if self._held[waiter.group] >= waiter.limit:
                continue
            ex = self._take(waiter.group, waiter.limit)
            if ex is None:
                return
            self._waiters.remove(waiter)
            waiter.future.set_result(ex)

    def close(self) -> None:
        """Every write still waiting gets ``PoolClosed``."""
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(PoolClosed("the executor pool is shutting down"))
        self._waiters.clear()

    def _take(self, group: str, limit: int) -> ExecutorProcess | None:
        if self._sup.closed or self._leased >= self._size or self._held[group] >= limit:
            return None
        ex = self._sup.take_idle()
        if ex is not None:
            ex.seq = None
            self._leased += 1
            self._held[group] += 1
        return ex
