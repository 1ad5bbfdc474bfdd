"""The executor pool: leases executors to writes, kills a write's whole process tree at its
deadline, and keeps ``size + spares`` warm executors alive.

Guarantees:

* A write's deadline starts when its executor acknowledges the work. Past it, the executor's
  tree is SIGKILLed, reaped and confirmed gone through /proc before ``run`` raises
  ``WriteTimeout``; a cancelled ``run`` does the same before it re-raises. A replacement is
  started only after the reap, so the pool never has more than ``size + spares`` executors.
* A task id is not leased again until its previous write's executor has been reaped: two
  incarnations of one task never write at the same time.
* Nothing here blocks the event loop: file writes, kills and /proc scans run in the pool's
  threads; process exits are seen through pidfds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.errors import (
    ExecutorDied,
    ExecutorError,
    ExecutorUnavailable,
    PoolClosed,
    WriteFailed,
    WriteTimeout,
)
from daemon.executor import handoff, protocol
from daemon.executor.handle import ExecutorProcess
from daemon.executor.info import ExecutorInfo, ExecutorState, PoolStatus
from daemon.executor.process import KillReport
from daemon.executor.protocol import WriteFunction, function_ref
from daemon.executor.settings import PoolSettings
from daemon.executor.supervisor import Supervisor

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

log = logging.getLogger("connectd.executor")


@dataclass
class _Lease:
    task_id: str
    ex: ExecutorProcess | None = None
    holds_slot: bool = False
    kill: asyncio.Task[KillReport] | None = None


class ExecutorPool(Supervisor):
    """Killable Spark executors. Use as ``async with ExecutorPool(settings) as pool:``.

    Write functions are called in the executor as ``fn(spark, batch, **kwargs)``: ``spark`` is
    the executor's SparkSession (None with ``with_spark=False``), ``batch`` a
    ``handoff.Batch`` (``.df`` Spark DataFrame, ``.table`` Arrow table, ``.path``) or None. The
    return value travels back pickled: keep it small.
    """

    def __init__(self, settings: PoolSettings | None = None) -> None:
        super().__init__(settings or PoolSettings())
        self._waiters: deque[asyncio.Future[ExecutorProcess]] = deque()
        self._leased = 0
        self._by_task: dict[str, ExecutorProcess] = {}
        self._gates: dict[str, asyncio.Future[None]] = {}
        self._seq = itertools.count(1)
        self._closing: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ExecutorPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- public API -------------------------------------------------------------------------

    async def run(
        self,
        task_id: str,
        fn: str | WriteFunction,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
    ) -> Any:
        """Run ``fn(spark, batch, **kwargs)`` in an executor leased for ``task_id``.

        Waits up to ``acquire_timeout`` (default ``settings.acquire_timeout``) for a free
        executor (``ExecutorUnavailable``). ``timeout`` counts from the executor's
        acknowledgement. Raises ``WriteTimeout`` (tree killed and reaped), ``ExecutorDied``,
        ``WriteFailed`` (``fn`` raised; the executor is reused) or ``PoolClosed``.
        """
        if not self._started or self._closed:
            raise PoolClosed("the executor pool is not running; no writes are taken")
        ref = function_ref(fn)
        args = dict(kwargs or {})
        try:
            protocol.encode(protocol.Run(0, task_id, ref, None, args))
        except protocol.FrameError as exc:
            raise TypeError(f"write arguments for task {task_id}: {exc}") from exc
        loop = self._running_loop()
        wait = self.settings.acquire_timeout if acquire_timeout is None else acquire_timeout
        deadline = loop.time() + wait
        lease = _Lease(task_id)
        await self._enter_task(task_id, deadline)
        path: Path | None = None
        try:
            if batch is not None:
                path = self._handoff.new_path(task_id, ".arrow")
                try:
                    await loop.run_in_executor(self._io_threads, handoff.write_table, batch, path)
                except OSError as exc:
                    raise WriteFailed(f"task {task_id}: cannot hand the batch over: {exc}") from exc
            lease.ex = await self._acquire(deadline, task_id)
            lease.holds_slot = True
            return await self._execute(lease, ref, path, args, timeout)
        finally:
            self._end_slot(lease)
            if lease.ex is not None and self._by_task.get(task_id) is lease.ex:
                del self._by_task[task_id]
            if path is not None:
                handoff.unlink_quietly(path)
                handoff.unlink_quietly(handoff.staging_path(path))
            self._leave_task(task_id, lease.kill)

    def snapshot(self) -> list[ExecutorInfo]:
        """Every executor the pool has (including ones being killed), by id."""
        return [ex.info() for ex in sorted(self._executors.values(), key=lambda e: e.ident)]

    def status(self) -> PoolStatus:
        states = [ex.state for ex in self._executors.values()]
        loop_time = self._loop.time() if self._loop is not None else 0.0
        return PoolStatus(
            size=self.settings.size,
            spares=self.settings.spares,
            closed=self._closed,
            starting=states.count(ExecutorState.STARTING),
            idle=states.count(ExecutorState.IDLE),
            busy=states.count(ExecutorState.BUSY),
            stopping=states.count(ExecutorState.KILLED) + states.count(ExecutorState.DEAD),
            writes_done=self._writes_done,
            kills=self._kills,
            deaths=self._deaths,
            start_failures=self._start_failures,
            failure_streak=self._streak,
            backoff_seconds=max(0.0, self._backoff_until - loop_time) if self._streak else 0.0,
            problem=self._problem,
            cds_archive=str(self._cds.archive) if self._cds and self._cds.ready() else None,
        )

    def pids(self) -> list[int]:
        """Every process the pool owns right now (executors, including those being killed, and
        the archive builder); their JVMs and workers are their descendants."""
        owned = [ex.pid for ex in self._executors.values()]
        if self._builder is not None and not self._builder.exited:
            owned.append(self._builder.pid)
        return owned

    def current_pid(self, task_id: str) -> int | None:
        """The pid of the executor writing for ``task_id`` now, if any."""
        ex = self._by_task.get(task_id)
        return ex.pid if ex is not None else None

    async def close(self, graceful_timeout: float = 5.0) -> None:
        """Take no more writes; let running ones finish for up to ``graceful_timeout``; then
        kill every executor's tree. When this returns, no process of the pool exists."""
        if not self._started:
            self._closed = True
            return
        if self._closing is None:
            self._closing = self._running_loop().create_task(self._close(graceful_timeout))
        await asyncio.shield(self._closing)

    # -- leases -----------------------------------------------------------------------------

    async def _enter_task(self, task_id: str, deadline: float) -> None:
        while (gate := self._gates.get(task_id)) is not None:
            try:
                async with asyncio.timeout_at(deadline):
                    await asyncio.shield(gate)
            except TimeoutError:
                raise ExecutorUnavailable(
                    f"task {task_id}: its previous write still holds an executor (being killed"
                    " or still running); try again once it is over"
                ) from None
        self._gates[task_id] = self._running_loop().create_future()

    def _leave_task(self, task_id: str, after: asyncio.Task[KillReport] | None) -> None:
        gate = self._gates.get(task_id)

        def release(_: object = None) -> None:
            if self._gates.get(task_id) is gate:
                del self._gates[task_id]
            if gate is not None and not gate.done():
                gate.set_result(None)

        if after is None or after.done():
            release()
        else:
            after.add_done_callback(release)

    async def _acquire(self, deadline: float, task_id: str) -> ExecutorProcess:
        ex = self._take()
        if ex is not None:
            return ex
        waiter: asyncio.Future[ExecutorProcess] = self._running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                return await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed over in the same instant the wait was abandoned: give it back.
                self._leased -= 1
                self._make_idle(waiter.result())
            if isinstance(exc, TimeoutError):
                raise ExecutorUnavailable(self._unavailable(task_id)) from None
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def _take(self) -> ExecutorProcess | None:
        if self._closed or self._leased >= self.settings.size:
            return None
        while self._idle:
            ex = self._idle.popleft()
            if ex.state is ExecutorState.IDLE and not ex.terminating:
                ex.state = ExecutorState.BUSY
                ex.seq = None
                self._leased += 1
                return ex
        return None

    def _dispatch(self) -> None:
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

    def _end_slot(self, lease: _Lease) -> None:
        if lease.holds_slot:
            lease.holds_slot = False
            self._leased -= 1
            self._dispatch()

    def _make_idle(self, ex: ExecutorProcess) -> None:
        ex.task_id, ex.seq, ex.accepted, ex.outcome = None, None, None, None
        if ex.state is ExecutorState.BUSY and not ex.terminating:
            ex.state = ExecutorState.IDLE
            ex.last_heartbeat = time.monotonic()
            if not self._closed:
                self._idle.append(ex)
        self._notify()
        self._dispatch()

    def _unavailable(self, task_id: str) -> str:
        s = self.status()
        why = f"{s.busy} busy, {s.starting} starting, {s.stopping} being reaped"
        return f"task {task_id}: no executor became free in time ({why}; {s.problem or 'ok'})"

    # -- one write --------------------------------------------------------------------------

    async def _execute(
        self, lease: _Lease, ref: str, path: Path | None, kwargs: dict[str, Any], timeout: float
    ) -> Any:
        ex = lease.ex
        assert ex is not None
        loop = self._running_loop()
        task_id = lease.task_id
        seq = next(self._seq)
        ex.task_id, ex.seq = task_id, seq
        ex.accepted, ex.outcome = loop.create_future(), loop.create_future()
        for fut in (ex.accepted, ex.outcome):
            fut.add_done_callback(_consume)
        self._by_task[task_id] = ex
        self._notify()
        try:
            try:
                ex.send(protocol.Run(seq, task_id, ref, str(path) if path else None, kwargs))
                async with asyncio.timeout(self.settings.accept_timeout):
                    await ex.accepted
            except TimeoutError:
                report = await self._kill_for(lease, "did not accept the write", counts_death=True)
                raise WriteTimeout(
                    f"task {task_id}: executor pid {ex.pid} did not accept the write within"
                    f" {self.settings.accept_timeout:g} s; {report.describe()}"
                ) from None
            except OSError as exc:
                report = await self._kill_for(lease, f"could not take the write: {exc}", True)
                raise ExecutorDied(
                    f"task {task_id}: executor pid {ex.pid} could not take the write ({exc});"
                    f" {report.describe()}"
                ) from None
            accepted_at = loop.time()
            try:
                async with asyncio.timeout(timeout):
                    outcome = await ex.outcome
            except TimeoutError:
                report = await self._kill_for(lease, f"write ran past its {timeout:g} s deadline")
                raise WriteTimeout(
                    f"task {task_id}: write {ref} ran past its deadline of {timeout:g} s on"
                    f" executor pid {ex.pid}; {report.describe()}"
                ) from None
            ex.writes_done += 1
            ex.last_write_seconds = loop.time() - accepted_at
            if isinstance(outcome, protocol.Done):
                self._writes_done += 1
                self._end_slot(lease)
                self._make_idle(ex)
                return outcome.value
            if outcome.fatal:
                await self._kill_for(lease, outcome.message, counts_death=True)
                raise ExecutorDied(
                    f"task {task_id}: executor pid {ex.pid} broke during the write:"
                    f" {outcome.message}"
                )
            self._end_slot(lease)
            self._make_idle(ex)
            raise WriteFailed(
                f"task {task_id}: write function {ref} raised {outcome.error}: {outcome.message}\n"
                f"{outcome.traceback}"
            )
        except ExecutorError as exc:
            if ex.terminating and lease.kill is None:
                # It died on its own (or the pool closed): the task id stays held until reaped.
                self._end_slot(lease)
                lease.kill = self._retire(ex)
                with contextlib.suppress(Exception):
                    await asyncio.shield(lease.kill)
            raise exc
        except asyncio.CancelledError:
            if lease.kill is None and ex.seq == seq and ex.state is ExecutorState.BUSY:
                lease.kill = self._start_kill(lease, f"the write for task {task_id} was cancelled")
            if lease.kill is not None and not lease.kill.done():
                # Finish the kill before reporting the cancellation (unless cancelled again).
                with contextlib.suppress(Exception):
                    await asyncio.shield(lease.kill)
            raise

    def _start_kill(
        self, lease: _Lease, reason: str, counts_death: bool = False
    ) -> asyncio.Task[KillReport]:
        assert lease.ex is not None
        self._end_slot(lease)  # the spare may take this write's slot at once
        lease.kill = self._kill(lease.ex, reason, counts_death=counts_death)
        return lease.kill

    async def _kill_for(self, lease: _Lease, reason: str, counts_death: bool = False) -> KillReport:
        return await asyncio.shield(self._start_kill(lease, reason, counts_death))

    # -- executor events (from Supervisor) --------------------------------------------------

    def _on_died(self, ex: ExecutorProcess, error: ExecutorError) -> None:
        for fut in (ex.accepted, ex.outcome):
            if fut is not None and not fut.done():
                fut.set_exception(error)

    def _on_ready(self, ex: ExecutorProcess) -> None:
        self._idle.append(ex)
        self._dispatch()

    # -- shutdown ---------------------------------------------------------------------------

    async def _close(self, graceful_timeout: float) -> None:
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(PoolClosed("the executor pool is shutting down"))
        self._waiters.clear()
        try:
            async with asyncio.timeout(graceful_timeout):
                while any(e.state is ExecutorState.BUSY for e in self._executors.values()):
                    await self._wait_changed()
        except TimeoutError:
            log.warning("executor pool: writes still running after %gs; killing", graceful_timeout)
        await self._stop_everything(PoolClosed("the executor pool closed during the write"))


def _consume(fut: asyncio.Future[Any]) -> None:
    # Nobody may be waiting any more (a cancelled run): mark the exception retrieved.
    if not fut.cancelled():
        fut.exception()
