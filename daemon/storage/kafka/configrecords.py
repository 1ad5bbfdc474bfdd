"""The config log's records and the snapshot built from them: pure code, no I/O.

Keys and JSON values are Kafka Connect's (``KafkaConfigBackingStore``, JSON without schemas),
so the topic reads the same in any Kafka tool and in Connect's own terms:

==============================  ===============================================================
``connector-<name>``            ``{"properties": {...}}``; a null value deletes the connector
``task-<name>-<n>``             ``{"properties": {...}}``; buffered until its commit record
``commit-<name>``               ``{"tasks": n}``; applies the buffered ``task-<name>-0..n-1``
``target-state-<name>``         ``{"state": ..., "state.v2": ...}``; STARTED / PAUSED / STOPPED
                                (``state`` says PAUSED for STOPPED, for workers that predate it)
``restart-connector-<name>``    ``{"include-tasks": bool, "only-failed": bool}``
``logger-cluster-<namespace>``  ``{"level": ...}``; a cluster-wide log level (``PUT
                                /admin/loggers/<namespace>?scope=cluster``)
==============================  ===============================================================

Connector and task properties are stored exactly as given: ``${file:...}`` and ``${env:...}``
references stay unresolved, so no secret reaches Kafka. Connect's other keys
(``tasks-fencing-``, ``session-key``) are read past without effect.

A record that cannot be used (not UTF-8, not JSON, a field of the wrong type) is skipped with a
warning naming its key and offset; nothing in the topic can make the reader raise.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from daemon.structs import TargetState, TaskId

log = logging.getLogger("connectd.storage.configlog")

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
RESTART_PREFIX = "restart-connector-"
LOGGER_PREFIX = "logger-cluster-"
#: Connect's keys that connectd reads past (zombie fencing of source tasks, request signing):
#: not errors, just not ours.
FOREIGN_PREFIXES = ("tasks-fencing-", "session-key")

# Connect's wire name for a running connector is STARTED; connectd's is RUNNING.
_WIRE_STATE = {TargetState.RUNNING: "STARTED", TargetState.PAUSED: "PAUSED"}
_WIRE_STATE[TargetState.STOPPED] = "STOPPED"
_FROM_WIRE = {v: k for k, v in _WIRE_STATE.items()}

Properties = Mapping[str, str]


# --- encoding: what the leader writes --------------------------------------------------------


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def connector_record(name: str, properties: Properties | None) -> tuple[str, bytes | None]:
    """``connector-<name>``; ``None`` properties make the deletion tombstone."""
    value = None if properties is None else _json({"properties": dict(properties)})
    return CONNECTOR_PREFIX + name, value


def task_record(task: TaskId, properties: Properties) -> tuple[str, bytes]:
    return f"{TASK_PREFIX}{task.connector}-{task.task}", _json({"properties": dict(properties)})


def commit_record(connector: str, tasks: int) -> tuple[str, bytes]:
    return COMMIT_PREFIX + connector, _json({"tasks": tasks})


def target_state_record(connector: str, state: TargetState | None) -> tuple[str, bytes | None]:
    """``target-state-<name>``; ``None`` makes the tombstone written with a deletion."""
    if state is None:
        return TARGET_STATE_PREFIX + connector, None
    wire = _WIRE_STATE[state]
    legacy = "PAUSED" if state is TargetState.STOPPED else wire  # as Connect writes it
    return TARGET_STATE_PREFIX + connector, _json({"state": legacy, "state.v2": wire})


def restart_record(connector: str, *, include_tasks: bool, only_failed: bool) -> tuple[str, bytes]:
    value = {"include-tasks": include_tasks, "only-failed": only_failed}
    return RESTART_PREFIX + connector, _json(value)


def logger_level_record(namespace: str, level: str) -> tuple[str, bytes]:
    """``logger-cluster-<namespace>``, as Connect's ``putLoggerLevel`` writes it."""
    return LOGGER_PREFIX + namespace, _json({"level": level})


# --- the snapshot ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RestartRequest:
    """The latest restart request for a connector, and the log offset it was written at."""

    connector: str
    include_tasks: bool
    only_failed: bool
    offset: int


@dataclass(frozen=True)
class LoggerLevel:
    """The latest cluster-wide level of a logger namespace, and the offset it was written at."""

    namespace: str
    level: str
    offset: int


