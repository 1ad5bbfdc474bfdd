"""The worker: connectors and their tasks on this process, behind ``WorkerAPI``.

Every method that changes state returns once the change is done (``restart_task`` returns after
the old incarnation is reaped and the new one started). Changes to a connector are serialised by
the connector's lock; different connectors change in parallel. Configurations and target states
are persisted in the ``ConfigStore`` (standalone: a state file) before they are applied, so a
crash never loses an acknowledged change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from daemon.config import Providers, WorkerConfig, resolve
from daemon.connectors.api import ConnectorRegistry, SinkConnector, default_registry
from daemon.connectors.registry import validate_connector
from daemon.errors import (
    Conflict,
    ConnectorExists,
    ConnectorNotFound,
    StopFailed,
    TaskNotFound,
)
from daemon.runtime import offsets as offsets_api
from daemon.runtime.connector import ConnectorRuntime, RuntimeEnv
from daemon.runtime.executors import Executors
from daemon.runtime.model import (
    ConnectorInfo,
    ConnectorStatus,
    SinkOffset,
    State,
    TargetState,
    TaskInfo,
    TaskStatus,
)
from daemon.runtime.steps import TaskMetrics, TaskSettings
from daemon.storage.epochs import EpochStore
from daemon.storage.standalone import ConfigStore, MemoryStore, StoredConnector

log = logging.getLogger("connectd.worker")

#: Bound on the kill + reap + /proc confirmation of one incarnation in the stop sequence.
DEFAULT_KILL_TIMEOUT = 15.0


class Worker:
    """Runs connectors and tasks; implements ``daemon.runtime.model.WorkerAPI``."""

    def __init__(
        self,
        config: WorkerConfig,
        executors: Executors,
        *,
        store: ConfigStore | None = None,
        epochs: EpochStore | None = None,
        registry: ConnectorRegistry = default_registry,
        worker_id: str | None = None,
        kill_timeout: float = DEFAULT_KILL_TIMEOUT,
        metrics: TaskMetrics | None = None,
    ) -> None:
        self.config = config
        self.executors = executors
        self.store: ConfigStore = store if store is not None else MemoryStore()
        self.registry = registry
        self.env = RuntimeEnv(
            worker=config,
            executors=executors,
            epochs=epochs if epochs is not None else EpochStore(config.state_dir),
            providers=Providers.from_worker(config),
            registry=registry,
            settings=TaskSettings.from_worker(config),
            graceful_timeout=config.task_shutdown_graceful_timeout.total_seconds(),
            kill_timeout=kill_timeout,
            metrics=metrics,
        )
        first = config.listeners[0]
        self._worker_id = worker_id or f"{first.host or '127.0.0.1'}:{first.port}"
        self._connectors: dict[str, ConnectorRuntime] = {}
        self._lock = asyncio.Lock()  # guards the set of connector names
        self._started = False
        self._stopped = False

    # ---- lifecycle ----

    @property
    def worker_id(self) -> str:
        return self._worker_id

    def set_worker_id(self, worker_id: str) -> None:
        """The REST listener's real address, once bound (port 0 picks one)."""
        self._worker_id = worker_id

    async def start(self, connectors: Sequence[Mapping[str, str]] = ()) -> None:
        """Load the stored connectors, (re)apply ``connectors`` (the command line's), start all.

        A stored connector's target state is kept, also for one given again on the command line:
        a connector an operator paused stays paused across a restart.
        """
        stored = await self.store.load()
        for config in connectors:
            name = config["name"]
            checked = self._validate(name, config)
            target = stored[name].target if name in stored else TargetState.RUNNING
            if name not in stored or dict(stored[name].config) != checked:
                await self.store.save(name, StoredConnector(checked, target))
            stored[name] = StoredConnector(checked, target)
        for name, entry in stored.items():
            self._connectors[name] = ConnectorRuntime(name, entry.config, entry.target, self.env)
        await asyncio.gather(*(self._start(c) for c in self._connectors.values()))
        self._started = True

    async def _start(self, connector: ConnectorRuntime) -> None:
        async with connector.lock:
            await connector.start()

    async def stop(self) -> None:
        """Every task of every connector through the stop sequence, in parallel; then the
        connector instances. Logs (does not raise) tasks whose reap could not be confirmed."""
        self._stopped = True
        results = await asyncio.gather(
            *(self._shutdown(c) for c in self._connectors.values()), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                log.error("Worker shutdown: %s", result)

    def is_ready(self) -> bool:
        """Start-up is complete (``GET /health``)."""
        return self._started and not self._stopped

    async def health_check(self) -> None:
        """Returns once the worker's event loop has done a round trip (``GET /health``)."""
        await asyncio.sleep(0)

    async def _shutdown(self, connector: ConnectorRuntime) -> None:
        async with connector.lock:
            await connector.shutdown("the worker is shutting down")

    # ---- reading ----

    def _get(self, name: str) -> ConnectorRuntime:
        try:
            return self._connectors[name]
        except KeyError:
            raise ConnectorNotFound(f"Connector {name} not found") from None

    def connector_names(self) -> list[str]:
        return sorted(self._connectors)

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

    async def create_connector(
        self,
        name: str,
        config: Mapping[str, str],
        initial_state: TargetState = TargetState.RUNNING,
    ) -> ConnectorInfo:
        checked = self._validate(name, config)
        async with self._lock:
            if name in self._connectors:
                raise ConnectorExists(f"Connector {name} already exists")
            await self.store.save(name, StoredConnector(checked, initial_state))
            connector = ConnectorRuntime(name, checked, initial_state, self.env)
            self._connectors[name] = connector
        log.info("Connector %s created (target state %s)", name, initial_state.value)
        await self._start(connector)
        return self.connector_info(name)

    async def put_connector_config(
        self, name: str, config: Mapping[str, str]
    ) -> tuple[bool, ConnectorInfo]:
        if name not in self._connectors:
            try:
                return True, await self.create_connector(name, config)
            except ConnectorExists:
                pass  # created meanwhile: reconfigure it
        checked = self._validate(name, config)
        c = self._get(name)
        async with c.lock:
            if checked == c.config:
                return False, self.connector_info(name)
            await self.store.save(name, StoredConnector(checked, c.target))
            log.info("Connector %s reconfigured; restarting its tasks", name)
            await c.reconfigure(checked)
        return False, self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        c = self._get(name)
        async with c.lock:
            await c.shutdown("the connector was deleted")  # StopFailed: the connector stays
            await self.store.delete(name)
            async with self._lock:
                self._connectors.pop(name, None)
        log.info("Connector %s deleted", name)

    async def _set_target(self, c: ConnectorRuntime, target: TargetState) -> None:
        await self.store.save(c.name, StoredConnector(c.config, target))

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


__all__ = ["StopFailed", "Worker"]
