"""A task id across its incarnations: at most one live at any instant, each with a new epoch.

``TaskSlot`` serialises everything that starts or ends an incarnation of its task id (a lock),
sends every end through the stop sequence, and starts a new incarnation only after the old one is
reaped. If the stop sequence cannot confirm the reap (``StopFailed``), the old incarnation stays
in the slot as a suspected zombie: no new one starts until a later attempt confirms it is gone.

An incarnation that fails on its own is restarted by the slot's ``RestartPolicy`` (through the
same stop sequence), and the count and times are in the task's status (``auto_restart``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable

from daemon.connectors.api import TaskId
from daemon.errors import StopFailed
from daemon.runtime.executors import Executors
from daemon.runtime.model import AutoRestart, State, TaskStatus
from daemon.runtime.restart import RestartPolicy
from daemon.runtime.steps import TaskMetrics
from daemon.runtime.stop import StopReport, stop_incarnation
from daemon.runtime.task import Incarnation
from daemon.storage.epochs import EpochStore

log = logging.getLogger("connectd.worker")

#: How long ``start`` waits for a new incarnation's start-up (config, ``start``, consumer).
STARTUP_WAIT = 30.0


def _current() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _iso(wall: float | None) -> str | None:
    if wall is None:
        return None
    return datetime.datetime.fromtimestamp(wall, datetime.UTC).isoformat(timespec="seconds")


class TaskSlot:
    """One task id. ``make(epoch)`` builds an incarnation (not started)."""

    def __init__(
        self,
        task_id: TaskId,
        *,
        make: Callable[[int], Incarnation],
        epochs: EpochStore,
        executors: Executors,
        graceful_timeout: float,
        kill_timeout: float,
        policy: RestartPolicy | None = None,
        metrics: TaskMetrics | None = None,
    ) -> None:
        self.id = task_id
        self.make = make
        self.epochs = epochs
        self.executors = executors
        self.graceful_timeout = graceful_timeout
        self.kill_timeout = kill_timeout
        self.policy = policy or RestartPolicy()
        self.metrics = metrics
        self.inc: Incarnation | None = None
        self.last_report: StopReport | None = None
        self.auto_count = 0
        self.auto_last: float | None = None  # wall-clock time of the last auto-restart
        self.auto_next: float | None = None  # wall-clock time of the scheduled one
        self._stop_failure: StopFailed | None = None
        self._start_failure: str | None = None
        self._restarting = False
        self._halted = False
        self._auto_timer: asyncio.TimerHandle | None = None
        self._auto_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # ---- lifecycle ----

    async def start(self) -> None:
        async with self._lock:
            await self._start()

    async def stop(self, reason: str) -> StopReport | None:
        """End the live incarnation for good (no auto-restart afterwards)."""
        self._halted = True
        self._cancel_auto(including_task=True)
        async with self._lock:
            return await self._stop(reason)

    async def restart(self, reason: str) -> None:
        """Stop (the whole sequence, reap confirmed), then start a new incarnation."""
        self._cancel_auto(including_task=True)
        async with self._lock:
            self._restarting = True
            try:
                await self._stop(reason)
                await self._start()
                self._count_restart("requested")
            finally:
                self._restarting = False

    def _count_restart(self, cause: str) -> None:
        if self.metrics is not None:
            self.metrics.task_restarted(self.id.connector, self.id.task, cause)

    async def _start(self) -> None:
        if self.inc is not None and not self.inc.done:
            raise RuntimeError(f"task {self.id} already has a live incarnation")
        self._halted = False
        try:
            async with asyncio.timeout(30.0):
                epoch = await self.epochs.next_epoch_async(self.id.connector)
            inc = self.make(epoch)
        except Exception as exc:
            self._start_failure = f"{type(exc).__name__}: {exc}"
            log.error("Task %s could not be created: %s", self.id, self._start_failure)
            raise
        self._start_failure = None
        self.inc = inc
        inc.start().add_done_callback(lambda _: self._ended(inc))
        try:
            async with asyncio.timeout(STARTUP_WAIT):
                while not inc.running and not inc.done:
                    await asyncio.sleep(0.01)
        except TimeoutError:
            log.info("Task %s still starting after %g s", self.id, STARTUP_WAIT)

    async def _stop(self, reason: str) -> StopReport | None:
        inc = self.inc
        if inc is None:
            return None
        try:
            report = await stop_incarnation(
                inc,
                graceful_timeout=self.graceful_timeout,
                kill_timeout=self.kill_timeout,
                reason=reason,
            )
        except StopFailed as exc:
            self._stop_failure = exc
            log.error("%s", exc)
            raise
        self._stop_failure = None
        self.last_report = report
        if self.metrics is not None and report.killed_pid is not None:
            self.metrics.executor_killed("task stop")
        return report

    def set_paused(self, paused: bool) -> None:
        if self.inc is not None:
            self.inc.set_paused(paused)

    # ---- auto-restart ----

    def _ended(self, inc: Incarnation) -> None:
        """The coroutine of ``inc`` ended; schedule a restart if it failed on its own."""
        failure = inc.failure
        if inc is not self.inc or failure is None or inc.asked or self._halted:
            return
        ran = time.monotonic() - inc.running_since if inc.running_since is not None else 0.0
        if self.auto_count and ran >= self.policy.healthy_after(self.auto_count, failure):
            self.auto_count = 0
        delay = self.policy.delay(self.auto_count, failure)
        if delay is None:
            log.error(
                "Task %s failed; no automatic restart (%d done, errors.restart.max=%d,"
                " errors.restart.enabled=%s): restart it through the REST API",
                self.id,
                self.auto_count,
                self.policy.max_restarts,
                self.policy.enabled,
            )
            return
        log.info("Task %s failed; restarting it automatically in %.0f s", self.id, delay)
        self.auto_next = time.time() + delay
        loop = asyncio.get_running_loop()
        self._auto_timer = loop.call_later(delay, self._fire, inc)

    def _fire(self, inc: Incarnation) -> None:
        self._auto_timer = None
        self._auto_task = asyncio.get_running_loop().create_task(self._auto_restart(inc))

    async def _auto_restart(self, inc: Incarnation) -> None:
        async with self._lock:
            if self.inc is not inc or self._halted:
                return
            self.auto_count += 1
            self.auto_last, self.auto_next = time.time(), None
            self._restarting = True
            try:
                await self._stop("automatic restart after a failure")
                await self._start()
                self._count_restart("automatic")
            except Exception as exc:
                log.error("Automatic restart of task %s failed: %s", self.id, exc)
            finally:
                self._restarting = False

    def _cancel_auto(self, *, including_task: bool) -> None:
        if self._auto_timer is not None:
            self._auto_timer.cancel()
            self._auto_timer = None
        self.auto_next = None
        task = self._auto_task
        if including_task and task is not None and not task.done() and task is not _current():
            task.cancel()

    # ---- observing ----

    @property
    def live(self) -> bool:
        return self.inc is not None and not self.inc.done

    @property
    def failed(self) -> bool:
        return self.state is State.FAILED

    @property
    def state(self) -> State:
        inc = self.inc
        if self._restarting:
            return State.RESTARTING
        if self._stop_failure is not None or self._start_failure is not None:
            return State.FAILED
        if inc is None:
            return State.UNASSIGNED
        if inc.failure is not None:
            return State.FAILED
        if inc.done:
            return State.UNASSIGNED
        if inc.running:
            return State.PAUSED if inc.paused else State.RUNNING
        return State.UNASSIGNED

    def status(self, worker_id: str) -> TaskStatus:
        inc = self.inc
        state = self.state
        trace = None
        if state is State.FAILED:
            if self._stop_failure is not None:
                trace = f"{type(self._stop_failure).__name__}: {self._stop_failure}"
            elif self._start_failure is not None:
                trace = self._start_failure
            elif inc is not None:
                trace = inc.trace
        auto = None
        if self.auto_count or self.auto_next is not None:
            auto = AutoRestart(self.auto_count, _iso(self.auto_last), _iso(self.auto_next))
        return TaskStatus(
            id=self.id.task,
            state=state,
            worker_id=worker_id,
            trace=trace,
            incarnation=inc.epoch if inc is not None else None,
            executor_pid=self.executors.current_pid(str(self.id)),
            auto_restart=auto,
        )