def _empty() -> Mapping[Any, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ConfigSnapshot:
    """What the config log says, read up to ``offset``: the last record's offset + 1 (0 for an
    empty log), as Connect counts it. Transaction markers do not count, so every worker that
    applied the same records reports the same offset. Immutable: every mapping is a read-only
    view of a private copy, so a snapshot can be handed to any coroutine and never changes.

    - ``connectors``: name → properties as stored (unresolved ``${...}``).
    - ``task_configs``: name → the committed task properties, task 0 first. A connector whose
      last commit found task records missing (compaction, or a leader that died mid-write
      before transactions) is in ``inconsistent`` instead and has no entry: its task configs
      must be generated and written again.
    - ``target_states``: name → target state; a connector without a record is RUNNING.
    - ``restart_requests``: name → the latest request (Connect acts only on requests read after
      it started: compare ``RestartRequest.offset`` with the offset a worker started from).
    - ``logger_levels``: namespace → its latest cluster-wide level. As in Connect, a worker
      applies only the levels written after it started (``levels_since``): one that starts
      later keeps the levels of its own configuration.
    """

    offset: int = 0
    connectors: Mapping[str, Properties] = field(default_factory=_empty)
    task_configs: Mapping[str, tuple[Properties, ...]] = field(default_factory=_empty)
    target_states: Mapping[str, TargetState] = field(default_factory=_empty)
    restart_requests: Mapping[str, RestartRequest] = field(default_factory=_empty)
    inconsistent: frozenset[str] = frozenset()
    logger_levels: Mapping[str, LoggerLevel] = field(default_factory=_empty)

    def target_state(self, connector: str) -> TargetState:
        return self.target_states.get(connector, TargetState.RUNNING)

    def tasks(self, connector: str) -> tuple[Properties, ...]:
        return self.task_configs.get(connector, ())

    def restarts_since(self, offset: int) -> list[RestartRequest]:
        """Restart requests written at or after ``offset``, oldest first."""
        found = [r for r in self.restart_requests.values() if r.offset >= offset]
        return sorted(found, key=lambda r: r.offset)

    def levels_since(self, offset: int) -> list[LoggerLevel]:
        """Cluster-wide log levels written at or after ``offset``, oldest first."""
        found = [r for r in self.logger_levels.values() if r.offset >= offset]
        return sorted(found, key=lambda r: r.offset)


# --- decoding: what every worker reads -------------------------------------------------------


def _frozen(props: Mapping[str, str]) -> Properties:
    return MappingProxyType(dict(props))


def _properties(value: object) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    props = value.get("properties")
    if not isinstance(props, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        return None
    return props


@dataclass
class ConfigLogState:
    """The config log applied record by record (Connect's consume callback), from which
    ``snapshot()`` makes immutable ``ConfigSnapshot`` s. Not thread-safe; one reader owns it."""

    offset: int = 0
    _connectors: dict[str, Properties] = field(default_factory=dict)
    _tasks: dict[str, tuple[Properties, ...]] = field(default_factory=dict)
    _deferred: dict[str, dict[int, Properties]] = field(default_factory=dict)
    _targets: dict[str, TargetState] = field(default_factory=dict)
    _restarts: dict[str, RestartRequest] = field(default_factory=dict)
    _inconsistent: set[str] = field(default_factory=set)
    _levels: dict[str, LoggerLevel] = field(default_factory=dict)

    def apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        """Apply one record; a record that cannot be used is skipped with a warning."""
        self.offset = max(self.offset, offset + 1)
        if key is None:
            log.warning("config log: record at offset %d has no key; skipped", offset)
            return
        try:
            text = key.decode()
        except UnicodeDecodeError:
            log.warning("config log: key %r at offset %d is not UTF-8; skipped", key, offset)
            return
        decoded: object = None
        if value is not None:
            try:
                decoded = json.loads(value)
            except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                _skip(text, offset, "the value is not JSON")
                return
            if decoded is None:
                _skip(text, offset, "the value is JSON null, not an object")
                return
        self._dispatch(text, decoded, value is None, offset)

    def apply_all(self, records: Sequence[tuple[bytes | None, bytes | None, int]]) -> None:
        for key, value, offset in records:
            self.apply(key, value, offset)

    def snapshot(self) -> ConfigSnapshot:
        """An immutable copy of the state."""
        present = self._connectors
        return ConfigSnapshot(
            offset=self.offset,
            connectors=MappingProxyType(dict(present)),
            task_configs=MappingProxyType({c: t for c, t in self._tasks.items() if c in present}),
            target_states=MappingProxyType(dict(self._targets)),
            restart_requests=MappingProxyType(
                {c: r for c, r in self._restarts.items() if c in present}
            ),
            inconsistent=frozenset(c for c in self._inconsistent if c in present),
            logger_levels=MappingProxyType(dict(self._levels)),
        )

    # -- one method per record kind, in Connect's order of prefix checks --------------------

    def _dispatch(self, key: str, value: object, tombstone: bool, offset: int) -> None:
        if key.startswith(TARGET_STATE_PREFIX):
            self._target_state(key[len(TARGET_STATE_PREFIX) :], value, tombstone, offset)
        elif key.startswith(CONNECTOR_PREFIX):
            self._connector(key[len(CONNECTOR_PREFIX) :], value, tombstone, offset)
        elif key.startswith(TASK_PREFIX):
            self._task(key, value, tombstone, offset)
        elif key.startswith(COMMIT_PREFIX):
            self._commit(key[len(COMMIT_PREFIX) :], value, tombstone, offset)
        elif key.startswith(RESTART_PREFIX):
            self._restart(key[len(RESTART_PREFIX) :], value, tombstone, offset)
        elif key.startswith(LOGGER_PREFIX):
            self._logger_level(key[len(LOGGER_PREFIX) :], value, tombstone, offset)
        elif key.startswith(FOREIGN_PREFIXES):
            log.debug("config log: %s at offset %d is not used by connectd", key, offset)
        else:
            _skip(key, offset, "unknown key")

    def _connector(self, name: str, value: object, tombstone: bool, offset: int) -> None:
        if tombstone:
            self._connectors.pop(name, None)
            self._tasks.pop(name, None)
            self._deferred.pop(name, None)
            self._restarts.pop(name, None)
            self._inconsistent.discard(name)
            return
        props = _properties(value)
        if props is None:
            _skip(CONNECTOR_PREFIX + name, offset, 'expected {"properties": {str: str}}')
            return
        self._connectors[name] = _frozen(props)
        self._targets.setdefault(name, TargetState.RUNNING)

    def _task(self, key: str, value: object, tombstone: bool, offset: int) -> None:
        connector, _, number = key[len(TASK_PREFIX) :].rpartition("-")
        if not connector or not number.isdecimal() or not number.isascii():
            _skip(key, offset, "expected task-<connector>-<number>")
            return
        if tombstone:
            _skip(key, offset, "a task config cannot be null")
            return
        props = _properties(value)
        if props is None:
            _skip(key, offset, 'expected {"properties": {str: str}}')
            return
        self._deferred.setdefault(connector, {})[int(number)] = _frozen(props)

    def _commit(self, name: str, value: object, tombstone: bool, offset: int) -> None:
        count = value.get("tasks") if isinstance(value, dict) else None
        if tombstone or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            _skip(COMMIT_PREFIX + name, offset, 'expected {"tasks": <int ≥ 0>}')
            return
        deferred = self._deferred.pop(name, {})  # always cleared, as in Connect
        if all(i in deferred for i in range(count)):
            self._tasks[name] = tuple(deferred[i] for i in range(count))
            self._inconsistent.discard(name)
        else:
            log.warning(
                "config log: commit-%s at offset %d commits %d task configs but only %s were "
                "read (compacted, or written by a leader that died mid-write); the connector's "
                "task configs must be written again",
                name,
                offset,
                count,
                sorted(deferred) or "none",
            )
            self._tasks.pop(name, None)
            self._inconsistent.add(name)

    def _target_state(self, name: str, value: object, tombstone: bool, offset: int) -> None:
        if tombstone:
            self._targets.pop(name, None)
            if name in self._connectors:  # every connector has a target state
                self._targets[name] = TargetState.RUNNING
            return
        if not isinstance(value, dict):
            _skip(TARGET_STATE_PREFIX + name, offset, "expected a JSON object")
            return
        wire = value.get("state.v2")  # newer field first; "state" from older writers
        if not isinstance(wire, str):
            wire = value.get("state")
        state = _FROM_WIRE.get(wire) if isinstance(wire, str) else None
        if state is None:
            _skip(TARGET_STATE_PREFIX + name, offset, f"unknown target state {wire!r}")
            return
        self._targets[name] = state

    def _restart(self, name: str, value: object, tombstone: bool, offset: int) -> None:
        if tombstone or not isinstance(value, dict):
            _skip(RESTART_PREFIX + name, offset, "expected a JSON object")
            return
        flags = []
        for field_name in ("include-tasks", "only-failed"):
            flag = value.get(field_name, False)
            if not isinstance(flag, bool):  # Connect defaults a bad flag to false
                log.warning(
                    "config log: %s%s at offset %d: %r is %r, not a boolean; taken as false",
                    RESTART_PREFIX,
                    name,
                    offset,
                    field_name,
                    flag,
                )
                flag = False
            flags.append(flag)
        self._restarts[name] = RestartRequest(name, flags[0], flags[1], offset)

    def _logger_level(self, namespace: str, value: object, tombstone: bool, offset: int) -> None:
        level = value.get("level") if isinstance(value, dict) else None
        if tombstone or not isinstance(level, str) or not namespace:
            _skip(LOGGER_PREFIX + namespace, offset, 'expected {"level": <string>}')
            return
        self._levels[namespace] = LoggerLevel(namespace, level, offset)


def _skip(key: str, offset: int, why: str) -> None:
    log.warning("config log: skipped %s at offset %d: %s", key, offset, why)
