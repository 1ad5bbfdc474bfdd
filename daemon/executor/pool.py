"""The executor pool: leases executors to writes, kills a write's whole process tree at its
deadline, and keeps ``size + spares`` warm executors alive (through the ``Supervisor`` it
holds). ``submit`` hands a write over and returns its ``WriteLease`` (which executor accepted
it, when, how it ended); ``run`` awaits one. ``start`` starts the executors; a write submitted
to a pool not started yet starts it (``executor.pool.start``: a daemon whose connectors never
write starts no JVM).

Guarantees:

* A write's deadline starts when its executor acknowledges the work; the wait for a free
  executor before that (and for the pool's start, if the write started it) is bounded by its
  acquire timeout. Past the deadline, the executor's tree is SIGKILLed, reaped and confirmed
  gone through /proc before ``run`` raises ``WriteTimeout``; a cancelled ``run`` does the same
  before it re-raises. A replacement is started only after the reap, so the pool never has
  more than ``size + spares`` executors, plus one for each write that stepped aside (below),
  up to ``max_size``.
* A task id is not leased again until its previous write's executor has been reaped: two
  incarnations of one task never write at the same time.
* One connector's long writes never hold the others' back: a write still running after
  ``overdue_after`` while another connector's write waits steps aside (``queue.py``): it keeps
  its executor and its deadline, and a spare takes the waiting write while one more executor
  starts (up to ``max_size``). A connector's writes hold at most ``group_limit`` executors
  (by default ``size``), the ones that stepped aside included.
* Nothing here blocks the event loop: file writes, kills and /proc scans run in the pool's
  threads; process exits are seen through pidfds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.errors import (
    ConnectdError,
    ExecutorDied,
    ExecutorError,
    PoolClosed,
    WriteFailed,
    WriteTimeout,
)
from daemon.executor import formats as table_formats
from daemon.executor import handoff, protocol
from daemon.executor.gates import TaskGates
from daemon.executor.handle import ExecutorProcess
from daemon.executor.info import ExecutorInfo, ExecutorState, PoolEvents, PoolStatus
from daemon.executor.lease import WriteLease, WriteSignals
from daemon.executor.process import KillReport
from daemon.executor.protocol import WriteFunction, function_ref
from daemon.executor.queue import ExecutorQueue
from daemon.executor.settings import PoolSettings
from daemon.executor.startup import Startup
from daemon.executor.supervisor import Supervisor

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

log = logging.getLogger("connectd.executor")


class _Write:
    """The pool's side of one write: its lease, the executor holding it, the kill if any."""

    def __init__(self, lease: WriteLease, group: str, limit: int | None) -> None:
        self.lease = lease
        self.group = group  # its connector: how many executors the group holds is bounded
        self.limit = limit
        self.ex: ExecutorProcess | None = None
        self.signals: WriteSignals | None = None
        self.holds_slot = False  # one of the ``size`` places
        self.aside = False  # ran long and gave its place up (``queue.py``); still on ``ex``
        self.overdue = False  # ran past ``overdue_after``
        self.overdue_timer: asyncio.TimerHandle | None = None
        self.kill: asyncio.Task[KillReport] | None = None


