"""The worker's public shape: states, status records, and the API the REST layer calls.

These are the contract between the runtime (``daemon.runtime.worker``) and its callers (the
REST API, the systemd status line, tests). Field names follow Kafka Connect's REST JSON, so the
REST layer serialises them without renaming; connectd's additions (``incarnation``,
``executor_pid``, ``auto_restart``, ``stalled``, ``retrying``) are extra fields no Connect
client trips over.
A task's per-partition ``freshness`` is for ``/metrics`` only (not in the status JSON).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# The state enums live at the bottom of the layers, so storage can name them too.
from daemon.structs import State as State
from daemon.structs import TargetState as TargetState


def iso(wall: float | None) -> str | None:
    """A wall time (epoch seconds) as the status JSON writes it: ISO 8601, UTC, milliseconds."""
    if wall is None:
        return None
    return datetime.datetime.fromtimestamp(wall, datetime.UTC).isoformat(timespec="milliseconds")


def status_workers(doc: Mapping[str, Any]) -> set[str]:
    """The workers a connector status's JSON (``ConnectorStatus.to_json``) names for the
    connector or any of its tasks (none for UNASSIGNED work)."""
    named = {t.get("worker_id") for t in doc.get("tasks", ())}
    named.add(doc.get("connector", {}).get("worker_id"))
    return {w for w in named if isinstance(w, str) and w}


@dataclass(frozen=True)
class AutoRestart:
    """The auto-restart policy's counters for one connector or task."""

    count: int = 0
    last_restart: str | None = None  # ISO 8601, UTC
    next_restart: str | None = None  # ISO 8601, UTC; None when none is scheduled

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "last_restart": self.last_restart,
            "next_restart": self.next_restart,
        }


@dataclass(frozen=True)
class PartitionFreshness:
    """How far what a task committed to its sink is behind one partition's log."""

    topic: str
    partition: int
    committed: int | None  # next offset, as the sink's pre_commit last returned it
    log_end: int | None  # the partition's end (highwater) at the task's latest poll
    lag: int | None  # log_end - committed (records written to Kafka, not yet in the sink)
    last_commit: float | None  # wall time (epoch s) the committed offset last advanced
    event_time: float | None  # kafka_timestamp (epoch s) of the newest committed record
    #: Records delivered to the sink and not yet committed by it (offsets from the committed one
    #: to the end of the last delivery, less those known to hold no record); None before both
    #: are known. Connect's sink-record-active-count, per partition.
    active: int | None = None


@dataclass(frozen=True)
class Stall:
    """A running task whose lag stayed above 0 for ``task.stall.warn.ms`` without a commit."""

    since: str  # ISO 8601, UTC: since when it has had lag and no commit
    lag: int  # records behind, over its stalled partitions
    partitions: tuple[str, ...] = ()  # ``topic-partition`` of each stalled partition

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since, "lag": self.lag, "partitions": list(self.partitions)}


@dataclass(frozen=True)
class Retrying:
    """A RUNNING task between a failed delivery step and its retry (``retry.py``): the sink's
    ``RetriableError`` (retried until it succeeds), or a retriable failure within
    ``errors.retry.timeout``."""

    reason: str  # ``ErrorClass: first line of its message``
    attempts: int  # retries so far, since the last step that succeeded
    since: float  # wall time (epoch s) of the first failure of this run of retries
    next_retry: float  # wall time (epoch s) of the next attempt

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "attempts": self.attempts,
            "since": iso(self.since),
            "next_retry": iso(self.next_retry),
        }


