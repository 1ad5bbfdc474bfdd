"""Standalone mode's herder: the REST API's ``Herder`` for one process, its connectors from
the command line's files and from REST, kept in a local ``ConfigStore``.

The connectors and tasks themselves run on the herder's ``Worker`` (``daemon.runtime.worker``).
Every method that changes state returns once the change is done (``restart_task`` returns after
the old incarnation is reaped and the new one started). Changes to a connector are serialised by
the connector's lock; different connectors change in parallel. Configurations, target states and
origins are persisted in the ``ConfigStore`` (standalone: a state file) before they are applied,
so a crash never loses an acknowledged change.

At start (``Worker.start``) the command line is the truth for connectors defined by files, as in
Kafka Connect's standalone mode: a stored connector whose origin is a file and that the command
line does not name again is neither started nor kept. Connectors created through the REST API
are restored (a 201 is never lost), and so are target states (a paused or stopped connector
stays so). Each restored connector is logged with its origin, and each one not running with
how to resume it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from daemon.config import WorkerConfig, resolve
from daemon.config.plan import LaunchPlan
from daemon.connectors.api import ConnectorRegistry, SinkConnector, default_registry
from daemon.connectors.registry import off_loop, validate_connector, validate_connector_async
from daemon.errors import Conflict, ConnectdError, ConnectorExists, TaskNotFound
from daemon.kafka.outages import BrokerOutageFilter
from daemon.runtime import offsets as offsets_api
from daemon.runtime.connector import ConnectorRuntime
from daemon.runtime.env import DEFAULT_KILL_TIMEOUT, RuntimeEnv
from daemon.runtime.executors import Executors
from daemon.runtime.model import (
    ConnectorInfo,
    ConnectorStatus,
    SinkOffset,
    Stall,
    State,
    TargetState,
    TaskInfo,
    TaskStatus,
)
from daemon.runtime.settings import TaskMetrics
from daemon.runtime.standalone.files import merge_files, origins_of
from daemon.runtime.worker import Worker
from daemon.storage.epochs import Epochs
from daemon.storage.standalone import REST, ConfigStore, MemoryStore, Origin, StoredConnector

log = logging.getLogger("connectd.worker")

#: The origin of a connector given to ``StandaloneHerder.start`` without one.
GIVEN = Origin("(the launch plan)")


class StandaloneHerder:
    """Connectors of one process; implements ``daemon.runtime.model.Herder``."""

    def __init__(
        self,
        config: WorkerConfig,
        executors: Executors,
        *,
        store: ConfigStore | None = None,
        epochs: Epochs | None = None,
        registry: ConnectorRegistry = default_registry,
        worker_id: str | None = None,
        kill_timeout: float = DEFAULT_KILL_TIMEOUT,
        metrics: TaskMetrics | None = None,
        outages: BrokerOutageFilter | None = None,
    ) -> None:
        self.config = config
        self.executors = executors
        self.store: ConfigStore = store if store is not None else MemoryStore()
        self.registry = registry
        env = RuntimeEnv.of_worker(
            config,
            executors,
            epochs=epochs,
            registry=registry,
            kill_timeout=kill_timeout,
            metrics=metrics,
            outages=outages,
        )
        self.worker = Worker(env)
        self.connectors = self.worker.connectors
        first = config.listeners[0]
        self._worker_id = worker_id or f"{first.host or '127.0.0.1'}:{first.port}"
        self._origins: dict[str, Origin | None] = {}  # None: not recorded (an older state file)
        self._from_files: set[str] = set()  # the connectors the files of the last start named
        self._started = False
        self._stopped = False

    # ---- lifecycle ----

    @property
    def env(self) -> RuntimeEnv:
        return self.worker.env

    @property
    def worker_id(self) -> str:
        return self._worker_id

    def set_worker_id(self, worker_id: str) -> None:
        """The REST listener's real address, once bound (port 0 picks one)."""
        self._worker_id = worker_id

    async def start(
        self,
        connectors: Sequence[Mapping[str, str]] = (),
        origins: Sequence[Origin] = (),
    ) -> None:
        """Load the stored connectors, (re)apply ``connectors`` (the command line's; ``origins``
        says which file each came from), start all (see the module docstring).

        A stored connector's target state is kept, also for one given again on the command line:
        a connector an operator paused stays paused across a restart. A stored connector that
        came from a file and is not among ``connectors`` is removed from the store, not started.
        """
        given: dict[str, tuple[dict[str, str], Origin]] = {}
        for i, config in enumerate(connectors):
            name = config["name"]
            origin = origins[i] if i < len(origins) else GIVEN
            if name in given:  # the launch plan refuses it first; this guards embedders
                raise ConnectorExists(
                    f"Connector {name} already exists: {given[name][1]} and {origin} both name it"
                )
            check = functools.partial(self._validate, name, config)  # it may stat a path
            given[name] = (await off_loop(check, f"connector {name}"), origin)
        stored = await merge_files(self.store, given)
        self._from_files = {c["name"] for c in connectors}
        where = self.store.where
        added = []
        for name, entry in stored.items():
            self._origins[name] = entry.origin
            added.append(await self.worker.add(name, entry.config, entry.target, start=False))
            if entry.target is not TargetState.RUNNING:
                log.warning(
                    "Connector %s is %s, as it was before the restart (target states are kept"
                    " in %s); PUT /connectors/%s/resume to run it",
                    name,
                    entry.target.value,
                    where,
                    name,
                )
        await asyncio.gather(*(self.worker.start(c) for c in added))
        self._started = True

    async def reload(self, plan: LaunchPlan) -> None:
        """Apply the connector files of a re-read ``plan`` (SIGHUP): a connector whose file now
        names another is deleted, the others are created or reconfigured as their files say
        (unchanged ones are left running). A change that fails is logged; the next still runs."""
        names = {c.name for c in plan.connectors}
        for name in sorted(self._from_files - names):
            await _logged(f"Deleting connector {name}", self.delete_connector(name))
        self._from_files = names
        for c, origin in zip(plan.connectors, origins_of(plan), strict=True):
            await _logged(
                f"Applying connector {c.name}",
                self.put_connector_config(c.name, c.properties, origin=origin),
            )
        log.info("Reloaded the configuration (%d connector(s) from files)", len(names))

    async def stop(self) -> None:
        """Every task of every connector through the stop sequence, in parallel; then the
        connector instances. Logs (does not raise) tasks whose reap could not be confirmed."""
        self._stopped = True
        await self.worker.stop_all("the worker is shutting down")

    def is_ready(self) -> bool:
        """Start-up is complete (``GET /health``)."""
        return self._started and not self._stopped

    def is_starting(self) -> bool:
        """Still loading its connectors (neither started nor stopped): the REST API answers
        changes to connectors with 503 meanwhile."""
        return not self._started and not self._stopped

    async def health_check(self) -> None:
        """Returns once the worker's event loop has done a round trip (``GET /health``)."""
        await asyncio.sleep(0)

    def stalled_tasks(self) -> list[tuple[str, int, Stall]]:
        return self.worker.stalls()

    # ---- reading ----

    def _get(self, name: str) -> ConnectorRuntime:
        return self.connectors[name]

    def connector_names(self) -> list[str]:
        return self.connectors.names()

    def connector_info(self, name: str) -> ConnectorInfo:
        c = self._get(name)
        return ConnectorInfo(name=name, config=dict(c.config), tasks=c.task_ids())

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._get(name).config)

    def connector_status(self, name: str) -> ConnectorStatus:
        return self._get(name).status(self.worker_id)

    def task_status(self, name: str, task: int) -> TaskStatus:
        c = self._get(name)
        if task not in c.slots:
            raise TaskNotFound(f"Task {name}-{task} not found")
        return c.slots[task].status(self.worker_id)

    def task_infos(self, name: str) -> list[TaskInfo]:
        c = self._get(name)
        return [TaskInfo(name, i, dict(cfg)) for i, cfg in enumerate(c.task_configs)]

    def topics(self, name: str) -> list[str]:
        return sorted(self._get(name).all_topics())

    # ---- changing ----

    def _validate(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        return validate_connector(name, config, self.registry)

    async def _validate_new(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        """``_validate``, and the class's check against what exists (a table whose commit log
        shows another connector writing these partitions …), off the event loop: what a
        create or a change through REST must pass."""
        return await validate_connector_async(name, config, self.registry)

    async def create_connector(
        self,
        name: str,
        config: Mapping[str, str],
        initial_state: TargetState = TargetState.RUNNING,
        *,
        origin: Origin = REST,
    ) -> ConnectorInfo:
        """``origin``: the file that defines it (a reload), else the REST API."""
        checked = await self._validate_new(name, config)
        async with self.connectors.lock:  # the name is checked, stored and taken at once
            if name in self.connectors:
                raise ConnectorExists(f"Connector {name} already exists")
            await self.store.save(name, StoredConnector(checked, initial_state, origin))
            connector = ConnectorRuntime(name, checked, initial_state, self.env)
            self.connectors.add(connector)
            self._origins[name] = origin
        log.info(
            "Connector %s created from %s (target state %s)", name, origin, initial_state.value
        )
        await self.worker.start(connector)
        return self.connector_info(name)

    async def put_connector_config(
        self, name: str, config: Mapping[str, str], *, origin: Origin | None = None
    ) -> tuple[bool, ConnectorInfo]:
        """Create or reconfigure. ``origin``: the file the config comes from (a reload); a
        REST call leaves an existing connector's origin as it was (a file-defined connector
        changed through REST gets its file's config back at the next start or reload)."""
        if name not in self.connectors:
            try:
                return True, await self.create_connector(name, config, origin=origin or REST)
            except ConnectorExists:
                pass  # created meanwhile: reconfigure it
        checked = await self._validate_new(name, config)
        c = self._get(name)
        async with c.lock:
            kept = self._origins.get(name)
            new_origin = origin if origin is not None else kept
            if checked == c.config:
                if new_origin != kept:
                    await self.store.save(name, StoredConnector(checked, c.target, new_origin))
                    self._origins[name] = new_origin
                return False, self.connector_info(name)
            await self.store.save(name, StoredConnector(checked, c.target, new_origin))
            self._origins[name] = new_origin
            log.info("Connector %s reconfigured; restarting its tasks", name)
            await c.reconfigure(checked)
        return False, self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        self._get(name)

        async def forget() -> None:
            await self.store.delete(name)
            self._origins.pop(name, None)

        # StopFailed: the connector stays, stored and running what could not be stopped.
        await self.worker.remove(name, "the connector was deleted", forget=forget)
        log.info("Connector %s deleted", name)

    def origin(self, name: str) -> Origin | None:
        """Where the connector came from (``None``: not recorded, an older state file)."""
        self._get(name)
        return self._origins.get(name)

    async def _set_target(self, c: ConnectorRuntime, target: TargetState) -> None:
        origin = self._origins.get(c.name)
        await self.store.save(c.name, StoredConnector(c.config, target, origin))

    async def pause_connector(self, name: str) -> None:
        c = self._get(name)
        async with c.lock:
            await self._set_target(c, TargetState.PAUSED)
            await c.pause()

    async def resume_connector(self, name: str) -> None:
        c = self._get(name)
        async with c.lock:
            await self._set_target(c, TargetState.RUNNING)
            await c.resume()

    async def stop_connector(self, name: str) -> None:
        c = self._get(name)
        async with c.lock:
            await self._set_target(c, TargetState.STOPPED)
            await c.stop()

    async def restart_connector(
        self, name: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> ConnectorStatus:
        c = self._get(name)
        async with c.lock:
            await c.restart(include_tasks=include_tasks, only_failed=only_failed)
        return self.connector_status(name)

    async def restart_task(self, name: str, task: int) -> None:
        c = self._get(name)
        async with c.lock:
            if task not in c.slots:
                raise TaskNotFound(f"Task {name}-{task} not found")
            await c.restart_task(task)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        self._get(name)  # 404 first, as for any connector call
        raise Conflict(
            "Kafka Connect in standalone mode does not support externally setting task"
            " configurations.",
            status=400,
        )

    async def reset_topics(self, name: str) -> None:
        c = self._get(name)
        c.topics.clear()
        for slot in c.slots.values():
            if slot.inc is not None:
                slot.inc.topics.clear()

    # ---- offsets ----

    async def _offsets_target(self, name: str) -> tuple[SinkConnector, dict[str, str]]:
        c = self._get(name)
        async with asyncio.timeout(self.env.settings.resolve_timeout):
            resolved = await asyncio.to_thread(resolve, c.config, self.env.providers)
        return self.registry.resolve(c.config["connector.class"])(), resolved

    def _require_stopped(self, name: str) -> ConnectorRuntime:
        c = self._get(name)
        if c.state is not State.STOPPED or c.slots:
            raise Conflict(
                f"Connectors must be in the STOPPED state before their offsets can be modified;"
                f" stop {name} first (PUT /connectors/{name}/stop)",
                status=400,
            )
        return c

    async def get_offsets(self, name: str) -> list[SinkOffset]:
        connector, config = await self._offsets_target(name)
        return await offsets_api.read_offsets(self.config, name, connector, config, self.executors)

    async def alter_offsets(self, name: str, offsets: Sequence[SinkOffset]) -> None:
        c = self._require_stopped(name)
        async with c.lock:
            self._require_stopped(name)
            connector, config = await self._offsets_target(name)
            await offsets_api.alter_offsets(
                self.config, name, connector, config, offsets, self.executors
            )

    async def reset_offsets(self, name: str) -> None:
        c = self._require_stopped(name)
        async with c.lock:
            self._require_stopped(name)
            connector, config = await self._offsets_target(name)
            await offsets_api.reset_offsets(self.config, name, connector, config, self.executors)


async def _logged(what: str, change: Awaitable[Any]) -> None:
    try:
        await change
    except ConnectdError as exc:  # e.g. a stop that failed: the next change still runs
        log.error("%s failed: %s", what, exc)


__all__ = ["StandaloneHerder"]
