"""Distributed mode's herder: the REST API's ``Herder``, where every worker answers every call.

Reads come from what this worker has read: connectors, configurations and task configurations
from the config log's snapshot; statuses from the status topic, with the work running here
shown live (executor pid, epochs, freshness). Writes to the config log happen on the leader
only: any other worker forwards them to it (``forward``), and while no leader is known answers
Connect's 409 at once. On the leader every write is one transaction of the config log, read
back before it answers, so a create is applied once or not at all, whatever dies when.

A task restart runs on the worker that runs the task (forwarded there), and returns once the old
incarnation is reaped and the new one started, as in standalone mode.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from daemon.connectors.api import ConnectorRegistry
from daemon.connectors.registry import validate_connector_async
from daemon.errors import (
    Conflict,
    ConnectorExists,
    ConnectorNotFound,
    RemoteError,
    TaskNotFound,
)
from daemon.runtime.distributed.forward import FORWARDED, RETRIED, Forwarder
from daemon.runtime.distributed.leader import SinkOffsets, config_records, task_config_records
from daemon.runtime.distributed.loop import HerderLoop
from daemon.runtime.distributed.writes import ConfigWrites
from daemon.runtime.model import (
    ConnectorInfo,
    ConnectorStatus,
    SinkOffset,
    Stall,
    State,
    TargetState,
    TaskInfo,
    TaskStatus,
    status_workers,
)
from daemon.storage.kafka import configrecords as rec
from daemon.structs import TaskId

log = logging.getLogger("connectd.herder")

#: Bound on a forwarded request (a task restart includes a stop sequence and a start).
FORWARD_TIMEOUT = 90.0
#: Bound on asking an owner for its live status; past it the status topic's answer stands.
LIVE_STATUS_TIMEOUT = 3.0


class DistributedHerder:
    """Implements ``daemon.runtime.model.Herder`` on a ``HerderLoop``."""

    def __init__(self, loop: HerderLoop, registry: ConnectorRegistry) -> None:
        self.loop = loop
        self.registry = registry
        self.env = loop.worker.env
        self.executors = self.env.executors
        self.forwarder = Forwarder(FORWARD_TIMEOUT)
        self._live = Forwarder(LIVE_STATUS_TIMEOUT)
        self.writes = ConfigWrites(loop, self.forwarder)
        loop.put_task_configs = self.put_task_configs
        self._offsets = SinkOffsets(self.env, registry)
        self._ready = False
        self._stopped = False

    # ---- lifecycle ----

    @property
    def worker_id(self) -> str:
        return self.loop.worker_id

    async def start(self, timeout: float) -> None:
        await self.loop.start(timeout)
        self._ready = True

    async def stop(self) -> None:
        self._stopped = True
        await self.loop.stop()
        await self.forwarder.close()
        await self._live.close()

    def is_ready(self) -> bool:
        return self._ready and not self._stopped

    def is_starting(self) -> bool:
        """Until the config log is read; then a write before the first assignment gets
        Connect's 409 (no leader known yet) instead of 503."""
        return not self.loop.loaded and not self._stopped

    async def health_check(self) -> None:
        await asyncio.sleep(0)

    def stalled_tasks(self) -> list[tuple[str, int, Stall]]:
        """Stalls are known where the task runs: this worker's."""
        return self.loop.worker.stalls()

    # ---- reading ----

    def _config(self, name: str) -> Mapping[str, str]:
        try:
            return self.loop.snapshot.connectors[name]
        except KeyError:
            raise ConnectorNotFound(f"Connector {name} not found") from None

    def connector_names(self) -> list[str]:
        return sorted(self.loop.snapshot.connectors)

    def connector_info(self, name: str) -> ConnectorInfo:
        config = self._config(name)
        count = len(self.loop.snapshot.tasks(name))
        return ConnectorInfo(name=name, config=dict(config), tasks=tuple(range(count)))

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._config(name))

    def task_infos(self, name: str) -> list[TaskInfo]:
        self._config(name)
        tasks = self.loop.snapshot.tasks(name)
        return [TaskInfo(name, i, dict(cfg)) for i, cfg in enumerate(tasks)]

    def connector_status(self, name: str) -> ConnectorStatus:
        self._config(name)
        snapshot, statuses = self.loop.snapshot, self.loop.statuses
        rt = self.loop.worker.get(name)
        local = rt.status(self.worker_id) if rt is not None else None
        tasks = tuple(self.task_status(name, i) for i in range(len(snapshot.tasks(name))))
        if local is not None and rt is not None and rt.runs_instance:
            return ConnectorStatus(
                name,
                local.state,
                self.worker_id,
                tasks,
                local.trace,
                auto_restart=local.auto_restart,
            )
        reported = statuses.connectors.get(name)
        stopped = snapshot.target_state(name) is TargetState.STOPPED
        if reported is None:
            state = State.STOPPED if stopped else State.UNASSIGNED
            return ConnectorStatus(name, state, "", tasks)
        return ConnectorStatus(name, reported.state, reported.worker_id, tasks, reported.trace)

    async def live_status(self, name: str, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` (``connector_status(name).to_json()``) with the live fields of the work
        other workers run (incarnation, epoch, executor pid, auto-restart, stall, retries) as
        those workers report them now, so that every worker answers the same, as in Connect.
        An owner that does not answer within ``LIVE_STATUS_TIMEOUT`` leaves the status topic's
        view of its work (its state and trace, the live fields null)."""
        if FORWARDED.get():
            return doc
        owners = sorted(status_workers(doc) - {self.worker_id})
        answers = await asyncio.gather(*(self._owner_status(owner, name) for owner in owners))
        for owner, answer in zip(owners, answers, strict=True):
            if not isinstance(answer, dict):
                continue
            theirs = answer.get("connector")
            ours = doc.get("connector", {}).get("worker_id")
            if isinstance(theirs, dict) and theirs.get("worker_id") == owner == ours:
                doc["connector"] = theirs
            live = {
                t.get("id"): t
                for t in answer.get("tasks", ())
                if isinstance(t, dict) and t.get("worker_id") == owner
            }
            doc["tasks"] = [
                live.get(t.get("id"), t) if t.get("worker_id") == owner else t
                for t in doc.get("tasks", ())
            ]
        return doc

    async def live_task_status(self, name: str, task: int, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` (``task_status(...).to_json()``) as the worker that runs the task reports it
        now (see ``live_status``)."""
        owner = doc.get("worker_id")
        if FORWARDED.get() or not owner or owner == self.worker_id:
            return doc
        answer = await self._owner_status(str(owner), name, task)
        if isinstance(answer, dict) and answer.get("worker_id") == owner:
            return answer
        return doc

    async def _owner_status(self, owner: str, name: str, task: int | None = None) -> Any:
        path = f"/connectors/{_quote(name)}/status"
        if task is not None:
            path = f"/connectors/{_quote(name)}/tasks/{task}/status"
        try:
            _, answer = await self._live.request("GET", f"http://{owner}", path)
        except RemoteError as exc:
            log.debug("Live status of %s from %s: %s", name, owner, exc)
            return None
        return answer

    def task_status(self, name: str, task: int) -> TaskStatus:
        self._config(name)
        if task < 0 or task >= len(self.loop.snapshot.tasks(name)):
            raise TaskNotFound(f"Task {name}-{task} not found")
        rt = self.loop.worker.get(name)
        if rt is not None and task in rt.slots:
            return rt.slots[task].status(self.worker_id)
        reported = self.loop.statuses.tasks.get(TaskId(name, task))
        if reported is None:
            return TaskStatus(task, State.UNASSIGNED, "")
        return TaskStatus(task, reported.state, reported.worker_id, reported.trace)

    def topics(self, name: str) -> list[str]:
        config = self._config(name)
        rt = self.loop.worker.get(name)
        if rt is not None:
            return sorted(rt.all_topics())
        return sorted(t.strip() for t in config.get("topics", "").split(",") if t.strip())

    def cluster(self) -> dict[str, Any]:
        """For ``/metrics`` and STATUS: this member's role and share."""
        h = self.loop
        return {
            "generation": h.role.generation,
            "leader": h.role.leader,
            "rebalances": h.rebalances,
            "rebalance_seconds": h.rebalance_seconds,
            "tasks": len(h.running.tasks),
            "connectors": len(h.running.connectors),
            "config_lag": h.config_lag,
            "rebalancing": h.rebalancing,
            "rebalance_log": tuple(h.rebalance_log),
        }

    # ---- changing ----

    async def create_connector(
        self, name: str, config: Mapping[str, str], initial_state: TargetState = TargetState.RUNNING
    ) -> ConnectorInfo:
        if not self.writes.leading:
            body: dict[str, Any] = {"name": name, "config": dict(config)}
            if initial_state is not TargetState.RUNNING:
                body["initial_state"] = initial_state.value
            try:
                _, answer = await self.writes.forward("POST", "/connectors", body)
            except RemoteError as exc:
                if exc.answered:
                    raise
                answer = await self._create_again(name, config, initial_state, body, exc)
            return _info(answer)
        checked = await validate_connector_async(name, config, self.registry)
        async with self.writes.lock:
            snapshot = await self.loop.sync()
            if name in snapshot.connectors:
                if RETRIED.get() and dict(snapshot.connectors[name]) == checked:
                    return self.connector_info(name)  # the first attempt was applied
                raise ConnectorExists(f"Connector {name} already exists")
            await self.writes.write(await self._config_records(name, checked, initial_state))
        log.info("Connector %s created (target state %s)", name, initial_state.value)
        return self.connector_info(name)

    async def _create_again(
        self,
        name: str,
        config: Mapping[str, str],
        initial_state: TargetState,
        body: dict[str, Any],
        failure: RemoteError,
    ) -> Any:
        """The leader died (or went silent) with a create forwarded to it: its transaction
        committed or it never will (the next leader's writer aborts it). Once a new leader is
        known, the create is sent again marked as a retry: an existing connector with exactly
        this configuration is the first attempt, applied once; anything else is refused."""
        old = self.loop.role
        deadline = asyncio.get_running_loop().time() + self._rebalance_bound()
        while True:
            role = self.loop.role
            if role.generation != old.generation and role.leader_url:
                break
            if asyncio.get_running_loop().time() > deadline:
                raise failure
            await asyncio.sleep(0.1)
        log.warning(
            "Connector %s: the leader %s did not answer the create; sending it again to %s",
            name,
            old.leader_url,
            role.leader_url,
        )
        if role.leader:
            token = RETRIED.set(True)
            try:
                return (await self.create_connector(name, config, initial_state)).to_json()
            finally:
                RETRIED.reset(token)
        _, answer = await self.forwarder.request(
            "POST", role.leader_url, "/connectors", body, retried=True
        )
        await self.writes.read_own_write()
        return answer

    def _rebalance_bound(self) -> float:
        c = self.env.worker
        return 2 * c.session_timeout.total_seconds() + c.rebalance_timeout.total_seconds()

    async def _config_records(
        self, name: str, config: dict[str, str], target: TargetState | None
    ) -> list[tuple[str, bytes | None]]:
        return await config_records(name, config, target, self.registry, self.env.providers)

    async def put_connector_config(
        self, name: str, config: Mapping[str, str], *, origin: object = None
    ) -> tuple[bool, ConnectorInfo]:
        if not self.writes.leading:
            status, answer = await self.forwarder.request(
                "PUT", self.writes.leader_url(), f"/connectors/{_quote(name)}/config", dict(config)
            )
            await self.writes.read_own_write()
            return status == 201, _info(answer)
        checked = await validate_connector_async(name, config, self.registry)
        async with self.writes.lock:
            snapshot = await self.loop.sync()
            created = name not in snapshot.connectors
            if not created and dict(snapshot.connectors[name]) == checked:
                return False, self.connector_info(name)
            target = None if not created else TargetState.RUNNING
            if not created and snapshot.target_state(name) is TargetState.STOPPED:
                target = TargetState.STOPPED  # keeps no tasks
            await self.writes.write(await self._config_records(name, checked, target))
        return created, self.connector_info(name)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Connect's ``POST /connectors/{name}/tasks``: the task configurations the worker
        running the connector generated (``ConnectorContext.request_task_reconfiguration``),
        written by the leader with their commit record unless the log has them already; any
        other worker forwards them to the leader."""
        if not self.writes.leading:
            await self.writes.forward("POST", f"/connectors/{_quote(name)}/tasks", configs)
            return
        async with self.writes.lock:
            snapshot = await self.loop.sync()
            if name not in snapshot.connectors:
                raise ConnectorNotFound(f"Connector {name} not found")
            if snapshot.target_state(name) is TargetState.STOPPED:
                raise Conflict(f"Connector {name} is STOPPED: it has no tasks")
            if [dict(c) for c in snapshot.tasks(name)] == configs:
                return
            await self.writes.write(task_config_records(name, configs))
        log.info("Connector %s: %d task configuration(s) written", name, len(configs))

    async def delete_connector(self, name: str) -> None:
        if not self.writes.leading:
            await self.writes.forward("DELETE", f"/connectors/{_quote(name)}")
            return
        async with self.writes.lock:
            snapshot = await self.loop.sync()
            if name not in snapshot.connectors:
                raise ConnectorNotFound(f"Connector {name} not found")
            count = len(snapshot.tasks(name))
            await self.writes.write(
                [rec.connector_record(name, None), rec.target_state_record(name, None)]
            )
        writer = self.loop.status_writer
        await writer.put_connector(name, None)
        for i in range(count):
            await writer.put_task(TaskId(name, i), None)

    async def _set_target(self, name: str, target: TargetState, verb: str) -> None:
        if not self.writes.leading:
            await self.writes.forward("PUT", f"/connectors/{_quote(name)}/{verb}")
            return
        async with self.writes.lock:
            snapshot = await self.loop.sync()
            config = snapshot.connectors.get(name)
            if config is None:
                raise ConnectorNotFound(f"Connector {name} not found")
            was = snapshot.target_state(name)
            if target is TargetState.STOPPED:  # as Connect: stopped connectors keep no tasks
                records = [rec.target_state_record(name, target), rec.commit_record(name, 0)]
            elif was is TargetState.STOPPED:
                records = await self._config_records(name, dict(config), target)
            else:
                records = [rec.target_state_record(name, target)]
            await self.writes.write(records)

    async def pause_connector(self, name: str) -> None:
        await self._set_target(name, TargetState.PAUSED, "pause")

    async def resume_connector(self, name: str) -> None:
        await self._set_target(name, TargetState.RUNNING, "resume")

    async def stop_connector(self, name: str) -> None:
        await self._set_target(name, TargetState.STOPPED, "stop")

    async def restart_connector(
        self, name: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> ConnectorStatus:
        """Written to the config log as Connect's restart request; every worker restarts its
        part of the connector when it reads it."""
        if not self.writes.leading:
            query = (
                f"?includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
            )
            await self.writes.forward("POST", f"/connectors/{_quote(name)}/restart{query}")
            return self.connector_status(name)
        async with self.writes.lock:
            if name not in (await self.loop.sync()).connectors:
                raise ConnectorNotFound(f"Connector {name} not found")
            record = rec.restart_record(name, include_tasks=include_tasks, only_failed=only_failed)
            await self.writes.write([record])
        return self.connector_status(name)

    async def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """``PUT /admin/loggers/<namespace>?scope=cluster``: Connect's ``logger-cluster-``
        record in the config log (written by the leader, as every config write here); each
        worker applies it when it reads it (``HerderLoop._apply``), this one included."""
        if not self.writes.leading:
            await self.writes.forward(
                "PUT", f"/admin/loggers/{_quote(namespace)}?scope=cluster", {"level": level}
            )
            return
        async with self.writes.lock:
            await self.writes.write([rec.logger_level_record(namespace, level)])

    async def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)  # 404s first
        rt = self.loop.worker.get(name)
        if rt is not None and task in rt.slots:
            async with rt.lock:
                if task in rt.slots:
                    await rt.restart_task(task)
                    return
        if FORWARDED.get():
            raise RemoteError(
                f"Task {name}-{task} does not run on this worker ({self.worker_id}); retry",
                status=409,
            )
        owner = self.loop.statuses.tasks.get(TaskId(name, task))
        if owner is None or not owner.worker_id or owner.worker_id == self.worker_id:
            raise Conflict(
                f"Task {name}-{task} is not assigned to any worker right now (a rebalance is"
                " under way); retry"
            )
        url = f"http://{owner.worker_id}"
        await self.forwarder.request(
            "POST", url, f"/connectors/{_quote(name)}/tasks/{task}/restart"
        )

    async def reset_topics(self, name: str) -> None:
        self._config(name)
        rt = self.loop.worker.get(name)
        if rt is not None:
            rt.topics.clear()

    # ---- offsets (KIP-875): in the sink's table, reachable from any worker ----

    async def get_offsets(self, name: str) -> list[SinkOffset]:
        return await self._offsets.get(name, self._config(name))

    async def alter_offsets(self, name: str, offsets: Sequence[SinkOffset]) -> None:
        await self._offsets.alter(name, self._config(name), self.loop.snapshot, offsets)

    async def reset_offsets(self, name: str) -> None:
        await self._offsets.reset(name, self._config(name), self.loop.snapshot)


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


def _info(answer: Any) -> ConnectorInfo:
    if not isinstance(answer, dict) or not isinstance(answer.get("name"), str):
        raise RemoteError("The leader answered without a connector", status=500)
    tasks = tuple(t["task"] for t in answer.get("tasks", []) if isinstance(t, dict) and "task" in t)
    config = {str(k): str(v) for k, v in (answer.get("config") or {}).items()}
    return ConnectorInfo(name=answer["name"], config=config, tasks=tasks)
