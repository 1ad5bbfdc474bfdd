"""An in-memory ``Herder`` that behaves like a standalone Connect worker, for REST tests.

It validates configurations as the real worker does (``parse_connector`` with the registry's
resolver), keeps Connect's states and messages, and models the stop sequence's invariant: a task
restart ends (reaps) the old incarnation before the new one starts, or raises ``StopFailed``
and starts nothing. ``hang_task`` makes a task ignore the graceful stop (it must be killed);
``fail_next_reap`` makes the kill fail. ``live_incarnations`` is what a test checks for "never
two at once".

``HangSinkConnector`` / ``EchoSinkConnector`` are connector classes for the registry of these
tests (``fake_registry()``), so configurations with ``connector.class=HangSink`` validate.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from daemon.config import Listener, parse_connector
from daemon.connectors import RecordBatch
from daemon.connectors.api import (
    ConfigDef,
    ConfigType,
    ConnectorRegistry,
    Importance,
    SinkConnector,
    SinkTask,
    SinkTaskContext,
)
from daemon.errors import (
    Conflict,
    ConnectorExists,
    ConnectorNotFound,
    StopFailed,
    TaskNotFound,
)
from daemon.metrics import Metrics
from daemon.rest import FrontedRestServer, RestServer, RestSettings, create_app
from daemon.runtime.model import (
    ConnectorInfo,
    ConnectorStatus,
    Herder,
    SinkOffset,
    Stall,
    State,
    TargetState,
    TaskInfo,
    TaskStatus,
)

__version__ = "1.0.0-test"


class HangSinkTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context

    async def put(self, batch: RecordBatch) -> None:
        await asyncio.Event().wait()  # blocks for ever, as the seed's LatchHangSinkTask

    async def stop(self) -> None:
        pass


class HangSinkConnector(SinkConnector):
    """A sink whose tasks block for ever in ``put`` (the hang demo's connector)."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "hang.after.records",
            ConfigType.INT,
            0,
            Importance.LOW,
            "Records to accept before blocking.",
            group="Hang",
        )

    def task_class(self) -> type[SinkTask]:
        return HangSinkTask


class EchoSinkConnector(SinkConnector):
    """A sink with a required setting and a password, for validation tests."""

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("echo.path", ConfigType.STRING, documentation="Where to echo.")
            .define("echo.secret", ConfigType.PASSWORD, "", Importance.LOW, "A secret.")
            .define("echo.batch", ConfigType.INT, 10, Importance.MEDIUM, "Batch size.")
        )

    def task_class(self) -> type[SinkTask]:
        return HangSinkTask


def fake_registry() -> ConnectorRegistry:
    return ConnectorRegistry(
        {
            "HangSink": "support.fake_worker:HangSinkConnector",
            "EchoSink": "support.fake_worker:EchoSinkConnector",
        }
    )


@dataclass
class _Task:
    id: int
    config: dict[str, str]
    state: State
    incarnation: int
    executor_pid: int | None
    trace: str | None = None


@dataclass
class _Connector:
    name: str
    config: dict[str, str]
    target: TargetState
    state: State = State.RUNNING
    tasks: list[_Task] = field(default_factory=list)
    trace: str | None = None
    topics: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


def _not_found(name: str) -> ConnectorNotFound:
    return ConnectorNotFound(f"Connector {name} not found")


