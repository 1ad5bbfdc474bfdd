"""What Connect calls the Worker: the connectors and tasks running on this process.

Both herders drive one ``Worker``: the standalone herder with what its files and the REST API
say (``daemon.runtime.standalone``), the distributed herder with what the group assigned this
process and the config log holds (``daemon.runtime.distributed``). The worker holds the
``RuntimeEnv`` its connectors share and a ``ConnectorSet``:

- one ``ConnectorRuntime`` per connector name; a name is added or removed under the set's
  lock, and every change to one connector holds that connector's own lock
  (``ConnectorRuntime.lock``), so a REST restart, a reload and a rebalance never interleave on
  it while different connectors change in parallel;
- a connector is removed from the set only once the stop sequence confirmed every task of it
  reaped: a ``StopFailed`` leaves it in (its tasks are suspected zombies) and propagates.

``reconcile`` (distributed mode) brings the work here to exactly what the config log says for
exactly what the group assigned: connectors and tasks that moved away or were deleted go
through the stop sequence, new ones start, a changed configuration restarts the tasks it
concerns, a changed target state pauses, resumes or stops. It is idempotent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

from daemon.cluster import Allocation
from daemon.errors import ConnectdError, ConnectorExists, ConnectorNotFound
from daemon.runtime.connector import ConnectorRuntime
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.model import Stall, State, TargetState
from daemon.storage.kafka import ConfigSnapshot
from daemon.structs import TaskId

log = logging.getLogger("connectd.worker")

#: A reported state and its trace.
Reported = tuple[State, str | None]


@dataclass(frozen=True)
class Placement:
    """Distributed mode: whether the connector instance runs here, which of its tasks do, and
    the task configurations the config log holds (standalone runs the instance and every task,
    with the configurations the instance generates)."""

    runs_instance: bool
    tasks: frozenset[int] = frozenset()
    task_configs: list[dict[str, str]] = field(default_factory=list)


class ConnectorSet:
    """The connectors of one worker by name (see the module docstring for the locks)."""

    def __init__(self) -> None:
        self._runtimes: dict[str, ConnectorRuntime] = {}
        self.lock = asyncio.Lock()  # guards the set of names

    def get(self, name: str) -> ConnectorRuntime | None:
        return self._runtimes.get(name)

    def __getitem__(self, name: str) -> ConnectorRuntime:
        try:
            return self._runtimes[name]
        except KeyError:
            raise ConnectorNotFound(f"Connector {name} not found") from None

    def __contains__(self, name: object) -> bool:
        return name in self._runtimes

    def __iter__(self) -> Iterator[ConnectorRuntime]:
        return iter(list(self._runtimes.values()))

    def __len__(self) -> int:
        return len(self._runtimes)

    def names(self) -> list[str]:
        return sorted(self._runtimes)

    def add(self, runtime: ConnectorRuntime) -> None:
        """Callers hold ``lock``; ``ConnectorExists`` if the name is taken."""
        if runtime.name in self._runtimes:
            raise ConnectorExists(f"Connector {runtime.name} already exists")
        self._runtimes[runtime.name] = runtime

    def discard(self, runtime: ConnectorRuntime) -> None:
        """Forget ``runtime`` if it is still the one under its name."""
        if self._runtimes.get(runtime.name) is runtime:
            del self._runtimes[runtime.name]


class Worker:
    """The connectors and tasks on this process (see the module docstring)."""

    def __init__(self, env: RuntimeEnv) -> None:
        self.env = env
        self.connectors = ConnectorSet()

    # ---- reading ----

    def get(self, name: str) -> ConnectorRuntime | None:
        return self.connectors.get(name)

    def runs_task(self, task: TaskId) -> bool:
        rt = self.connectors.get(task.connector)
        return rt is not None and task.task in rt.slots

    # ---- changing ----

    async def add(
        self,
        name: str,
        config: Mapping[str, str],
        target: TargetState,
        placement: Placement | None = None,
        *,
        start: bool = True,
    ) -> ConnectorRuntime:
        """A new connector, brought to ``target`` unless ``start`` is false (then ``start``
        it later, under its lock). ``ConnectorExists`` if the name is taken."""
        runtime = ConnectorRuntime(name, config, target, self.env)
        if placement is not None:
            runtime.runs_instance = placement.runs_instance
            runtime.only_tasks = placement.tasks
            runtime.given_task_configs = [dict(c) for c in placement.task_configs]
        async with self.connectors.lock:
            self.connectors.add(runtime)
        if start:
            await self.start(runtime)
        return runtime

    @staticmethod
    async def start(runtime: ConnectorRuntime) -> None:
        async with runtime.lock:
            await runtime.start()

    async def remove(
        self,
        name: str,
        reason: str,
        *,
        forget: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """The connector's tasks through the stop sequence, then the instance; then ``forget``
        (the standalone herder deletes its stored config) and the name is free. ``StopFailed``
        (a task not confirmed reaped) keeps it."""
        runtime = self.connectors.get(name)
        if runtime is None:  # removed meanwhile
            return
        async with runtime.lock:
            await runtime.shutdown(reason)
            if forget is not None:
                await forget()
            async with self.connectors.lock:
                self.connectors.discard(runtime)

    async def stop_all(self, reason: str) -> None:
        """Every connector and task here through the stop sequence, in parallel (membership
        lost, the daemon's exit). A connector whose stop failed stays and is logged."""
        names = [rt.name for rt in self.connectors]
        results = await asyncio.gather(
            *(self.remove(name, reason) for name in names), return_exceptions=True
        )
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                log.error("Connector %s: stopping its work here failed: %s", name, result)

    # ---- distributed mode ----

    async def reconcile(self, snapshot: ConfigSnapshot, running: Allocation) -> None:
        """This worker's work made exactly ``running`` as ``snapshot`` configures it."""
        wanted: dict[str, tuple[bool, frozenset[int]]] = {}
        for name in running.connectors:
            wanted[name] = (True, frozenset())
        for task in running.tasks:
            here, tasks = wanted.get(task.connector, (False, frozenset()))
            wanted[task.connector] = (here, tasks | {task.task})
        gone = [
            rt.name
            for rt in self.connectors
            if rt.name not in wanted or rt.name not in snapshot.connectors
        ]
        await asyncio.gather(*(self._unassign(n) for n in gone))
        changes = [
            self._place(name, snapshot, Placement(here, tasks, snapshot_tasks(snapshot, name)))
            for name, (here, tasks) in sorted(wanted.items())
            if name in snapshot.connectors
        ]
        await asyncio.gather(*changes)

    async def _unassign(self, name: str) -> None:
        try:
            await self.remove(name, "it is no longer assigned to this worker")
        except ConnectdError as exc:  # kept: retried at the next reconcile
            log.error("Connector %s: stopping its work here failed: %s", name, exc)

    async def _place(self, name: str, snapshot: ConfigSnapshot, placement: Placement) -> None:
        config = dict(snapshot.connectors[name])
        target = snapshot.target_state(name)
        rt = self.connectors.get(name)
        if rt is None:
            await self.add(name, config, target, placement)
            return
        async with rt.lock:
            try:
                if rt.config != config:
                    rt.runs_instance, rt.only_tasks = placement.runs_instance, placement.tasks
                    rt.given_task_configs = [dict(c) for c in placement.task_configs]
                    rt.target = target
                    await rt.reconfigure(config)
                    return
                if rt.target is not target:
                    await rt.set_target(target)
                await rt.place(placement.runs_instance, placement.tasks, placement.task_configs)
            except ConnectdError as exc:
                log.error("Connector %s: applying the assignment failed: %s", name, exc)

    def stalls(self) -> list[tuple[str, int, Stall]]:
        """The stalled tasks here (connector, task, stall), by name and index."""
        out: list[tuple[str, int, Stall]] = []
        for rt in sorted(self.connectors, key=lambda rt: rt.name):
            for index in sorted(rt.slots):
                stall = rt.slots[index].stall()
                if stall is not None:
                    out.append((rt.name, index, stall))
        return out

    def reported(self) -> tuple[dict[str, Reported], dict[TaskId, Reported]]:
        """The states to publish: each connector whose instance runs here, each task here."""
        connectors: dict[str, Reported] = {}
        tasks: dict[TaskId, Reported] = {}
        for rt in self.connectors:
            if rt.runs_instance:
                status = rt.status("")
                connectors[rt.name] = (status.state, status.trace)
            for index, slot in rt.slots.items():
                st = slot.status("")
                tasks[TaskId(rt.name, index)] = (st.state, st.trace)
        return connectors, tasks


def snapshot_tasks(snapshot: ConfigSnapshot, name: str) -> list[dict[str, str]]:
    return [dict(c) for c in snapshot.tasks(name)]


__all__ = ["ConnectorSet", "Placement", "Worker"]
