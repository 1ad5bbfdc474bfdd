"""A task id across its incarnations: at most one live at any instant, each with a new epoch.

``TaskSlot`` serialises everything that starts or ends an incarnation of its task id (a lock),
sends every end through the stop sequence, and starts a new incarnation only after the old one
is reaped. If the stop sequence cannot confirm the reap (``StopFailed``), the old incarnation
stays in the slot as a suspected zombie: no new one starts until a later attempt confirms it is
gone. That holds for every way in: ``restart`` (and the automatic restart) run the stop sequence
again first, and ``start`` (what a connector calls for slots without a live incarnation) refuses
while the failure stands, also when the old coroutine has ended but its executor was not
confirmed reaped.

An incarnation that fails on its own (or cannot be created) is restarted by the slot's
``AutoRestarter`` (``autorestart.py``) through exactly the path of a restart by hand: the lock,
the stop sequence, a new incarnation. The count and times are in the task's status
(``auto_restart``); a failure that stays says why in its trace.

The slot keeps the task's ``Freshness`` (``daemon.runtime.slot.freshness``) across incarnations;
the status shows it (``freshness``, for ``/metrics``) and, while the task is RUNNING with lag
and no commit for ``task.stall.warn.ms``, ``stalled``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from daemon.connectors.api import TaskId
from daemon.errors import StopFailed
from daemon.runtime.executors import Executors
from daemon.runtime.incarnation.incarnation import Incarnation
from daemon.runtime.model import Stall, State, TaskStatus
from daemon.runtime.settings import TaskMetrics, TaskSettings
from daemon.runtime.slot.autorestart import REAL_CLOCK, AutoRestarter, Clock, RestartPolicy
from daemon.runtime.slot.freshness import Freshness
from daemon.runtime.slot.stop import StopReport, stop_incarnation, suspect_of
from daemon.storage.epochs import Epochs

log = logging.getLogger("connectd.worker")

#: How long ``start`` waits for a new incarnation's start-up (config, ``start``, consumer).
STARTUP_WAIT = 30.0


class TaskSlot:
    """One task id. ``make(epoch)`` builds an incarnation (not started)."""

    def __init__(
        self,
        task_id: TaskId,
        *,
        make: Callable[[int], Incarnation],
        epochs: Epochs,
        executors: Executors,
        graceful_timeout: float,
        kill_timeout: float,
        policy: RestartPolicy | None = None,
        metrics: TaskMetrics | None = None,
        clock: Clock = REAL_CLOCK,
        epoch_timeout: float = TaskSettings.epoch_timeout,
        freshness: Freshness | None = None,
        stall_warn: float = TaskSettings.stall_warn,
    ) -> None:
        self.id = task_id
        self.make = make
        self.epochs = epochs
        self.executors = executors
        self.graceful_timeout = graceful_timeout
        self.kill_timeout = kill_timeout
        self.metrics = metrics
        #: How long drawing a new incarnation's epoch may take (``TaskSettings.epoch_timeout``).
        self.epoch_timeout = epoch_timeout
        #: What the task's incarnations committed against the log (the one ``make`` gives
        #: them through their ``SlotRecorder``), and how long lag may stay uncommitted.
        self.freshness = freshness if freshness is not None else Freshness()
        self.stall_warn = stall_warn
        self.auto = AutoRestarter(
            f"Task {task_id}",
            f"POST /connectors/{task_id.connector}/tasks/{task_id.task}/restart",
            policy or RestartPolicy(),
            clock,
        )
        self.inc: Incarnation | None = None
        self.last_report: StopReport | None = None
        self._stop_failure: StopFailed | None = None
        self._start_failure: str | None = None
        self._restarting = False
        self._halted = False
        self._lock = asyncio.Lock()

    @property
    def policy(self) -> RestartPolicy:
        return self.auto.policy

    # ---- lifecycle ----

    async def start(self) -> None:
        async with self._lock:
            try:
                await self._start()
            except Exception as exc:
                self._creation_failed(exc)
                raise

    async def stop(self, reason: str) -> StopReport | None:
        """End the live incarnation for good (no auto-restart afterwards)."""
        self._halted = True
        self.auto.cancel()
        async with self._lock:
            return await self._stop(reason)

    async def restart(self, reason: str) -> None:
        """Stop (the whole sequence, reap confirmed), then start a new incarnation. A restart
        by hand starts the automatic restart count again."""
        self.auto.reset()
        async with self._lock:
            try:
                await self._restart(reason, "requested")
            except Exception as exc:
                self._creation_failed(exc)
                raise

    async def _restart(self, reason: str, cause: str) -> None:
        """The one restart path (callers hold the lock): by hand and automatic alike.

        A new incarnation starts only after ``_stop`` returned, that is after the stop sequence
        confirmed the old one's executor tree killed and reaped (``stop_incarnation``). If it
        could not, its ``StopFailed`` propagates before ``_start``: no new incarnation starts
        while the old one may still write."""
        self._restarting = True
        try:
            await self._stop(reason)
            await self._start()
            if self.metrics is not None:
                self.metrics.task_restarted(self.id.connector, self.id.task, cause)
        finally:
            self._restarting = False

    async def _start(self) -> None:
        if self.inc is not None and not self.inc.done:
            raise RuntimeError(f"task {self.id} already has a live incarnation")
        if self._stop_failure is not None:
            # The coroutine may have ended while its executor was not confirmed reaped: only a
            # stop sequence that confirms it (``_restart``) clears this.
            raise StopFailed(
                f"task {self.id}: no new incarnation starts while the previous one is not"
                f" confirmed reaped ({self._stop_failure}); a restart retries the reap"
            )
        self._halted = False
        try:
            async with asyncio.timeout(self.epoch_timeout):
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
                await inc.settled.wait()
        except TimeoutError:
            log.info("Task %s still starting after %g s", self.id, STARTUP_WAIT)
        if not inc.done:
            self.auto.running()

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
                suspect=suspect_of(self._stop_failure),
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
            if self.inc.paused and not paused:
                self.freshness.resumed()
            self.inc.set_paused(paused)

    # ---- auto-restart ----

    def _ended(self, inc: Incarnation) -> None:
        """The coroutine of ``inc`` ended; schedule a restart if it failed on its own."""
        failure = inc.failure
        if inc is not self.inc or failure is None or inc.asked or self._halted:
            return
        self.auto.failed(failure, lambda: self._auto_restart(inc))

    def _creation_failed(self, exc: BaseException) -> None:
        """A new incarnation could not be created or its predecessor not reaped."""
        if not self._halted:
            inc = self.inc
            self.auto.failed(exc, lambda: self._auto_restart(inc))

    async def _auto_restart(self, inc: Incarnation | None) -> None:
        async with self._lock:
            # Still the failure this restart was scheduled for (no restart by hand, no stop)?
            if self.inc is not inc or self._halted:
                return
            if self.live and self._stop_failure is None:
                return
            self.auto.begin()
            try:
                await self._restart("automatic restart after a failure", "auto")
            except Exception as exc:
                log.error("Automatic restart of task %s failed: %s", self.id, exc)
                self._creation_failed(exc)

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

    def stall(self) -> Stall | None:
        """The task's stall (lag and no commit for ``task.stall.warn.ms``), without the rest of
        its status: ``GET /health`` asks it of every task."""
        return self._stall(self.state)

    def _stall(self, state: State) -> Stall | None:
        return self.freshness.stall(self.stall_warn) if state is State.RUNNING else None

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
            trace = self.auto.annotate(trace)
        return TaskStatus(
            id=self.id.task,
            state=state,
            worker_id=worker_id,
            trace=trace,
            incarnation=inc.first_epoch if inc is not None else None,
            epoch=inc.epoch if inc is not None else None,
            executor_pid=self.executors.current_pid(str(self.id)),
            auto_restart=self.auto.status(),
            stalled=self._stall(state),
            retrying=inc.retrier.state if inc is not None and state is State.RUNNING else None,
            freshness=self.freshness.snapshot(),
        )