class FakeWorker:
    """A faithful in-memory standalone worker (see the module docstring)."""

    def __init__(
        self,
        registry: ConnectorRegistry | None = None,
        *,
        worker_id: str = "127.0.0.1:8083",
        cluster_id: str | None = "fake-cluster-id",
    ) -> None:
        self.registry = registry or fake_registry()
        self._worker_id = worker_id
        self._cluster_id = cluster_id
        self._connectors: dict[str, _Connector] = {}
        self._epochs = itertools.count(1)
        self._pids = itertools.count(40000)
        self.live_incarnations: dict[tuple[str, int], set[int]] = {}
        self.hung: set[tuple[str, int]] = set()
        self.fail_next_reap = False
        self.ready = True
        self.healthy = True
        self.max_live_seen = 0
        self.calls: list[str] = []

    # -- optional hooks -------------------------------------------------------------------

    def kafka_cluster_id(self) -> str | None:
        return self._cluster_id

    def is_ready(self) -> bool:
        return self.ready

    async def health_check(self) -> None:
        if not (self.ready and self.healthy):
            await asyncio.Event().wait()  # the worker's loop never answers

    def stalled_tasks(self) -> list[tuple[str, int, Stall]]:
        out: list[tuple[str, int, Stall]] = []
        for name in sorted(self._connectors):
            c = self._connectors[name]
            for t in c.tasks:
                status = self._status(c, t)
                if status.stalled is not None:
                    out.append((name, status.id, status.stalled))
        return out

    # -- test controls --------------------------------------------------------------------

    def fail_task(self, name: str, task: int, trace: str) -> None:
        t = self._task(name, task)
        t.state, t.trace = State.FAILED, trace

    def fail_connector(self, name: str, trace: str) -> None:
        c = self._get(name)
        c.state, c.trace = State.FAILED, trace

    def hang_task(self, name: str, task: int) -> None:
        self.hung.add((name, task))

    # -- Herder: reads -----------------------------------------------------------------

    @property
    def worker_id(self) -> str:
        return self._worker_id

    def connector_names(self) -> list[str]:
        return sorted(self._connectors)

    def connector_info(self, name: str) -> ConnectorInfo:
        c = self._get(name)
        return ConnectorInfo(name, dict(c.config), tuple(t.id for t in c.tasks))

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._get(name).config)

    def connector_status(self, name: str) -> ConnectorStatus:
        c = self._connectors.get(name)
        if c is None:
            raise ConnectorNotFound(f"No status found for connector {name}")
        return ConnectorStatus(
            name, c.state, self._worker_id, tuple(self._status(c, t) for t in c.tasks), c.trace
        )

    def task_status(self, name: str, task: int) -> TaskStatus:
        c = self._connectors.get(name)
        found = next((t for t in c.tasks if t.id == task), None) if c else None
        if c is None or found is None:
            raise TaskNotFound(f"No status found for task {name}-{task}")
        return self._status(c, found)

    def task_infos(self, name: str) -> list[TaskInfo]:
        return [TaskInfo(name, t.id, dict(t.config)) for t in self._get(name).tasks]

    def topics(self, name: str) -> list[str]:
        return sorted(self._get(name).topics)

    # -- Herder: changes ---------------------------------------------------------------

    async def create_connector(
        self, name: str, config: Mapping[str, str], initial_state: TargetState = TargetState.RUNNING
    ) -> ConnectorInfo:
        self.calls.append(f"create {name}")
        parse_connector(config, resolver=self.registry.config_def)
        if name in self._connectors:
            raise ConnectorExists(f"Connector {name} already exists")
        c = _Connector(name, dict(config), initial_state)
        self._connectors[name] = c
        self._apply_target(c)
        return self.connector_info(name)

    async def put_connector_config(
        self, name: str, config: Mapping[str, str]
    ) -> tuple[bool, ConnectorInfo]:
        self.calls.append(f"put {name}")
        parse_connector(config, resolver=self.registry.config_def)
        c = self._connectors.get(name)
        if c is None:
            return True, await self.create_connector(name, config)
        await self._stop_tasks(c)
        c.config = dict(config)
        self._apply_target(c)
        return False, self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        c = self._get(name)
        await self._stop_tasks(c)
        del self._connectors[name]

    async def pause_connector(self, name: str) -> None:
        c = self._get(name)
        c.target = TargetState.PAUSED
        self._apply_target(c)

    async def resume_connector(self, name: str) -> None:
        c = self._get(name)
        c.target = TargetState.RUNNING
        self._apply_target(c)

    async def stop_connector(self, name: str) -> None:
        c = self._get(name)
        c.target = TargetState.STOPPED
        await self._stop_tasks(c)
        self._apply_target(c)

    async def restart_connector(
        self, name: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> ConnectorStatus:
        c = self._connectors.get(name)
        if c is None:
            raise ConnectorNotFound(f"Unknown connector: {name}")
        restart_self = not only_failed or c.state is State.FAILED
        tasks = [
            t for t in c.tasks if include_tasks and (not only_failed or t.state is State.FAILED)
        ]
        if restart_self:
            c.state, c.trace = State.RESTARTING, None
        for t in tasks:
            t.state, t.trace = State.RESTARTING, None
        answer = self.connector_status(name)
        asyncio.get_running_loop().call_soon(self._finish_restart, name, [t.id for t in tasks])
        return answer

    def _finish_restart(self, name: str, task_ids: list[int]) -> None:
        c = self._connectors.get(name)
        if c is None:
            return
        for t in c.tasks:
            if t.id in task_ids and t.state is State.RESTARTING:
                self._end(c, t)
                self._begin(c, t)
        if c.state is State.RESTARTING:
            self._apply_target(c)

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """As the standalone herder: no task configurations from outside."""
        self.calls.append(f"put tasks {name} ({len(configs)})")
        self._get(name)
        raise Conflict(
            "Kafka Connect in standalone mode does not support externally setting task"
            " configurations.",
            status=400,
        )

    async def restart_task(self, name: str, task: int) -> None:
        self.calls.append(f"restart {name}-{task}")
        c = self._get(name)
        t = next((t for t in c.tasks if t.id == task), None)
        if t is None:
            raise TaskNotFound(f"Task {name}-{task} not found")
        if (name, task) in self.hung and self.fail_next_reap:
            self.fail_next_reap = False
            t.state, t.trace = State.FAILED, "StopFailed: the executor tree survived SIGKILL"
            raise StopFailed(
                f"Task {name}-{task}: incarnation {t.incarnation} did not stop within the graceful"
                " timeout and its executor could not be reaped; no new incarnation was started"
            )
        self._end(c, t)  # graceful stop, or kill + reap when hung: either way it is gone
        self.hung.discard((name, task))
        await asyncio.sleep(0)
        self._begin(c, t)

    async def reset_topics(self, name: str) -> None:
        self._get(name).topics.clear()

    async def get_offsets(self, name: str) -> list[SinkOffset]:
        c = self._get(name)
        return [SinkOffset(tp, p, o) for (tp, p), o in sorted(c.offsets.items())]

    async def alter_offsets(self, name: str, offsets: Sequence[SinkOffset]) -> None:
        c = self._modifiable(name)
        for o in offsets:
            c.offsets[(o.topic, o.partition)] = o.offset

    async def reset_offsets(self, name: str) -> None:
        self._modifiable(name).offsets.clear()

    # -- internals ------------------------------------------------------------------------

    def _get(self, name: str) -> _Connector:
        c = self._connectors.get(name)
        if c is None:
            raise _not_found(name)
        return c

    def _task(self, name: str, task: int) -> _Task:
        found = next((t for t in self._get(name).tasks if t.id == task), None)
        if found is None:
            raise TaskNotFound(f"Task {name}-{task} not found")
        return found

    def _modifiable(self, name: str) -> _Connector:
        c = self._get(name)
        if c.target is not TargetState.STOPPED or c.tasks:
            raise Conflict(
                "Connectors must be in the STOPPED state before their offsets can be modified."
                " This can be done for the specified connector by issuing a 'PUT' request to the"
                f" '/connectors/{name}/stop' endpoint",
                status=400,
            )
        return c

    def _status(self, c: _Connector, t: _Task) -> TaskStatus:
        return TaskStatus(
            t.id,
            t.state,
            self._worker_id,
            t.trace,
            incarnation=t.incarnation,
            epoch=t.incarnation,
            executor_pid=t.executor_pid,
        )

    def _apply_target(self, c: _Connector) -> None:
        if c.target is TargetState.STOPPED:
            c.state, c.tasks = State.STOPPED, []
            return
        running = c.target is TargetState.RUNNING
        c.state, c.trace = (State.RUNNING if running else State.PAUSED), None
        wanted = int(c.config.get("tasks.max", "1"))
        if len(c.tasks) != wanted:
            for t in c.tasks:
                self._end(c, t)
            c.tasks = [_Task(i, dict(c.config), State.UNASSIGNED, 0, None) for i in range(wanted)]
            for t in c.tasks:
                self._begin(c, t)
        for t in c.tasks:
            t.state = State.RUNNING if running else State.PAUSED
        if running:
            c.topics |= {s.strip() for s in c.config.get("topics", "").split(",") if s.strip()}

    async def _stop_tasks(self, c: _Connector) -> None:
        for t in c.tasks:
            self._end(c, t)
        c.tasks = []

    def _begin(self, c: _Connector, t: _Task) -> None:
        live = self.live_incarnations.setdefault((c.name, t.id), set())
        t.incarnation = next(self._epochs)
        t.executor_pid = next(self._pids)
        live.add(t.incarnation)
        self.max_live_seen = max(self.max_live_seen, len(live))
        running = c.target is TargetState.RUNNING
        t.state, t.trace = (State.RUNNING if running else State.PAUSED), None

    def _end(self, c: _Connector, t: _Task) -> None:
        self.live_incarnations.get((c.name, t.id), set()).discard(t.incarnation)
        t.executor_pid = None


# -- HTTP helpers for the REST tests ------------------------------------------------------------


LOCAL_ANY_PORT = Listener(scheme="http", host="127.0.0.1", port=0)


def local_settings(**changes: Any) -> RestSettings:
    """REST settings for tests: one http listener on 127.0.0.1, a free port."""
    return dataclasses.replace(RestSettings(listeners=(LOCAL_ANY_PORT,)), **changes)


@contextlib.asynccontextmanager
async def serve(
    worker: Herder,
    settings: RestSettings | None = None,
    *,
    registry: ConnectorRegistry | None = None,
    metrics: Metrics | None = None,
    front: bool = False,
) -> AsyncIterator[RestServer | FrontedRestServer]:
    """A real server over ``worker`` on 127.0.0.1 (free port), closed on exit.

    ``front``: behind the REST front process, as the daemon serves it by default."""
    settings = settings or local_settings()
    if registry is None and isinstance(worker, FakeWorker):
        registry = worker.registry
    if front:
        token = FrontedRestServer.new_token()
        app = create_app(
            worker, settings=settings, registry=registry, metrics=metrics, front_token=token
        )
        async with FrontedRestServer(app, settings, token=token) as fronted:
            yield fronted
        return
    app = create_app(worker, settings=settings, registry=registry, metrics=metrics)
    async with RestServer(app, settings) as server:
        yield server


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)

    def error(self, status: int) -> str:
        """Assert Connect's error body with ``status``; return its message."""
        assert self.status == status, (self.status, self.text)
        body = self.json
        assert set(body) == {"error_code", "message"}, body
        assert body["error_code"] == status
        assert isinstance(body["message"], str) and body["message"]
        return str(body["message"])


class Client:
    """A thin aiohttp client: ``await client.call("GET", "/connectors")`` → ``Answer``."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def call(self, method: str, path: str, **kwargs: Any) -> Answer:
        async with self.session.request(method, path, **kwargs) as response:
            return Answer(response.status, dict(response.headers), await response.text())

    async def get(self, path: str, **kwargs: Any) -> Answer:
        return await self.call("GET", path, **kwargs)

    async def create(self, name: str, **config: Any) -> Answer:
        """POST /connectors with a HangSink configuration (``config`` overrides)."""
        body = {"connector.class": "HangSink", "tasks.max": "1", "topics": "some_demo_topic"}
        body.update({k.replace("_", "."): v for k, v in config.items()})
        return await self.call("POST", "/connectors", json={"name": name, "config": body})


@contextlib.asynccontextmanager
async def serving_client(
    worker: Herder, settings: RestSettings | None = None, **app_kwargs: Any
) -> AsyncIterator[Client]:
    """``serve`` plus a ``Client`` bound to the server's first URL."""
    async with (
        serve(worker, settings, **app_kwargs) as server,
        aiohttp.ClientSession(server.url) as session,
    ):
        yield Client(session)
