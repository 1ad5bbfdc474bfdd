"""Keeping executors alive: start, replace with backoff, watch heartbeats, kill and reap.

``Supervisor`` deals with processes; the ``ExecutorPool`` that holds it deals with writes and
hears from it through the narrow ``PoolOwner`` protocol. The supervisor holds two parts of its
own, each with its own state and a narrow protocol of what it reads back: ``ArchiveKeeper``
(``archive.py``: the class-data-sharing archive, built, replaced, given up) and
``SessionFormats`` (``formats.py``: the table formats sessions load, whether they open a
SparkSession at all, and the recycling of executors that lack either). Invariants kept here:

* at most ``size + spares`` executors exist at once, counting the ones being killed, one more
  for each write that stepped aside (``queue.py``), never more than ``max_size``: a
  replacement is spawned only after its predecessor's tree is reaped; executors more than the
  pool keeps (the writes they stood in for are over) are retired, idle ones, once the excess
  has lasted ``excess_idle``;
* while no executor is ready (idle or busy), at most one is starting; the rest of ``size``
  start once it is ready, the spares once writes pause (``startorder.py``): JVM starts share
  the machine's cores with each other and with the writes;
* consecutive start failures (and idle executors dying) back off exponentially, with the reason
  in ``problem``; a successful start resets the streak;
* an idle executor that stops sending heartbeats, or one not ready within ``start_timeout``, is
  killed and replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Protocol

from daemon.errors import ExecutorDied, ExecutorError, ExecutorStartFailed, PoolClosed
from daemon.executor import launch, process, protocol
from daemon.executor.archive import ArchiveKeeper
from daemon.executor.backoff import StartBackoff
from daemon.executor.formats import SessionFormats
from daemon.executor.handle import ExecutorProcess
from daemon.executor.info import ExecutorInfo, ExecutorState, PoolEvents, PoolStatus
from daemon.executor.process import KillReport
from daemon.executor.settings import PoolSettings
from daemon.executor.startorder import StartOrder

log = logging.getLogger("connectd.executor")


class PoolOwner(Protocol):
    """What the supervisor tells the pool that holds it; called on the event loop."""

    def executor_ready(self, ex: ExecutorProcess) -> None:
        """``ex`` is idle now (ready for the first time, or back from a write)."""

    def executor_message(self, ex: ExecutorProcess, msg: protocol.Message) -> None:
        """``ex`` answered a write (``Accepted``, ``Done``, ``Failed``)."""

    def executor_lost(self, ex: ExecutorProcess, error: ExecutorError) -> None:
        """``ex`` died, or the pool is stopping: fail the write it holds, if any."""


class Supervisor:
    """The executors of one pool; ``owner`` hears when they become ready, answer or die."""

    def __init__(self, settings: PoolSettings, owner: PoolOwner) -> None:
        self.settings = settings
        self.owner = owner
        self._executors: dict[int, ExecutorProcess] = {}
        self._idle: deque[ExecutorProcess] = deque()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Kills and /proc scans get threads of their own: hand-off writes never delay a kill.
        self._threads = ThreadPoolExecutor(settings.most + 2, "connectd-executor-kill")
        self.io_threads = ThreadPoolExecutor(settings.size + 1, "connectd-executor-io")
        self.started = False
        self.closed = False
        #: False once the owner is shutting down: an executor that ends is not replaced (a JVM
        #: start takes longer than the shutdown's graceful wait; it would only be killed).
        self.replacing = True
        self._changed = asyncio.Event()
        self._monitoring: asyncio.Task[None] | None = None
        self._backoff = StartBackoff(settings.backoff_initial, settings.backoff_max)
        self._order = StartOrder(
            settings.size,
            settings.spares,
            settings.spare_quiet,
            settings.spare_wait_max,
            max_size=settings.most,
        )
        self._aside = 0  # writes that stepped aside (``queue.py``)
        self._excess_since: float | None = None  # more executors than kept, since then
        self._shed_later: asyncio.TimerHandle | None = None
        self._recheck: asyncio.TimerHandle | None = None
        self._last_write_end: float | None = None
        self._problem: str | None = None
        self._kills = self._deaths = self._recycles = 0
        self._launcher = launch.Launcher(settings)
        self.handoff = self._launcher.handoff
        #: The class-data-sharing archive its executors start from (``archive.py``).
        self.archive = ArchiveKeeper(settings, self._launcher, self._threads, owner=self)
        #: The table formats their sessions load (``formats.py``).
        self.formats = SessionFormats(
            settings.formats,
            owner=self,
            spark=not settings.spark_on_demand,
            able=settings.with_spark,
        )
        #: Leases (recorded by the pool) and reaps, in order, with monotonic times.
        self.events = PoolEvents()

    # -- start ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the executors in the background and return at once (they need seconds)."""
        if self.started:
            return
        if "CONNECTD_PARENT_PID" in os.environ:
            # A write function's module that starts a pool when imported would otherwise make
            # every executor spawn executors of its own, without end.
            raise ExecutorStartFailed(
                "an executor pool cannot start inside an executor process: a module imported "
                "for a write function starts a pool at import time; guard that code with "
                "`if __name__ == '__main__':`"
            )
        self._loop = asyncio.get_running_loop()
        if not process.is_subreaper():
            log.warning(
                "connectd is not a child subreaper: orphans of killed executors go to PID 1;"
                " call daemon.executor.become_subreaper() at start"
            )
        await self._loop.run_in_executor(self._threads, self._launcher.prepare)
        if self.closed:  # closed while the directories were being prepared: none is left
            await self._loop.run_in_executor(self._threads, self._launcher.close)
            self._threads.shutdown(wait=False)
            self.io_threads.shutdown(wait=False)
            return
        self._launcher.open()
        self.started = True
        self._fill()
        self._monitoring = self._loop.create_task(self._monitor())

    def running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the executor pool was not started")
        return self._loop

    def _fill(self) -> None:
        """Spawn executors until ``size + spares`` exist, unless backing off or shutting down,
        in the order of ``startorder.StartOrder`` (called again on each change)."""
        if not self.started or self.closed or not self.replacing:
            return
        loop = self.running_loop()
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
        missing, again = self._order.plan(
            existing=len(self._executors),
            ready=self._ready_count(),
            starting=self._starting_count(),
            busy=sum(1 for e in self._executors.values() if e.state is ExecutorState.BUSY),
            last_write_end=self._last_write_end,
            now=loop.time(),
            aside=self._aside,
        )
        if again is not None:  # spares put off while writes run (``startorder.py``)
            self._recheck = loop.call_later(again, self._fill)
        if missing <= 0:
            return
        if self._backoff.waiting(loop, self._fill):
            return
        for _ in range(missing):
            ident = next(self._ids)
            try:
                ex = self._launcher.spawn(
                    ident,
                    self._on_message,
                    self._on_exit,
                    formats=self.formats.wanted,
                    spark=self.formats.spark,
                )
            except OSError as exc:
                self._start_failed(f"could not spawn an executor: {exc}")
                self._fill()
                return
            self._executors[ident] = ex
            log.info("executor %d started: pid %d", ident, ex.pid)
        self.notify()

    def _start_failed(self, reason: str) -> None:
        delay = self._backoff.failed(self.running_loop().time())
        streak = self._backoff.streak
        self._problem = f"{reason} (failure {streak} in a row; next start in {delay:g} s)"
        log.error("executor pool: %s", self._problem)

    # -- idle executors ---------------------------------------------------------------------

    def take_idle(self) -> ExecutorProcess | None:
        """An idle executor, now BUSY; None if there is none.

        The one that wrote last comes first (``make_idle`` puts it at the front; a newly
        ready one joins at the back): its JVM is hot (compiled code, a grown heap), and a spare
        stays a spare, cold and small, until a write finds every hot one busy. Taking them in
        turn made each JVM pay its own JIT warm-up and grow its own heap: in a one-task run
        both JVMs of 1 executor + 1 spare spent 19-22 s of CPU per million records."""
        while self._idle:
            ex = self._idle.popleft()
            if ex.state is ExecutorState.IDLE and not ex.terminating:
                if self.formats.lacks(ex):  # not expected: they are recycled when formats grow
                    self.formats.replace(ex)
                    continue
                ex.state = ExecutorState.BUSY
                return ex
        return None

    def make_idle(self, ex: ExecutorProcess) -> None:
        """``ex`` finished its write: idle again, unless it is being killed or the pool closed."""
        if ex.state is ExecutorState.BUSY and not ex.terminating:
            ex.state = ExecutorState.IDLE
            ex.last_heartbeat = time.monotonic()
            self._last_write_end = self.running_loop().time()
            if self.formats.lacks(ex):
                self.formats.replace(ex)  # its write ended: now it can go
            elif not self.closed:
                self._idle.appendleft(ex)  # hot: the next write takes it first
                self._shed()
            self._fill()  # a spare put off while writes ran may start once they pause
        self.notify()

    def set_aside(self, count: int) -> None:
        """``count`` writes stand aside now: keep one more executor for each (up to
        ``max_size``), or retire idle ones the pool no longer keeps."""
        self._aside = count
        self._shed()
        self._fill()

    def _shed(self) -> None:
        """Retire idle executors beyond what the pool keeps now, the coldest first, once the
        excess has lasted ``excess_idle``."""
        if self._shed_later is not None:
            self._shed_later.cancel()
            self._shed_later = None
        keep = min(self.settings.target + self._aside, self.settings.most)
        live = [ex for ex in self._executors.values() if not ex.terminating]
        excess = len(live) - keep
        if excess <= 0 or self.closed:
            self._excess_since = None
            return
        loop = self.running_loop()
        now = loop.time()
        if self._excess_since is None:
            self._excess_since = now
        wait = self._excess_since + self.settings.excess_idle - now
        if wait > 0:
            self._shed_later = loop.call_later(wait, self._shed)
            return
        while excess > 0 and self._idle:
            ex = self._idle.pop()
            if ex.state is not ExecutorState.IDLE or ex.terminating:
                continue
            ex.state = ExecutorState.KILLED
            ex.reason = "retired: the long write it stood in for is over"
            log.info("executor %d (pid %d) %s", ex.ident, ex.pid, ex.reason)
            self.retire(ex)
            excess -= 1

    def recycle_idle(self, reason: str) -> list[asyncio.Task[KillReport]]:
        """Replace every idle executor (killed and reaped; replacements start)."""
        idle = [ex for ex in self._idle if ex.state is ExecutorState.IDLE and not ex.terminating]
        return [self.recycle(ex, reason) for ex in idle]

    def live(self) -> Iterator[ExecutorProcess]:
        """Executors not being killed (``SessionFormats``' view of the pool)."""
        return (ex for ex in self._executors.values() if not ex.terminating)

    def any_busy(self) -> bool:
        return any(e.state is ExecutorState.BUSY for e in self._executors.values())

    # -- observability and readiness ------------------------------------------------------

    async def wait_ready(self, n: int = 1, timeout: float | None = None) -> None:
        """Wait until ``n`` executors are ready (idle or busy). For tests and benchmarks."""
        n = min(n, self.settings.target)
        bound = self.settings.start_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(bound):
                while self._ready_count() < n:
                    if self.closed:
                        raise PoolClosed("the executor pool was closed while waiting for it")
                    await self.wait_changed()
        except TimeoutError:
            raise ExecutorStartFailed(
                f"{self._ready_count()} of {n} executors ready after {bound:g} s"
                + (f"; {self._problem}" if self._problem else "")
            ) from None

    def snapshot(self) -> list[ExecutorInfo]:
        """Every executor (including ones being killed), by id."""
        return [ex.info() for ex in sorted(self._executors.values(), key=lambda e: e.ident)]

    def status(self, writes_done: int) -> PoolStatus:
        states = [ex.state for ex in self._executors.values()]
        loop_time = self._loop.time() if self._loop is not None else 0.0
        return PoolStatus(
            size=self.settings.size,
            spares=self.settings.spares,
            closed=self.closed,
            starting=states.count(ExecutorState.STARTING),
            idle=states.count(ExecutorState.IDLE),
            busy=states.count(ExecutorState.BUSY),
            stopping=states.count(ExecutorState.KILLED) + states.count(ExecutorState.DEAD),
            writes_done=writes_done,
            kills=self._kills,
            deaths=self._deaths,
            recycles=self._recycles,
            aside=self._aside,
            start_failures=self._backoff.failures,
            failure_streak=self._backoff.streak,
            backoff_seconds=self._backoff.remaining(loop_time),
            problem=self._problem,
            cds_archive=self.archive.in_use(),
            started=self.started,
        )

    def pids(self) -> list[int]:
        """Every process owned now: executors (including those being killed) and the archive
        builder; their JVMs and workers are their descendants."""
        return [ex.pid for ex in self._executors.values()] + self.archive.pids()

    # -- events from executors --------------------------------------------------------------

    def _on_message(self, ex: ExecutorProcess, msg: protocol.Message) -> None:
        if isinstance(msg, protocol.Ready) and ex.state is ExecutorState.STARTING:
            ex.startup_seconds = time.monotonic() - ex.started_mono  # spawn → ready
            ex.java_pid = msg.java_pid
            ex.state = ExecutorState.IDLE
            self._backoff.succeeded()
            self._problem = None
            self.archive.executor_ready(ex, msg.archive_mapped)
            log.info(
                "executor %d ready in %.1f s%s",
                ex.ident,
                ex.startup_seconds,
                "" if ex.spark else " (no SparkSession: pyarrow only)",
            )
            if self.formats.lacks(ex):  # not expected: starting ones are recycled when formats grow
                self.formats.replace(ex)
            else:
                self._idle.append(ex)
                self.owner.executor_ready(ex)  # a waiting write takes it before others spawn
            self._fill()
        elif isinstance(msg, protocol.StartFailed):
            ex.reason = msg.message.strip().splitlines()[-1] if msg.message.strip() else "?"
            log.error("executor %d failed to start:\n%s", ex.ident, msg.message)
        elif isinstance(msg, protocol.Accepted | protocol.Done | protocol.Failed):
            self.owner.executor_message(ex, msg)
        self.notify()

    def _on_exit(self, ex: ExecutorProcess) -> None:
        """The executor ended without the pool killing it."""
        how = ex.exit_description()
        if ex.state is ExecutorState.STARTING:
            self._start_failed(f"executor pid {ex.pid} exited during start-up ({how}): {ex.reason}")
            self.archive.start_failed(ex)
        else:
            self._deaths += 1
            if ex.state is ExecutorState.IDLE:
                self._start_failed(f"idle executor pid {ex.pid} died ({how})")
        task = f" while writing for task {ex.task_id}" if ex.task_id else ""
        self.owner.executor_lost(ex, ExecutorDied(f"executor pid {ex.pid} died{task}: {how}"))
        ex.state = ExecutorState.DEAD
        ex.reason = f"died: {how}"
        self.retire(ex)

    # -- kill and reap ----------------------------------------------------------------------

    def kill(
        self, ex: ExecutorProcess, reason: str, *, counts_death: bool = False
    ) -> asyncio.Task[KillReport]:
        if not ex.terminating:
            if counts_death:
                self._deaths += 1  # it broke or stopped answering: a death, not a deadline
            else:
                self._kills += 1
            ex.state = ExecutorState.KILLED
            ex.reason = reason
            log.warning("killing executor %d (pid %d): %s", ex.ident, ex.pid, reason)
        return self.retire(ex)

    def recycle(
        self, ex: ExecutorProcess, reason: str, *, when: str | None = None
    ) -> asyncio.Task[KillReport]:
        """Replace ``ex`` after a write that failed in a way that may leave state behind in its
        session: a failed Spark job's JVM keeps its open files (staged files the sink then
        deletes keep their disk space while the JVM holds them). Not a kill for a deadline nor
        a death: counted as ``recycles``, logged at INFO, recorded in ``events``. Also used for
        an executor whose session lacks a table format the pool loads (``when`` says so)."""
        if not ex.terminating:
            self._recycles += 1
            ex.state = ExecutorState.KILLED
            ex.reason = reason
            self.events.recycled(ex.ident, ex.pid, ex.task_id, reason, when=when)
        return self.retire(ex)

    def retire(self, ex: ExecutorProcess) -> asyncio.Task[KillReport]:
        """Kill what is left of ``ex``'s tree, reap it, then let a replacement start."""
        with contextlib.suppress(ValueError):
            self._idle.remove(ex)
        first = not ex.terminating
        task = ex.terminate(self._threads, self.settings.kill_timeout)
        if first:
            task.add_done_callback(partial(self._gone, ex))
        self.notify()
        return task

    def _gone(self, ex: ExecutorProcess, task: asyncio.Task[KillReport]) -> None:
        # Runs before the task id's gate opens (``TaskGates.leave`` hooks the same kill task
        # later), so the reap is recorded before any next lease for the task.
        self._executors.pop(ex.ident, None)
        if task.cancelled() or task.exception() is not None:
            why = "cancelled" if task.cancelled() else repr(task.exception())
            self.events.reap_failed(ex.ident, ex.pid, ex.task_id, f"the kill did not end: {why}")
        else:
            report = task.result()
            if report.leftovers:
                self._problem = f"processes still running after kill: {list(report.leftovers)}"
                self.events.reap_failed(ex.ident, ex.pid, ex.task_id, self._problem)
                log.error("executor %d: %s", ex.ident, self._problem)
            else:
                self.events.reaped(ex.ident, ex.pid, ex.task_id, report.describe())
        self.notify()
        self._fill()

    # -- monitoring -------------------------------------------------------------------------

    async def _monitor(self) -> None:
        loop = self.running_loop()
        next_sample = 0.0
        while not self.closed:
            await asyncio.sleep(self.settings.heartbeat_interval)
            now = time.monotonic()
            for ex in list(self._executors.values()):
                if ex.terminating:
                    continue
                age = now - ex.started_mono
                if ex.state is ExecutorState.STARTING and age > self.settings.start_timeout:
                    self._start_failed(
                        f"executor pid {ex.pid} not ready after {self.settings.start_timeout:g} s"
                    )
                    self.kill(ex, "start-up timed out")
                elif (
                    ex.state is ExecutorState.IDLE
                    and now - ex.last_heartbeat > self.settings.heartbeat_timeout
                ):
                    self._start_failed(f"idle executor pid {ex.pid} stopped sending heartbeats")
                    self.kill(ex, "no heartbeat", counts_death=True)
            if now >= next_sample:
                next_sample = now + self.settings.sample_interval
                procs = await loop.run_in_executor(self._threads, process.scan)
                for ex in self._executors.values():
                    ex.update_tree(procs)

    def notify(self) -> None:
        self._changed.set()

    async def wait_changed(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def all_ready(self) -> bool:
        """Every executor the pool keeps is ready (``ArchiveKeeper`` builds only then)."""
        return self._ready_count() >= self.settings.target

    def _ready_count(self) -> int:
        return sum(
            1
            for ex in self._executors.values()
            if ex.state in (ExecutorState.IDLE, ExecutorState.BUSY) and not ex.terminating
        )

    def _starting_count(self) -> int:
        return sum(
            1
            for ex in self._executors.values()
            if ex.state is ExecutorState.STARTING and not ex.terminating
        )

    # -- shutdown ---------------------------------------------------------------------------

    async def stop_everything(self, error: ExecutorError) -> None:
        """Kill every executor (and the archive builder), wait for the reaps, clean up."""
        self._backoff.cancel()
        if self._shed_later is not None:
            self._shed_later.cancel()
        self.replacing = False
        kills: list[asyncio.Task[KillReport]] = []
        for ex in list(self._executors.values()):
            self.owner.executor_lost(ex, error)
            if ex.terminating:
                kills.append(self.retire(ex))
            elif ex.state is ExecutorState.BUSY:
                # A write still running after the graceful wait: that one is news.
                kills.append(self.kill(ex, "pool closed during a write"))
            else:
                # Idle or starting: ending it is what closing the pool means, not a warning.
                ex.state = ExecutorState.KILLED
                ex.reason = "pool closed"
                log.info("stopping executor %d (pid %d): the pool is closing", ex.ident, ex.pid)
                kills.append(self.retire(ex))
        ending: list[Awaitable[object]] = [*kills, self.archive.stop()]
        if self._monitoring is not None:
            self._monitoring.cancel()
            ending.append(self._monitoring)
        await asyncio.gather(*ending, return_exceptions=True)
        loop = self.running_loop()
        await loop.run_in_executor(self._threads, self._launcher.close)
        self._threads.shutdown(wait=False)
        self.io_threads.shutdown(wait=False)