class ExecutorPool:
    """Killable Spark executors. Use as ``async with ExecutorPool(settings) as pool:``.

    Write functions run as ``fn(spark, batch, **kwargs)`` in the executor. ``spark`` is its
    SparkSession (None with ``with_spark=False``, and for a write submitted with
    ``spark=False`` to an executor that opened none, ``spark_on_demand``); ``batch`` is a
    ``daemon.executor.Batch`` (``.df`` Spark DataFrame, ``.table`` Arrow table, ``.path``) or
    None. The return value travels back pickled: keep it small.

    The pool holds a ``Supervisor`` (the processes: start, replace, back off, reap) and keeps
    the writes: which executor each holds, one write per task id at a time, deadlines. It is
    bound to the event loop it starts on (``start``, ``start_soon`` or the first ``submit``).
    """

    def __init__(self, settings: PoolSettings | None = None) -> None:
        self.settings = settings or PoolSettings()
        self._sup = Supervisor(self.settings, owner=self)
        self._queue = ExecutorQueue(
            self._sup, self.settings.size, self._doing, on_wait=self._step_aside_if_wanted
        )
        self._by_task: dict[str, _Write] = {}
        self._gates = TaskGates()
        self._seq = itertools.count(1)
        self._writes_done = 0
        self._closing: asyncio.Task[None] | None = None
        self._startup = Startup(self._sup)

    async def __aenter__(self) -> ExecutorPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- public API -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the executors in the background and return once the pool takes writes (its
        scratch directories made, in a thread); the executors need seconds more."""
        await asyncio.shield(self._startup.task())

    async def check_jars(self) -> None:
        """What ``start`` checks first, without starting anything: the jars of the table formats
        every session loads (``settings.formats``; ``formats.JarsMissing``). In a thread."""
        await asyncio.to_thread(
            table_formats.require_jars, self.settings.formats, self.settings.jars_dir
        )

    def start_soon(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        """``start`` in the background, from the event loop (``startup.Startup.begin``), with
        sessions that load ``formats`` too (as a write naming them would; a format whose jars
        are missing is left for that write to report), and that open a SparkSession if
        ``spark`` (``settings.spark_on_demand``: as a write asking for one would). Never
        raises."""
        try:
            self._load_formats(formats, spark)
        except ConnectdError as exc:
            log.warning("executor pool: not loading table formats %s now: %s", formats, exc)
        self._startup.begin()

    async def ready(self, timeout: float) -> bool:
        """Whether an executor can take a write within ``timeout`` seconds (the pool started
        first if it was not); False past it or when the start failed (the first write meets
        the error again)."""
        try:
            async with asyncio.timeout(timeout):
                await self.start()
                await self._sup.wait_ready(1, math.inf)
        except (TimeoutError, ConnectdError, OSError) as exc:
            log.warning("executor pool: no executor ready within %.0f s: %r", timeout, exc)
            return False
        return True

    def _load_formats(self, formats: Collection[str], spark: bool = True) -> None:
        """Sessions load ``formats`` from now on (``submit``'s ``formats``), and executors open
        a SparkSession if ``spark``."""
        wanted = table_formats.check_names(formats)
        loaded = self._sup.formats.wanted
        if not wanted <= loaded:
            # A few stat calls, once per format and pool (none once the format is loaded).
            table_formats.require_jars(wanted - loaded, self.settings.jars_dir)
        self._sup.formats.load(wanted, spark=spark)  # returns at once when nothing is new

    @property
    def started(self) -> bool:
        """The pool has started (its executors exist or are being started)."""
        return self._sup.started

    async def wait_ready(self, n: int = 1, timeout: float | None = None) -> None:
        """Wait until ``n`` executors are ready (idle or busy). For tests and benchmarks."""
        await self._sup.wait_ready(n, timeout)

    async def build_archive(self) -> Path | None:
        """Build the class-data-sharing archive now if it is missing (waits for the build);
        the archive's path, or None when there is none (no JDK found, disabled, failed)."""
        return await self._sup.archive.build_now()

    def submit(
        self,
        task_id: str,
        fn: str | WriteFunction,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
        formats: Collection[str] = (),
        group: str | None = None,
        group_limit: int | None = None,
        spark: bool = True,
    ) -> WriteLease:
        """Hand ``fn(spark, batch, **kwargs)`` over for ``task_id``; the lease says which
        executor accepted it, when, and how it ended (``daemon.executor.lease``).

        Waits up to ``acquire_timeout`` (default ``settings.acquire_timeout``) for a free
        executor (``ExecutorUnavailable``). ``timeout`` counts from the executor's
        acknowledgement. The result raises ``WriteTimeout`` (tree killed and reaped),
        ``ExecutorDied``, ``WriteFailed`` (``fn`` raised; the executor is reused, or replaced
        when the failure may leave state behind: ``protocol.Failed.recycle``) or ``PoolClosed``;
        this call itself raises ``PoolClosed`` when the pool takes no writes and ``TypeError``
        when the arguments cannot be sent. A pool not started yet starts now
        (``startup.Startup``); the write waits for it within ``acquire_timeout`` as it then waits
        for a free executor.

        ``formats``: table formats (``formats.FORMATS``) the write's session needs. One the pool
        has not loaded yet is loaded from now on (``formats``); the write waits for an executor
        that has it like for any free one. This call raises ``ConfigError`` for an unknown
        name and ``formats.JarsMissing`` (not retriable) when the format's jars are missing.

        ``spark`` False: ``fn`` never uses its ``spark`` argument, so any executor may run it,
        one without a SparkSession included (``settings.spark_on_demand``, where ``spark`` is
        None); True, the default: the pool opens SparkSessions from now on if it had none,
        and the write waits for an executor with one like for any free one.

        ``group`` (default: the task id) is the write's connector; its writes hold at most
        ``group_limit`` executors at once (default, and at most, ``settings.size``), counting
        the ones that stepped aside after running long.
        """
        if self._sup.closed:
            raise PoolClosed("the executor pool is closed; no writes are taken")
        if not self._sup.started and not self._sup.replacing:
            # The daemon is shutting down: a JVM started now would only be killed.
            raise PoolClosed("the executor pool is shutting down and was never started")
        self._load_formats(formats, spark)
        ref = function_ref(fn)
        args = dict(kwargs or {})
        try:
            protocol.encode(protocol.Run(0, task_id, ref, None, args))
        except protocol.FrameError as exc:
            raise TypeError(f"write arguments for task {task_id}: {exc}") from exc
        wait = self.settings.acquire_timeout if acquire_timeout is None else acquire_timeout
        if self._sup.started:
            lease = WriteLease(task_id, self._sup.running_loop())
        else:
            self._startup.task()  # the first write starts the pool and waits in ``_write``
            lease = WriteLease(task_id, asyncio.get_running_loop())
        write = _Write(lease, task_id if group is None else group, group_limit)
        lease.start(self._write(write, ref, batch, args, timeout, wait))
        return lease

    async def run(
        self,
        task_id: str,
        fn: str | WriteFunction,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
        formats: Collection[str] = (),
        group: str | None = None,
        group_limit: int | None = None,
        spark: bool = True,
    ) -> Any:
        """``await submit(...).result()``: the write's value, or its error (see ``submit``).
        Cancelling it kills the write's executor tree and re-raises once it is reaped."""
        lease = self.submit(
            task_id,
            fn,
            batch,
            timeout=timeout,
            kwargs=kwargs,
            acquire_timeout=acquire_timeout,
            formats=formats,
            group=group,
            group_limit=group_limit,
            spark=spark,
        )
        return await lease.result()

    async def recycle_idle(self, reason: str) -> int:
        """Kill and reap every idle executor now (replacements start in the background); the
        number recycled. Distributed mode: a worker that lost its group membership keeps no
        process that lived through its time as a zombie."""
        kills = self._sup.recycle_idle(reason)
        await asyncio.gather(*(asyncio.shield(k) for k in kills), return_exceptions=True)
        return len(kills)

    @property
    def formats(self) -> frozenset[str]:
        """The table formats the pool's sessions load: ``settings.formats`` and every format a
        write asked for (only grows while the pool runs)."""
        return self._sup.formats.wanted

    def snapshot(self) -> list[ExecutorInfo]:
        """Every executor the pool has (including ones being killed), by id."""
        return self._sup.snapshot()

    def status(self) -> PoolStatus:
        return self._sup.status(self._writes_done)

    def pids(self) -> list[int]:
        """Every process the pool owns right now (executors, including those being killed, and
        the archive builder); their JVMs and workers are their descendants."""
        return self._sup.pids()

    @property
    def events(self) -> PoolEvents:
        """Leases and reaps, in order, with monotonic times (``daemon.executor.info``); any
        thread may read ``events.snapshot()``."""
        return self._sup.events

    def current_pid(self, task_id: str) -> int | None:
        """The pid of the executor writing for ``task_id`` now, if any."""
        write = self._by_task.get(task_id)
        return write.ex.pid if write is not None and write.ex is not None else None

    async def close(self, graceful_timeout: float = 5.0) -> None:
        """Take no more writes; let running ones finish for up to ``graceful_timeout``; then
        kill every executor's tree. When this returns, no process of the pool exists."""
        if not self._sup.started:
            self._sup.closed = True
            await self._startup.settled()
            if not self._sup.started:
                return
        if self._closing is None:
            self._closing = self._sup.running_loop().create_task(self._close(graceful_timeout))
        await asyncio.shield(self._closing)

    # -- one write, from hand-off to reap ---------------------------------------------------

    async def _write(
        self,
        write: _Write,
        ref: str,
        batch: pa.Table | None,
        args: dict[str, Any],
        timeout: float,
        wait: float,
    ) -> Any:
        loop = asyncio.get_running_loop()
        task_id = write.lease.task_id
        deadline = loop.time() + wait
        await self._gates.enter(task_id, deadline)
        path: Path | None = None
        try:
            if not self._sup.started:
                await self._startup.wait(deadline, task_id)
            if batch is not None:
                path = self._sup.handoff.new_path(task_id, ".arrow")
                try:
                    await loop.run_in_executor(
                        self._sup.io_threads, handoff.write_table, batch, path
                    )
                except OSError as exc:
                    raise WriteFailed(f"task {task_id}: cannot hand the batch over: {exc}") from exc
            write.ex = await self._queue.acquire(deadline, task_id, write.group, write.limit)
            write.holds_slot = True
            return await self._execute(write, ref, path, args, timeout)
        finally:
            self._end_slot(write)
            if self._by_task.get(task_id) is write:
                del self._by_task[task_id]
            if path is not None:
                handoff.unlink_quietly(path)
                handoff.unlink_quietly(handoff.staging_path(path))
            self._gates.leave(task_id, write.kill)

    # -- the write on its executor ----------------------------------------------------------

    async def _execute(
        self, write: _Write, ref: str, path: Path | None, kwargs: dict[str, Any], timeout: float
    ) -> Any:
        ex = write.ex
        assert ex is not None
        loop = self._sup.running_loop()
        task_id = write.lease.task_id
        seq = next(self._seq)
        ex.task_id, ex.seq = task_id, seq
        signals = write.signals = WriteSignals(seq, loop)
        self._by_task[task_id] = write
        self._sup.events.leased(ex.ident, ex.pid, task_id)
        self._sup.notify()
        try:
            try:
                ex.send(protocol.Run(seq, task_id, ref, str(path) if path else None, kwargs))
                async with asyncio.timeout(self.settings.accept_timeout):
                    await signals.acknowledged
            except TimeoutError:
                report = await self._kill_for(write, "did not accept the write", counts_death=True)
                raise WriteTimeout(
                    f"task {task_id}: executor pid {ex.pid} did not accept the write within"
                    f" {self.settings.accept_timeout:g} s; {report.describe()}"
                ) from None
            except OSError as exc:
                report = await self._kill_for(write, f"could not take the write: {exc}", True)
                raise ExecutorDied(
                    f"task {task_id}: executor pid {ex.pid} could not take the write ({exc});"
                    f" {report.describe()}"
                ) from None
            accepted_at = loop.time()
            write.lease.accept(ex.ident, ex.pid, accepted_at)
            if self.settings.overdue_after < timeout:
                write.overdue_timer = loop.call_later(
                    self.settings.overdue_after, self._now_overdue, write
                )
            try:
                async with asyncio.timeout(timeout):
                    outcome = await signals.outcome
            except TimeoutError:
                report = await self._kill_for(write, f"write ran past its {timeout:g} s deadline")
                raise WriteTimeout(
                    f"task {task_id}: write {ref} ran past its deadline of {timeout:g} s on"
                    f" executor pid {ex.pid}; {report.describe()}"
                ) from None
            ex.writes_done += 1
            ex.last_write_seconds = loop.time() - accepted_at
            if isinstance(outcome, protocol.Done):
                self._writes_done += 1
                self._end_slot(write)
                self._queue.make_idle(ex)
                return outcome.value
            if outcome.fatal:
                await self._kill_for(write, outcome.message, counts_death=True)
                raise ExecutorDied(
                    f"task {task_id}: executor pid {ex.pid} broke during the write:"
                    f" {outcome.message}"
                )
            self._end_slot(write)
            error = _write_failed(task_id, ref, outcome)
            if outcome.recycle:
                await self._recycle(write, error)
            else:
                self._queue.make_idle(ex)
            raise error
        except ExecutorError as exc:
            if ex.terminating and write.kill is None:
                # It died on its own (or the pool closed): the task id stays held until reaped.
                self._end_slot(write)
                write.kill = self._sup.retire(ex)
                with contextlib.suppress(Exception):
                    await asyncio.shield(write.kill)
            raise exc
        except asyncio.CancelledError:
            if write.kill is None and ex.seq == seq and ex.state is ExecutorState.BUSY:
                self._start_kill(write, f"the write for task {task_id} was cancelled")
            if write.kill is not None and not write.kill.done():
                # Finish the kill before reporting the cancellation (unless cancelled again).
                with contextlib.suppress(Exception):
                    await asyncio.shield(write.kill)
            raise

    def _end_slot(self, write: _Write) -> None:
        if write.overdue_timer is not None:
            write.overdue_timer.cancel()
            write.overdue_timer = None
        if write.holds_slot:
            write.holds_slot = False
            self._queue.release(write.group)
        elif write.aside:
            write.aside = False
            self._queue.release(write.group, aside=True)
            self._sup.set_aside(self._queue.aside)

    # -- long writes step aside -------------------------------------------------------------

    def _now_overdue(self, write: _Write) -> None:
        write.overdue_timer = None
        write.overdue = True
        self._step_aside_if_wanted()

    def _step_aside_if_wanted(self) -> None:
        """Overdue writes give their places to other connectors' waiting writes."""
        for write in list(self._by_task.values()):
            if not (write.overdue and write.holds_slot and write.kill is None):
                continue
            if not self._queue.wanted_by_others(write.group):
                continue
            assert write.ex is not None
            write.holds_slot = False
            write.aside = True
            log.info(
                "task %s: its write has run for more than %g s on executor %d (pid %d) while"
                " another connector's write waits: it steps aside (keeping its executor and its"
                " deadline); the waiting writes go to the other executors and one more starts",
                write.lease.task_id,
                self.settings.overdue_after,
                write.ex.ident,
                write.ex.pid,
            )
            self._sup.set_aside(self._queue.aside + 1)
            self._queue.step_aside()

    def _doing(self) -> str:
        s = self.status()
        return (
            f"{s.busy} busy, {s.starting} starting, {s.stopping} being reaped; {s.problem or 'ok'}"
        )

    async def _recycle(self, write: _Write, error: WriteFailed) -> None:
        """Replace the executor of a write that failed leaving state behind (a failed Spark
        job's open files): killed and reaped before the error is raised, so the files the sink
        deletes next are freed at once; the task id's gate stays closed until the reap; the
        replacement starts in the background."""
        assert write.ex is not None
        first = str(error).splitlines()[0]
        write.kill = self._sup.recycle(
            write.ex, first.removeprefix(f"task {write.lease.task_id}: ")
        )
        with contextlib.suppress(Exception):
            await asyncio.shield(write.kill)

    def _start_kill(
        self, write: _Write, reason: str, counts_death: bool = False
    ) -> asyncio.Task[KillReport]:
        assert write.ex is not None
        self._end_slot(write)  # the spare may take this write's slot at once
        write.kill = self._sup.kill(write.ex, reason, counts_death=counts_death)
        write.lease.killed = True
        return write.kill

    async def _kill_for(self, write: _Write, reason: str, counts_death: bool = False) -> KillReport:
        return await asyncio.shield(self._start_kill(write, reason, counts_death))

    # -- what the supervisor tells the pool (``PoolOwner``) ---------------------------------

    def executor_ready(self, ex: ExecutorProcess) -> None:
        self._queue.dispatch()

    def executor_message(self, ex: ExecutorProcess, msg: protocol.Message) -> None:
        write = self._writing(ex)
        if write is not None and write.signals is not None:
            write.signals.feed(msg)

    def executor_lost(self, ex: ExecutorProcess, error: ExecutorError) -> None:
        write = self._writing(ex)
        if write is not None and write.signals is not None:
            write.signals.fail(error)

    def _writing(self, ex: ExecutorProcess) -> _Write | None:
        write = self._by_task.get(ex.task_id) if ex.task_id is not None else None
        return write if write is not None and write.ex is ex else None

    # -- shutdown ---------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """The owner is shutting down: executors that end from now on are not replaced (a JVM
        start takes longer than a shutdown waits; it would start only to be killed). Writes
        still run on the executors left. ``close`` implies it."""
        self._sup.replacing = False

    async def _close(self, graceful_timeout: float) -> None:
        self._sup.closed = True
        self._queue.close()
        try:
            async with asyncio.timeout(graceful_timeout):
                while self._sup.any_busy():
                    await self._sup.wait_changed()
        except TimeoutError:
            log.warning("executor pool: writes still running after %gs; killing", graceful_timeout)
        await self._sup.stop_everything(PoolClosed("the executor pool closed during the write"))


def _write_failed(task_id: str, ref: str, outcome: protocol.Failed) -> WriteFailed:
    """The error of a write whose function raised. Its first line (the task's error line, the
    restart log's cause) leads with the root cause when the executor found one: ``No space
    left on device on /path`` rather than ``An error occurred while calling o574.save.``"""
    raised = f"write function {ref} raised {outcome.error}"
    if outcome.cause is None:
        return WriteFailed(f"task {task_id}: {raised}: {outcome.message}\n{outcome.traceback}")
    return WriteFailed(
        f"task {task_id}: {outcome.cause} ({raised})\n{outcome.message}\n{outcome.traceback}"
    )
