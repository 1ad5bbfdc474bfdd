"""Keeping executors alive: start, replace with backoff, watch heartbeats, kill and reap.

``Supervisor`` is the half of the pool that deals with processes; ``ExecutorPool`` adds leases
and writes on top. Invariants kept here:

* at most ``size + spares`` executors exist at once, counting the ones being killed: a
  replacement is spawned only after its predecessor's tree is reaped;
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
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from daemon.errors import ExecutorDied, ExecutorError, ExecutorStartFailed, PoolClosed
from daemon.executor import cds, handoff, launch, process, protocol
from daemon.executor.handle import ExecutorProcess
from daemon.executor.info import ExecutorState
from daemon.executor.process import KillReport
from daemon.executor.settings import PoolSettings

log = logging.getLogger("connectd.executor")


class Supervisor:
    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._executors: dict[int, ExecutorProcess] = {}
        self._idle: deque[ExecutorProcess] = deque()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Kills and /proc scans get threads of their own: hand-off writes never delay a kill.
        self._threads = ThreadPoolExecutor(settings.target + 2, "connectd-executor-kill")
        self._io_threads = ThreadPoolExecutor(settings.size + 1, "connectd-executor-io")
        self._started = False
        self._closed = False
        self._changed = asyncio.Event()
        self._background: set[asyncio.Task[object]] = set()
        self._streak = 0
        self._backoff_until = 0.0
        self._backoff_timer: asyncio.TimerHandle | None = None
        self._problem: str | None = None
        self._writes_done = self._kills = self._deaths = self._start_failures = 0
        self._handoff = handoff.ScratchDir(settings.handoff_dir or handoff.default_handoff_root())
        self._work = handoff.ScratchDir(settings.work_dir or handoff.default_work_root())
        self._env: dict[str, str] = {}
        self._output_fd: int | None = None
        self._cds: cds.CdsPlan | None = None
        self._cds_off = not settings.cds or not settings.with_spark
        self._builder: ExecutorProcess | None = None
        self._build_requested = False

    # -- start ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the executors in the background and return at once (they need seconds)."""
        if self._started:
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
        self._changed = asyncio.Event()
        if not process.is_subreaper():
            log.warning(
                "connectd is not a child subreaper: orphans of killed executors go to PID 1;"
                " call daemon.executor.become_subreaper() at start"
            )
        conf = self.settings.session_conf()
        await self._loop.run_in_executor(self._threads, self._prepare_dirs, conf)
        if self._closed:  # closed while the directories were being prepared
            return
        self._env = launch.environment(self.settings)
        if self.settings.log_path is not None:
            self._output_fd = os.open(
                self.settings.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
        self._started = True
        self._fill()
        self._spawn_task(self._monitor())

    def _prepare_dirs(self, conf: dict[str, str]) -> None:
        for scratch in (self._handoff, self._work):
            handoff.sweep_stale(scratch.daemon_dir.parent)
            scratch.create()
        if not self._cds_off:
            self._cds = cds.plan(self.settings.cds_dir, conf)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the executor pool was not started")
        return self._loop

    def _spawn_task(self, coro: Coroutine[Any, Any, object]) -> None:
        task: asyncio.Task[object] = self._running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _spawn(
        self,
        ident: int,
        archive_out: Path | None = None,
        on_exit: Callable[[ExecutorProcess], None] | None = None,
    ) -> ExecutorProcess:
        """Spawn an executor, or with ``archive_out`` the archive builder (``ident`` 0)."""
        java, uses_cds = "", False
        if self._cds is not None and not self._cds_off:
            if archive_out is not None:
                java = self._cds.builder_options(archive_out)
            else:
                java = self._cds.executor_options()
                uses_cds = bool(java)
        work_dir = self._work.path / (f"executor-{ident}" if ident else "cds-builder")
        return ExecutorProcess.spawn(
            ident,
            launch.start_message(self.settings, work_dir, java, archive_out),
            env=self._env,
            work_dir=work_dir,
            uses_cds=uses_cds,
            output_fd=self._output_fd,
            on_message=self._on_message if archive_out is None else lambda ex, msg: None,
            on_exit=on_exit or self._on_exit,
            argv_extra=("--build-archive",) if archive_out is not None else (),
        )

    def _fill(self) -> None:
        """Spawn executors until ``size + spares`` exist, unless backing off."""
        if not self._started or self._closed:
            return
        loop = self._running_loop()
        missing = self.settings.target - len(self._executors)
        if missing <= 0:
            return
        if self._streak and loop.time() < self._backoff_until:
            if self._backoff_timer is None:
                self._backoff_timer = loop.call_at(self._backoff_until, self._backoff_over)
            return
        for _ in range(missing):
            ident = next(self._ids)
            try:
                ex = self._spawn(ident)
            except OSError as exc:
                self._start_failed(f"could not spawn an executor: {exc}")
                self._fill()
                return
            self._executors[ident] = ex
            log.info("executor %d started: pid %d", ident, ex.pid)
        self._notify()

    def _backoff_over(self) -> None:
        self._backoff_timer = None
        self._fill()

    def _start_failed(self, reason: str) -> None:
        self._start_failures += 1
        self._streak += 1
        delay = min(
            self.settings.backoff_initial * 2 ** (self._streak - 1), self.settings.backoff_max
        )
        self._backoff_until = self._running_loop().time() + delay
        self._problem = f"{reason} (failure {self._streak} in a row; next start in {delay:g} s)"
        log.error("executor pool: %s", self._problem)

    # -- observability and readiness ------------------------------------------------------

    async def wait_ready(self, n: int = 1, timeout: float | None = None) -> None:
        """Wait until ``n`` executors are ready (idle or busy). For tests and benchmarks."""
        n = min(n, self.settings.target)
        bound = self.settings.start_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(bound):
                while self._ready_count() < n:
                    if self._closed:
                        raise PoolClosed("the executor pool was closed while waiting for it")
                    await self._wait_changed()
        except TimeoutError:
            raise ExecutorStartFailed(
                f"{self._ready_count()} of {n} executors ready after {bound:g} s"
                + (f"; {self._problem}" if self._problem else "")
            ) from None

    async def build_archive(self) -> Path | None:
        """Build the class-data-sharing archive now if it is missing (waits for the build);
        the archive's path, or None when there is none (no JDK found, disabled, failed)."""
        plan = self._cds
        if plan is None or self._cds_off:
            return None
        if not plan.auto:
            await self._build_archive(plan)
        return plan.archive if plan.ready() else None

    # -- events from executors --------------------------------------------------------------

    def _on_message(self, ex: ExecutorProcess, msg: protocol.Message) -> None:
        if ex is self._builder:
            return
        if isinstance(msg, protocol.Ready) and ex.state is ExecutorState.STARTING:
            ex.startup_seconds = time.monotonic() - ex.started_mono  # spawn → ready
            ex.java_pid = msg.java_pid
            ex.state = ExecutorState.IDLE
            self._streak, self._problem = 0, None
            if self._cds is not None and not ex.uses_cds:
                self._maybe_build_archive()
            log.info("executor %d ready in %.1f s", ex.ident, ex.startup_seconds)
            self._on_ready(ex)
        elif isinstance(msg, protocol.StartFailed):
            ex.reason = msg.message.strip().splitlines()[-1] if msg.message.strip() else "?"
            log.error("executor %d failed to start:\n%s", ex.ident, msg.message)
        elif isinstance(msg, protocol.Accepted):
            if ex.accepted is not None and ex.seq == msg.seq and not ex.accepted.done():
                ex.accepted.set_result(None)
        elif (
            isinstance(msg, protocol.Done | protocol.Failed)
            and ex.outcome is not None
            and ex.seq == msg.seq
            and not ex.outcome.done()
        ):
            ex.outcome.set_result(msg)
        self._notify()

    def _on_exit(self, ex: ExecutorProcess) -> None:
        """The executor ended without the pool killing it."""
        if ex is self._builder:
            return
        how = ex.exit_description()
        if ex.state is ExecutorState.STARTING:
            self._start_failed(f"executor pid {ex.pid} exited during start-up ({how}): {ex.reason}")
            if self._cds is not None and ex.uses_cds:
                self._cds_off = True  # never let a bad archive keep executors from starting
        else:
            self._deaths += 1
            if ex.state is ExecutorState.IDLE:
                self._start_failed(f"idle executor pid {ex.pid} died ({how})")
        task = f" while writing for task {ex.task_id}" if ex.task_id else ""
        self._on_died(ex, ExecutorDied(f"executor pid {ex.pid} died{task}: {how}"))
        ex.state = ExecutorState.DEAD
        ex.reason = f"died: {how}"
        self._retire(ex)

    def _on_died(self, ex: ExecutorProcess, error: ExecutorError) -> None:
        """Fail the executor's write, if any (the pool overrides)."""

    def _on_ready(self, ex: ExecutorProcess) -> None:
        self._idle.append(ex)

    # -- kill and reap ----------------------------------------------------------------------

    def _kill(
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
        return self._retire(ex)

    def _retire(self, ex: ExecutorProcess) -> asyncio.Task[KillReport]:
        """Kill what is left of ``ex``'s tree, reap it, then let a replacement start."""
        with contextlib.suppress(ValueError):
            self._idle.remove(ex)
        first = not ex.terminating
        task = ex.terminate(self._threads, self.settings.kill_timeout)
        if first:
            task.add_done_callback(partial(self._gone, ex))
        self._notify()
        return task

    def _gone(self, ex: ExecutorProcess, task: asyncio.Task[KillReport]) -> None:
        self._executors.pop(ex.ident, None)
        if not task.cancelled() and task.exception() is None:
            report = task.result()
            log.info("executor %d reaped: %s", ex.ident, report)
            if report.leftovers:
                self._problem = f"processes still running after kill: {list(report.leftovers)}"
                log.error("executor %d: %s", ex.ident, self._problem)
        self._notify()
        self._fill()

    # -- monitoring -------------------------------------------------------------------------

    async def _monitor(self) -> None:
        loop = self._running_loop()
        next_sample = 0.0
        while not self._closed:
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
                    self._kill(ex, "start-up timed out")
                elif (
                    ex.state is ExecutorState.IDLE
                    and now - ex.last_heartbeat > self.settings.heartbeat_timeout
                ):
                    self._start_failed(f"idle executor pid {ex.pid} stopped sending heartbeats")
                    self._kill(ex, "no heartbeat", counts_death=True)
            if now >= next_sample:
                next_sample = now + self.settings.sample_interval
                procs = await loop.run_in_executor(self._threads, process.scan)
                for ex in self._executors.values():
                    ex.update_tree(procs)

    def _notify(self) -> None:
        self._changed.set()

    async def _wait_changed(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def _ready_count(self) -> int:
        return sum(
            1
            for ex in self._executors.values()
            if ex.state in (ExecutorState.IDLE, ExecutorState.BUSY) and not ex.terminating
        )

    # -- class-data-sharing archive ---------------------------------------------------------

    def _maybe_build_archive(self) -> None:
        plan = self._cds
        if plan is None or plan.auto or not self.settings.cds_build:
            return
        if self._build_requested or self._closed:
            return
        if self._ready_count() < self.settings.target:
            return  # build once the pool is warm, not while executors compete for the CPU
        self._build_requested = True
        self._spawn_task(self._build_archive(plan))

    async def _build_archive(self, plan: cds.CdsPlan) -> None:
        def start_builder(output: Path, exited: asyncio.Event) -> ExecutorProcess:
            self._builder = self._spawn(0, output, on_exit=lambda ex: exited.set())
            return self._builder

        await cds.build(
            plan,
            start_builder,
            threads=self._threads,
            timeout=self.settings.cds_build_timeout,
            kill_timeout=self.settings.kill_timeout,
        )

    # -- shutdown ---------------------------------------------------------------------------

    async def _stop_everything(self, error: ExecutorError) -> None:
        """Kill every executor (and the archive builder), wait for the reaps, clean up."""
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        kills: list[asyncio.Task[KillReport]] = []
        for ex in list(self._executors.values()):
            self._on_died(ex, error)
            kills.append(self._kill(ex, "pool closed") if not ex.terminating else self._retire(ex))
        if self._builder is not None:
            kills.append(self._builder.terminate(self._threads, self.settings.kill_timeout))
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*kills, *self._background, return_exceptions=True)
        loop = self._running_loop()
        await loop.run_in_executor(self._threads, self._handoff.remove)
        await loop.run_in_executor(self._threads, self._work.remove)
        if self._output_fd is not None:
            os.close(self._output_fd)
            self._output_fd = None
        self._threads.shutdown(wait=False)
        self._io_threads.shutdown(wait=False)
