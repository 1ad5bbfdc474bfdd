"""The worker: connectors and their tasks on this process, behind ``WorkerAPI``.

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
from collections.abc import Mapping, Sequence

from daemon.config import Providers, WorkerConfig, resolve
from daemon.connectors.api import ConnectorRegistry, SinkConnector, default_registry
from daemon.connectors.registry import off_loop, validate_connector, validate_connector_async
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
from daemon.storage.epochs import Epochs, EpochStore
from daemon.storage.standalone import REST, ConfigStore, MemoryStore, Origin, StoredConnector

log = logging.getLogger("connectd.worker")

#: Bound on the kill + reap + /proc confirmation of one incarnation in the stop sequence.
DEFAULT_KILL_TIMEOUT = 15.0

#: The origin of a connector given to ``Worker.start`` without one.
GIVEN = Origin("(the launch plan)")


class Worker:
    """Runs connectors and tasks; implements ``daemon.runtime.model.WorkerAPI``."""

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
    ) -> None:
        self.config = config
        self.executors = executors
        self.store: ConfigStore = store if store is not None else MemoryStore()
        self.registry = registry
        self.env = self.runtime_env(
            config,
            executors,
            epochs=epochs,
            registry=registry,
            kill_timeout=kill_timeout,
            metrics=metrics,
        )
        first = config.listeners[0]
        self._worker_id = worker_id or f"{first.host or '127.0.0.1'}:{first.port}"
        self._connectors: dict[str, ConnectorRuntime] = {}
        self._origins: dict[str, Origin | None] = {}  # None: not recorded (an older state file)
        self._lock = asyncio.Lock()  # guards the set of connector names
        self._started = False
        self._stopped = False

    @staticmethod
    def runtime_env(
        config: WorkerConfig,
        executors: Executors,
        *,
        epochs: Epochs | None = None,
        registry: ConnectorRegistry = default_registry,
        kill_timeout: float = DEFAULT_KILL_TIMEOUT,
        metrics: TaskMetrics | None = None,
    ) -> RuntimeEnv:
        """What every connector of a worker shares (epochs default to ``state.dir``'s)."""
        return RuntimeEnv(
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

    # ---- lifecycle ----

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
        stored = await self.store.load()
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
        where = self.store.where
        for name, entry in sorted(stored.items()):
            if name in given:
                continue
            if entry.origin is not None and entry.origin.from_file:
                log.warning(
                    "Connector %s (from %s) is not on the command line: not started, and removed"
                    " from %s (as in Kafka Connect's standalone mode, only the connector files"
                    " given run); give its file again to run it",
                    name,
                    entry.origin,
                    where,
                )
                await self.store.delete(name)
                del stored[name]
                continue
            how = (
                "created through the REST API"
                if entry.origin is not None
                else "origin not recorded (stored by an older connectd); DELETE"
                f" /connectors/{name} if it should not run"
            )
            log.info("Connector %s restored from %s: %s", name, where, how)
        for name, (checked, origin) in given.items():
            before = stored.get(name)
            target = before.target if before is not None else TargetState.RUNNING
            entry = StoredConnector(checked, target, origin)
            if before is None:
                log.info("Connector %s from %s", name, origin)
            else:
                was = (
                    ""
                    if before.origin in (origin, None)
                    else f", which had it from {before.origin}"
                )
                changed = (
                    ""
                    if dict(before.config) == checked
                    else "; the file's configuration is applied"
                )
                log.info("Connector %s from %s, known to %s%s%s", name, origin, where, was, changed)
            if before != entry:
                await self.store.save(name, entry)
            stored[name] = entry
        for name, entry in stored.items():
            self._origins[name] = entry.origin
            self._connectors[name] = ConnectorRuntime(name, entry.config, entry.target, self.env)
            if entry.target is not TargetState.RUNNING:
                log.warning(
                    "Connector %s is %s, as it was before the restart (target states are kept"
                    " in %s); PUT /connectors/%s/resume to run it",
                    name,
                    entry.target.value,
                    where,
                    name,
                )
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

    def is_starting(self) -> bool:
        """Still loading its connectors (neither started nor stopped): the REST API answers
        changes to connectors with 503 meanwhile."""
        return not self._started and not self._stopped

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
        async with self._lock:
            if name in self._connectors:
                raise ConnectorExists(f"Connector {name} already exists")
            await self.store.save(name, StoredConnector(checked, initial_state, origin))
            connector = ConnectorRuntime(name, checked, initial_state, self.env)
            self._connectors[name] = connector
            self._origins[name] = origin
        log.info(
            "Connector %s created from %s (target state %s)", name, origin, initial_state.value
        )
        await self._start(connector)
        return self.connector_info(name)

    async def put_connector_config(
        self, name: str, config: Mapping[str, str], *, origin: Origin | None = None
    ) -> tuple[bool, ConnectorInfo]:
        """Create or reconfigure. ``origin``: the file the config comes from (a reload); a
        REST call leaves an existing connector's origin as it was (a file-defined connector
        changed through REST gets its file's config back at the next start or reload)."""
        if name not in self._connectors:
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
        c = self._get(name)
        async with c.lock:
            await c.shutdown("the connector was deleted")  # StopFailed: the connector stays
            await self.store.delete(name)
            async with self._lock:
                self._connectors.pop(name, None)
                self._origins.pop(name, None)
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
