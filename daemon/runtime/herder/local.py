"""The work one distributed worker runs: the connectors and tasks its assignment gives it.

``reconcile(snapshot, running)`` brings this worker to exactly what the config log says
(``snapshot``) for exactly the work the group assigned it (``running``): connectors and tasks
that moved away or were deleted go through the stop sequence, new ones start, a changed
configuration restarts the tasks it concerns (new incarnations, new epochs), a changed target
state pauses, resumes or stops. It is idempotent: calling it twice with the same arguments
changes nothing the second time. Every change to one connector holds that connector's lock, so
a REST restart and a rebalance never interleave on it.
"""

from __future__ import annotations

import asyncio
import logging

from daemon.cluster import Allocation
from daemon.errors import ConnectdError
from daemon.runtime.connector import ConnectorRuntime, RuntimeEnv
from daemon.runtime.model import State, TargetState
from daemon.storage.kafka import ConfigSnapshot
from daemon.structs import TaskId

log = logging.getLogger("connectd.herder")


class LocalWork:
    def __init__(self, env: RuntimeEnv) -> None:
        self.env = env
        self.runtimes: dict[str, ConnectorRuntime] = {}

    def get(self, name: str) -> ConnectorRuntime | None:
        return self.runtimes.get(name)

    def runs_task(self, task: TaskId) -> bool:
        rt = self.runtimes.get(task.connector)
        return rt is not None and task.task in rt.slots

    async def reconcile(self, snapshot: ConfigSnapshot, running: Allocation) -> None:
        wanted: dict[str, tuple[bool, frozenset[int]]] = {}
        for name in running.connectors:
            wanted[name] = (True, frozenset())
        for task in running.tasks:
            here, tasks = wanted.get(task.connector, (False, frozenset()))
            wanted[task.connector] = (here, tasks | {task.task})
        gone = [n for n in self.runtimes if n not in wanted or n not in snapshot.connectors]
        await asyncio.gather(*(self._remove(n) for n in gone))
        changes = [
            self._place(name, snapshot, here, tasks)
            for name, (here, tasks) in sorted(wanted.items())
            if name in snapshot.connectors
        ]
        await asyncio.gather(*changes)

    async def _remove(
        self, name: str, reason: str = "it is no longer assigned to this worker"
    ) -> None:
        rt = self.runtimes.get(name)
        if rt is None:  # removed meanwhile
            return
        async with rt.lock:
            try:
                await rt.shutdown(reason)
            except ConnectdError as exc:
                log.error("Connector %s: stopping its work here failed: %s", name, exc)
                return  # kept: a task not confirmed reaped is retried at the next reconcile
        if self.runtimes.get(name) is rt:
            del self.runtimes[name]

    async def _place(
        self, name: str, snapshot: ConfigSnapshot, here: bool, tasks: frozenset[int]
    ) -> None:
        config = dict(snapshot.connectors[name])
        target = snapshot.target_state(name)
        task_configs = [dict(c) for c in snapshot.tasks(name)]
        rt = self.runtimes.get(name)
        if rt is None:
            rt = ConnectorRuntime(name, config, target, self.env)
            rt.runs_instance = here
            rt.only_tasks = tasks
            rt.given_task_configs = task_configs
            self.runtimes[name] = rt
            async with rt.lock:
                await rt.start()
            return
        async with rt.lock:
            try:
                if rt.config != config:
                    rt.runs_instance, rt.only_tasks = here, tasks
                    rt.given_task_configs = task_configs
                    rt.target = target
                    await rt.reconfigure(config)
                    return
                if rt.target is not target:
                    await self._set_target(rt, target)
                await rt.place(here, tasks, task_configs)
            except ConnectdError as exc:
                log.error("Connector %s: applying the assignment failed: %s", name, exc)

    @staticmethod
    async def _set_target(rt: ConnectorRuntime, target: TargetState) -> None:
        if target is TargetState.PAUSED:
            await rt.pause()
        elif target is TargetState.STOPPED:
            await rt.stop()
        else:
            await rt.resume()

    async def stop_all(self, reason: str) -> None:
        """Every connector and task here through the stop sequence (membership lost, exit)."""
        await asyncio.gather(*(self._remove(name, reason) for name in list(self.runtimes)))

    def reported(self) -> tuple[dict[str, tuple[State, str | None]], dict[TaskId, Slot]]:
        """The states to publish: each connector whose instance runs here, each task here."""
        connectors: dict[str, tuple[State, str | None]] = {}
        tasks: dict[TaskId, Slot] = {}
        for name, rt in self.runtimes.items():
            if rt.runs_instance:
                status = rt.status("")
                connectors[name] = (status.state, status.trace)
            for index, slot in rt.slots.items():
                st = slot.status("")
                tasks[TaskId(name, index)] = (st.state, st.trace)
        return connectors, tasks


Slot = tuple[State, str | None]
__all__ = ["LocalWork"]
