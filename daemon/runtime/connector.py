"""One connector on this worker: its configuration, target state, connector instance and tasks.

Transitions follow Connect: RUNNING ⇄ PAUSED (tasks keep their partitions, fetch nothing);
STOPPED (tasks shut down through the stop sequence, task configurations dropped, the connector
instance stopped); a reconfiguration or restart stops every affected task through the stop
sequence before a new incarnation (with a new epoch) starts. The connector's own callbacks
(``start``, ``task_configs``, ``stop``) run under deadlines; their failure makes the connector
FAILED with the trace kept, never the worker, and the connector's ``AutoRestarter`` restarts it
on the same schedule and rules as a task (``daemon.runtime.slot.autorestart``).
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Mapping
from typing import Any

from daemon.config import parse_connector, resolve
from daemon.connectors.api import SinkConnector, TaskId
from daemon.errors import ConfigError, InvalidConfig, StopFailed
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.incarnation import Incarnation
from daemon.runtime.instance import InstanceContext, TaskReconfigurations
from daemon.runtime.model import ConnectorStatus, State, TargetState, TaskStatus
from daemon.runtime.slot import AutoRestarter, Freshness, RestartPolicy, SlotRecorder, TaskSlot

log = logging.getLogger("connectd.worker")

CONNECTOR_CALL_TIMEOUT = 60.0
#: Task starts of one connector under way at once (``ConnectorRuntime._start_tasks``), and how
#: long one that has not settled holds its place.
STARTS_AT_ONCE = 8
START_GATE_HOLD = 1.0


def unresolve(
    task: Mapping[str, str], raw: Mapping[str, str], resolved: Mapping[str, str]
) -> dict[str, str]:
    """A task configuration with resolved secrets put back as their ``${...}`` references, so
    what is shown and stored never holds a secret (tasks resolve again when they start)."""
    out = dict(task)
    for key, value in task.items():
        if key in raw and raw[key] != resolved.get(key) and resolved.get(key) == value:
            out[key] = raw[key]
    return out


class ConnectorRuntime:
    def __init__(
        self, name: str, config: Mapping[str, str], target: TargetState, env: RuntimeEnv
    ) -> None:
        self.name = name
        self.config = dict(config)
        self.target = target
        self.env = env
        self.instance: SinkConnector | None = None
        self.task_configs: list[dict[str, str]] = []
        self.slots: dict[int, TaskSlot] = {}
        self.trace: str | None = None
        self.topics: set[str] = set()
        self._restarting = False
        self._started = False
        self._halted = False  # shut down (deleted, worker stopping): no automatic restart
        self.auto = AutoRestarter(
            f"Connector {name}", f"POST /connectors/{name}/restart", self._policy(), env.clock
        )
        self.lock = asyncio.Lock()  # one operation on this connector at a time
        # Distributed mode (``place``): whether the connector instance runs on this worker,
        # which of its tasks do, and the task configurations the config log holds. Standalone
        # runs the instance and every task, with the configurations the instance generates.
        self.runs_instance = True
        self.only_tasks: frozenset[int] | None = None
        self.given_task_configs: list[dict[str, str]] | None = None
        self._context: InstanceContext | None = None  # the running instance's
        self.reconfigurations = TaskReconfigurations(name, self._reconfigure_tasks)

    # ---- lifecycle (callers hold self.lock) ----

    async def start(self) -> None:
        """Bring the connector to its target state (from nothing running)."""
        self._started = True
        self._halted = False
        if self.target is TargetState.STOPPED:
            log.info("Connector %s is STOPPED: no tasks", self.name)
            return
        if await self._start_instance():
            await self._start_tasks()

    async def _start_instance(self) -> bool:
        self.trace = None
        if not self.runs_instance:  # distributed: another worker runs it; tasks from the log
            self.task_configs = [dict(c) for c in self.given_task_configs or ()]
            return True
        context = InstanceContext(self, asyncio.get_running_loop())
        try:
            async with asyncio.timeout(CONNECTOR_CALL_TIMEOUT):
                resolved = await asyncio.to_thread(resolve, self.config, self.env.providers)
                cls = self.env.registry.resolve(self.config["connector.class"])
                instance = cls()
                instance.initialize(context)
                await instance.start(resolved)
                tasks_max = self.env.registry.checks.tasks_max(resolved)
                configs = self.env.registry.checks.generated(
                    self.name, list(instance.task_configs(tasks_max)), resolved
                )
        except Exception as exc:
            self._record_startup(ok=False)
            context.closed = True
            self.trace = traceback.format_exc()
            log.error("Connector %s failed to start:\n%s", self.name, self.trace.rstrip())
            if not self._halted:
                self.auto.failed(exc, self._auto_restart)
            return False
        self.instance = instance
        self._context = context
        if self.given_task_configs is not None:
            self.task_configs = [dict(c) for c in self.given_task_configs]
        else:
            self.task_configs = [unresolve(c, self.config, resolved) for c in configs]
        self.auto.running()
        self._record_startup(ok=True)
        log.info("Connector %s started with %d task(s)", self.name, len(configs))
        return True

    def _record_startup(self, *, ok: bool) -> None:
        recorder: Any = getattr(self.env.metrics, "record_startup", None)
        if recorder is not None:
            recorder("connector", ok)

    async def _auto_restart(self) -> None:
        async with self.lock:
            # Still the failure this restart was scheduled for (not stopped, deleted, fixed)?
            if self._halted or self.target is TargetState.STOPPED or self.instance is not None:
                return
            self.auto.begin()
            counter: Any = getattr(self.env.metrics, "connector_restarted", None)
            if counter is not None:
                counter(self.name, "auto")
            await self._restart(include_tasks=False, only_failed=True)

    def _make(self, index: int, policy: RestartPolicy) -> TaskSlot:
        task_id = TaskId(self.name, index)
        env = self.env
        cls: type[SinkConnector] | None = None
        if self.instance is not None:
            cls = type(self.instance)
        elif not self.runs_instance:  # distributed: the class named by the config log's config
            cls = env.registry.resolve(self.config["connector.class"])
        if cls is not None and cls.needs_executors:
            # executor.pool.start=auto: they start with the first such task
            env.executors_needed(cls.executor_formats, spark=cls.executor_spark(self.config))

        # The task's freshness outlives its incarnations; each reports through the recorder.
        freshness = Freshness()
        recorder = SlotRecorder(freshness, env.metrics)

        async def draw_epoch(floor: int = 1) -> int:
            return await env.epochs.next_epoch_async(task_id.connector, floor=floor)

        def make(epoch: int) -> Incarnation:
            if cls is None:
                raise RuntimeError(f"connector {self.name} has no running instance")
            return Incarnation(
                task_id,
                epoch,
                worker=env.worker,
                connector_config=self.config,
                task_config=self.task_configs[index],
                task_class=cls().task_class(),
                executors=env.executors,
                providers=env.providers,
                settings=env.settings,
                paused=self.target is TargetState.PAUSED,
                metrics=recorder,
                draw_epoch=draw_epoch,
                outages=env.outages,
            )

        return TaskSlot(
            task_id,
            make=make,
            epochs=env.epochs,
            executors=env.executors,
            graceful_timeout=env.graceful_timeout,
            kill_timeout=env.kill_timeout,
            epoch_timeout=env.settings.epoch_timeout,
            policy=policy,
            metrics=env.metrics,
            clock=env.clock,
            freshness=freshness,
            stall_warn=env.settings.stall_warn,
        )

    def _policy(self) -> RestartPolicy:
        """``errors.restart.*``: the connector's own keys over the worker's."""
        try:
            parsed = parse_connector(self.config).config
        except InvalidConfig:  # a reference in errors.restart.*: the defaults until resolved
            return RestartPolicy()
        return RestartPolicy.from_configs(self.env.worker, parsed, given=self.config.keys())

    async def _start_tasks(self) -> None:
        """Make and start the tasks that should run here and do not, ``STARTS_AT_ONCE`` at a
        time: each start is a burst of work on the loop (the incarnation's configuration, its
        pipeline, the task's ``start``, its consumer), and hundreds at once would hold the loop,
        the REST API and the watchdog for as long. A start that has not settled within
        ``START_GATE_HOLD`` (a slow ``start``, a broker that does not answer) lets the next one
        begin and goes on by itself."""
        policy = self._policy()  # parsed once: one connector config for all its tasks
        for i in range(len(self.task_configs)):
            if i not in self.slots and (self.only_tasks is None or i in self.only_tasks):
                self.slots[i] = self._make(i, policy)
                if i % STARTS_AT_ONCE == STARTS_AT_ONCE - 1:
                    await asyncio.sleep(0)  # let the loop breathe between batches of slots
        gate = asyncio.Semaphore(STARTS_AT_ONCE)

        async def start(slot: TaskSlot) -> None:
            async with gate:
                if slot.live:
                    return
                starting = asyncio.ensure_future(slot.start())
                try:
                    await asyncio.wait([starting], timeout=START_GATE_HOLD)
                except asyncio.CancelledError:
                    starting.cancel()
                    raise
            await starting

        await asyncio.gather(*(start(s) for s in list(self.slots.values())), return_exceptions=True)

    async def stop_tasks(self, reason: str) -> None:
        """Every task through the stop sequence, in parallel. Tasks whose reap could not be
        confirmed stay (as suspected zombies) and ``StopFailed`` is raised."""
        slots = list(self.slots.items())
        # Begun a few at a time: each stop's first step is work on the loop, and hundreds in
        # the same turn of it would hold it as long (they still run side by side after that).
        stops: list[asyncio.Future[Any]] = []
        try:
            for n, (_, slot) in enumerate(slots, 1):
                stops.append(asyncio.ensure_future(slot.stop(reason)))
                if n % STARTS_AT_ONCE == 0:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            for stop in stops:
                stop.cancel()
            raise
        results = await asyncio.gather(*stops, return_exceptions=True)
        outcomes = list(zip(slots, results, strict=True))
        failed: list[StopFailed] = []
        # Settled a few at a time as well (forgetting a task's metric series is work on the
        # loop); cancelled meanwhile, the rest at once: no stopped task stays as a slot.
        settled = 0
        try:
            for (index, slot), result in outcomes:
                self._stopped(index, slot, result, failed)
                settled += 1
                if settled % STARTS_AT_ONCE == 0:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            for (index, slot), result in outcomes[settled:]:
                self._stopped(index, slot, result, failed)
            raise
        if failed:
            raise failed[0]

    def _stopped(
        self, index: int, slot: TaskSlot, result: object, failed: list[StopFailed]
    ) -> None:
        """A task's stop has ended with ``result``: its slot dropped, or its failure kept."""
        self._collect_topics(slot)
        if isinstance(result, StopFailed):
            failed.append(result)
        elif isinstance(result, BaseException):
            log.error("Stopping task %s failed: %r", slot.id, result)
            failed.append(StopFailed(f"stopping task {slot.id} failed: {result!r}"))
        else:
            self._drop_slot(index)

    def _drop_slot(self, index: int) -> None:
        """Forget a stopped task: its slot, and its metric series (as Connect removes a
        stopped task's metrics group), so a deleted connector or a shrunk one leaves no stale
        lag or counters on /metrics; a task started again at that index begins anew."""
        del self.slots[index]
        forget: Any = getattr(self.env.metrics, "forget_task", None)
        if forget is not None:
            try:
                forget(self.name, index)
            except Exception:  # metrics never fail the runtime
                log.exception("forgetting the metrics of task %s-%d failed", self.name, index)

    async def _stop_instance(self) -> None:
        instance, self.instance = self.instance, None
        if self._context is not None:
            self._context.closed = True  # its requests change nothing from now on
            self._context = None
        self.reconfigurations.cancel()
        if instance is None:
            return
        try:
            async with asyncio.timeout(CONNECTOR_CALL_TIMEOUT):
                await instance.stop()
        except Exception as exc:
            log.error("Connector %s: stop() failed: %r", self.name, exc)

    async def shutdown(self, reason: str) -> None:
        """Tasks through the stop sequence, then the connector instance."""
        self._halted = True
        self.auto.cancel()
        try:
            await self.stop_tasks(reason)
        finally:
            await self._stop_instance()

    async def reconfigure(self, config: Mapping[str, str]) -> None:
        await self.shutdown("its configuration changed")
        self.config = dict(config)
        self.task_configs = []
        self.auto.reset()
        self.auto.policy = self._policy()
        await self.start()

    async def set_target(self, target: TargetState) -> None:
        """Pause, resume or stop, as ``target`` says."""
        if target is TargetState.PAUSED:
            await self.pause()
        elif target is TargetState.STOPPED:
            await self.stop()
        else:
            await self.resume()

    async def pause(self) -> None:
        self.target = TargetState.PAUSED
        for slot in self.slots.values():
            slot.set_paused(True)

    async def resume(self) -> None:
        was = self.target
        self.target = TargetState.RUNNING
        if was is TargetState.STOPPED or (self.instance is None and self.runs_instance):
            await self.start()
            return
        for slot in self.slots.values():
            slot.set_paused(False)

    async def stop(self) -> None:
        self.target = TargetState.STOPPED
        self.auto.cancel()
        await self.shutdown("the connector was stopped")
        self.task_configs = []

    async def restart(self, *, include_tasks: bool, only_failed: bool) -> None:
        """Connect's restart (KIP-745): the connector instance unless ``only_failed`` and it is
        not FAILED; with ``include_tasks``, its tasks too (only FAILED ones if ``only_failed``).
        A restart by hand starts the connector's automatic restart count again."""
        if self.target is TargetState.STOPPED:
            return
        self.auto.reset()
        await self._restart(include_tasks=include_tasks, only_failed=only_failed)

    async def _restart(self, *, include_tasks: bool, only_failed: bool) -> None:
        self._restarting = True
        try:
            if not only_failed or self.instance is None:
                old = list(self.task_configs)
                await self._stop_instance()
                if not await self._start_instance():
                    return
                if self.task_configs != old:
                    await self.stop_tasks("its task configurations changed")
                    await self._start_tasks()
                    return
            if include_tasks:
                picked = [s for s in self.slots.values() if s.failed or not only_failed]
                await asyncio.gather(*(s.restart("restart requested") for s in picked))
            await self._start_tasks()  # tasks that never started (a failed connector's)
        finally:
            self._restarting = False

    async def place(
        self,
        runs_instance: bool,
        tasks: frozenset[int],
        task_configs: list[dict[str, str]],
    ) -> None:
        """Distributed mode: run the instance here or not, and exactly ``tasks`` of
        ``task_configs`` (the config log's). Tasks that moved away go through the stop sequence
        before this returns; a change of task configurations restarts the tasks that stay."""
        if task_configs != self.given_task_configs and self.given_task_configs is not None:
            await self.stop_tasks("its task configurations changed")
        gone = [i for i in self.slots if i not in tasks or i >= len(task_configs)]
        results = await asyncio.gather(
            *(self.slots[i].stop("it was assigned to another worker") for i in gone),
            return_exceptions=True,
        )
        for index, result in zip(gone, results, strict=True):
            self._collect_topics(self.slots[index])
            if isinstance(result, BaseException):
                log.error("Stopping task %s failed: %r", self.slots[index].id, result)
            else:
                self._drop_slot(index)
        if self.runs_instance and not runs_instance:
            self._halted = True
            self.auto.cancel()
            await self._stop_instance()
        self.runs_instance = runs_instance
        self.only_tasks = tasks
        self.given_task_configs = [dict(c) for c in task_configs]
        if self.target is TargetState.STOPPED:
            return
        self._started = True
        self._halted = False
        if (runs_instance and self.instance is None and self.trace is None) or not runs_instance:
            if not await self._start_instance():
                return
        elif runs_instance:
            self.task_configs = [dict(c) for c in task_configs]
        await self._start_tasks()

    async def restart_task(self, index: int) -> None:
        slot = self.slots[index]
        await slot.restart("restart requested")
        self._collect_topics(slot)

    # ---- observing ----

    def _collect_topics(self, slot: TaskSlot) -> None:
        if slot.inc is not None:
            self.topics.update(slot.inc.topics)

    def all_topics(self) -> set[str]:
        for slot in self.slots.values():
            self._collect_topics(slot)
        return set(self.topics)

    @property
    def state(self) -> State:
        if self._restarting:
            return State.RESTARTING
        if self.target is TargetState.STOPPED:
            return State.STOPPED
        if self.trace is not None:
            return State.FAILED
        if self.instance is None:
            return State.UNASSIGNED
        return State.PAUSED if self.target is TargetState.PAUSED else State.RUNNING

    def status(self, worker_id: str) -> ConnectorStatus:
        tasks: tuple[TaskStatus, ...] = ()
        if self.target is not TargetState.STOPPED or self.slots:
            tasks = tuple(self.slots[i].status(worker_id) for i in sorted(self.slots))
        failed = self.state is State.FAILED
        return ConnectorStatus(
            name=self.name,
            state=self.state,
            worker_id=worker_id,
            tasks=tasks,
            trace=self.auto.annotate(self.trace) if failed else None,
            auto_restart=self.auto.status(),
        )

    # ---- what the running instance asks (``InstanceContext``) ----

    def reconfiguration_requested(self, context: InstanceContext) -> None:
        if context is self._context:
            self.reconfigurations.request()

    def instance_failed(self, context: InstanceContext, error: BaseException) -> None:
        if context is self._context:
            asyncio.get_running_loop().create_task(self._instance_failed(context, error))

    async def _instance_failed(self, context: InstanceContext, error: BaseException) -> None:
        """Connect's ``raiseError``: the connector FAILED with ``error``, its instance stopped,
        its restart policy applied; its tasks keep running."""
        async with self.lock:
            if context is not self._context:
                return
            self.trace = "".join(traceback.format_exception(error))
            log.error("Connector %s failed (it raised an error):\n%s", self.name, self.trace)
            await self._stop_instance()
            if not self._halted:
                self.auto.failed(error, self._auto_restart)

    async def _reconfigure_tasks(self) -> None:
        """One round of ``request_task_reconfiguration``: ``task_configs`` again; if they
        differ from those the tasks run with, standalone restarts the tasks with them, and a
        distributed worker sends them to the leader (``env.publish_task_configs``), whose write
        comes back through ``place``. More tasks than ``tasks.max`` allows fail the connector
        (``tasks.max.enforce``); other failures are tried again (``TaskReconfigurations``)."""
        async with self.lock:
            instance, context = self.instance, self._context
            if instance is None or context is None or self._halted:
                return
            if self.target is TargetState.STOPPED:
                return
            async with asyncio.timeout(CONNECTOR_CALL_TIMEOUT):
                resolved = await asyncio.to_thread(resolve, self.config, self.env.providers)
            checks = self.env.registry.checks
            try:
                configs = checks.generated(
                    self.name, list(instance.task_configs(checks.tasks_max(resolved))), resolved
                )
            except ConfigError as exc:
                self.trace = "".join(traceback.format_exception(exc))
                log.error("Connector %s failed: %s", self.name, exc)
                await self._stop_instance()
                return
            new = [unresolve(c, self.config, resolved) for c in configs]
            if new == self.task_configs:
                log.info(
                    "Connector %s asked for task reconfiguration: its %d task configuration(s)"
                    " are unchanged",
                    self.name,
                    len(new),
                )
                return
            changed = f"{len(self.task_configs)} -> {len(new)} task(s)"
            publish = self.env.publish_task_configs
            if publish is None:
                log.info("Connector %s: task configurations changed (%s)", self.name, changed)
                await self.stop_tasks("its task configurations changed")
                self.task_configs = new
                await self._start_tasks()
                return
        log.info(
            "Connector %s: task configurations changed (%s); sending them to the leader",
            self.name,
            changed,
        )
        await publish(self.name, new)

    def task_ids(self) -> tuple[int, ...]:
        return tuple(range(len(self.task_configs)))