@dataclass(frozen=True)
class TaskStatus:
    id: int
    state: State
    worker_id: str
    trace: str | None = None
    incarnation: int | None = None  # the epoch the live (or last) incarnation started with
    epoch: int | None = None  # its fencing epoch now (a rebalance with new partitions draws one)
    executor_pid: int | None = None  # the executor process writing for the task now
    auto_restart: AutoRestart | None = None
    stalled: Stall | None = None
    retrying: Retrying | None = None
    freshness: tuple[PartitionFreshness, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "state": self.state.value,
            "worker_id": self.worker_id,
        }
        if self.trace is not None:
            out["trace"] = self.trace
        out["incarnation"] = self.incarnation
        out["epoch"] = self.epoch
        out["executor_pid"] = self.executor_pid
        if self.auto_restart is not None:
            out["auto_restart"] = self.auto_restart.to_json()
        if self.stalled is not None:
            out["stalled"] = self.stalled.to_json()
        if self.retrying is not None:
            out["retrying"] = self.retrying.to_json()
        return out


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    state: State
    worker_id: str
    tasks: tuple[TaskStatus, ...]
    trace: str | None = None
    type: str = "sink"
    auto_restart: AutoRestart | None = None

    def to_json(self) -> dict[str, Any]:
        connector: dict[str, Any] = {"state": self.state.value, "worker_id": self.worker_id}
        if self.trace is not None:
            connector["trace"] = self.trace
        if self.auto_restart is not None:
            connector["auto_restart"] = self.auto_restart.to_json()
        return {
            "name": self.name,
            "connector": connector,
            "tasks": [t.to_json() for t in self.tasks],
            "type": self.type,
        }


@dataclass(frozen=True)
class ConnectorInfo:
    """``GET /connectors/{name}``: the stored config (``${...}`` references unresolved)."""

    name: str
    config: Mapping[str, str]
    tasks: tuple[int, ...]
    type: str = "sink"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": dict(self.config),
            "tasks": [{"connector": self.name, "task": t} for t in self.tasks],
            "type": self.type,
        }


@dataclass(frozen=True)
class TaskInfo:
    """``GET /connectors/{name}/tasks``: one task's id and its (unresolved) configuration."""

    connector: str
    task: int
    config: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": {"connector": self.connector, "task": self.task}, "config": dict(self.config)}


@dataclass(frozen=True)
class SinkOffset:
    """One partition's committed position, as Connect's sink offsets API shows it."""

    topic: str
    partition: int
    offset: int  # the next offset to consume

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": {"kafka_topic": self.topic, "kafka_partition": self.partition},
            "offset": {"kafka_offset": self.offset},
        }


class Herder(Protocol):
    """What the REST API (and tests, and the systemd status line) may ask of a worker.

    Errors are ``daemon.errors`` types: ``ConnectorNotFound``/``TaskNotFound`` (404),
    ``ConnectorExists`` (409), ``InvalidConfig``/``ConfigError`` (400), ``Conflict`` (its
    ``status``), ``StopFailed`` (500). Methods that change state return once the change is
    done: ``restart_task`` returns after the old incarnation is reaped and the new one started.
    """

    @property
    def worker_id(self) -> str: ...

    def connector_names(self) -> list[str]: ...

    def connector_info(self, name: str) -> ConnectorInfo: ...

    def connector_config(self, name: str) -> dict[str, str]: ...

    def connector_status(self, name: str) -> ConnectorStatus: ...

    def task_status(self, name: str, task: int) -> TaskStatus: ...

    def task_infos(self, name: str) -> list[TaskInfo]: ...

    def topics(self, name: str) -> list[str]:
        """Topics the connector's tasks have consumed from since the last reset."""
        ...

    async def create_connector(
        self, name: str, config: Mapping[str, str], initial_state: TargetState = ...
    ) -> ConnectorInfo: ...

    async def put_connector_config(
        self, name: str, config: Mapping[str, str]
    ) -> tuple[bool, ConnectorInfo]:
        """Create (True) or reconfigure (False) a connector; a reconfiguration restarts its
        tasks through the stop sequence."""
        ...

    async def delete_connector(self, name: str) -> None: ...

    async def pause_connector(self, name: str) -> None: ...

    async def resume_connector(self, name: str) -> None: ...

    async def stop_connector(self, name: str) -> None: ...

    async def restart_connector(
        self, name: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> ConnectorStatus: ...

    async def restart_task(self, name: str, task: int) -> None: ...

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Connect's internal ``POST /connectors/{name}/tasks`` (distributed mode only)."""
        ...

    async def reset_topics(self, name: str) -> None: ...

    async def get_offsets(self, name: str) -> list[SinkOffset]: ...

    async def alter_offsets(self, name: str, offsets: Sequence[SinkOffset]) -> None:
        """Only when the connector is STOPPED (else ``Conflict`` with status 400)."""
        ...

    async def reset_offsets(self, name: str) -> None:
        """Only when the connector is STOPPED (else ``Conflict`` with status 400)."""
        ...
