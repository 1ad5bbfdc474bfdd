"""The status topic: where each worker reports the state of the connectors and tasks it runs.

Keys and values are Kafka Connect's (``KafkaStatusBackingStore``): ``status-connector-<c>`` and
``status-task-<c>-<n>``, each ``{"state", "trace", "worker_id", "generation"}``; a null value
(or Connect's legacy ``DESTROYED``) removes the entry. ``status-topic-...`` records (Connect's
active-topics tracking) are read past.

Connect's ``putSafe`` rule decides, in every reader's view, whether a record replaces the
current status of its connector or task: it does if there is none, if it comes from the same
worker, or if its generation is not older. So a zombie worker (one that missed rebalances while
paused or cut off) cannot overwrite the status the current owner reported, whatever order the
records arrive in. The rule needs generations that never go back; a writer must not report a
group generation that restarted (a group emptied and recreated) under an older status.

A record that cannot be used is skipped with a warning naming its key and offset.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from daemon.storage.kafka.errors import StoreTimeout
from daemon.storage.kafka.tail import TopicTail, client_options, start_producer
from daemon.structs import State, TaskId

log = logging.getLogger("connectd.storage.status")

CONNECTOR_PREFIX = "status-connector-"
TASK_PREFIX = "status-task-"
TOPIC_PREFIX = "status-topic-"
#: ``status-left-<member id>``: that member left the group on purpose (a SIGTERM, a rolling
#: restart), written just before its LeaveGroup; the leader keeps its work reserved for it.
LEFT_PREFIX = "status-left-"
#: Members remembered as having left on purpose; older ones are forgotten first.
MAX_LEFT = 1000
DESTROYED = "DESTROYED"
_K = TypeVar("_K", str, TaskId)  # Connect's pre-KIP-558 deletion marker


@dataclass(frozen=True)
class Status:
    """One status report: Connect's value, plus the offset (in its partition) it was read at;
    -1 for one not read from the topic."""

    state: State
    worker_id: str
    generation: int
    trace: str | None = None
    offset: int = -1

    def encode(self) -> bytes:
        value = {
            "state": self.state.value,
            "trace": self.trace,
            "worker_id": self.worker_id,
            "generation": self.generation,
        }
        return json.dumps(value, separators=(",", ":")).encode()

    def replaces(self, current: Status | None) -> bool:
        """Connect's putSafe rule: no current status, the same worker, or not an older
        generation."""
        return (
            current is None
            or current.worker_id == self.worker_id
            or current.generation <= self.generation
        )


def connector_key(connector: str) -> str:
    return CONNECTOR_PREFIX + connector


def task_key(task: TaskId) -> str:
    return f"{TASK_PREFIX}{task.connector}-{task.task}"


def decode_status(key: str, value: bytes, offset: int) -> Status | None:
    """The status in ``value``; ``None`` (with a warning) if it is not a usable one."""
    try:
        doc = json.loads(value)
    except ValueError:
        _skip(key, offset, "the value is not JSON")
        return None
    if not isinstance(doc, dict):
        _skip(key, offset, "expected a JSON object")
        return None
    state, worker, generation, trace = (
        doc.get("state"),
        doc.get("worker_id"),
        doc.get("generation"),
        doc.get("trace"),
    )
    if not isinstance(state, str) or state not in State.__members__:
        _skip(key, offset, f"unknown state {state!r}")
        return None
    if not isinstance(worker, str):
        _skip(key, offset, f"worker_id {worker!r} is not a string")
        return None
    if not isinstance(generation, int) or isinstance(generation, bool):
        _skip(key, offset, f"generation {generation!r} is not an integer")
        return None
    if trace is not None and not isinstance(trace, str):
        _skip(key, offset, "trace is not a string")
        return None
    return Status(State(state), worker, generation, trace, offset)


@dataclass(frozen=True)
class Departure:
    """What a member that left on purpose said it ran (its ``status-left-`` record): its REST
    URL, its connectors and tasks, and the wall time it left (epoch ms); a new leader reserves
    that work as the old one would have."""

    url: str = ""
    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()
    at_ms: int = 0


def decode_departure(value: bytes) -> Departure:
    """A ``status-left-`` record's value; one from an older connectd (only ``worker_id``), or
    one that does not parse, says no work."""
    try:
        doc = json.loads(value)
        url, at = doc.get("url", ""), doc.get("at", 0)
        connectors = frozenset(c for c in doc.get("connectors", []) if isinstance(c, str))
        tasks = frozenset(
            TaskId(t[0], t[1])
            for t in doc.get("tasks", [])
            if isinstance(t, list)
            and len(t) == 2
            and isinstance(t[0], str)
            and type(t[1]) is int
            and t[1] >= 0
        )
    except (ValueError, TypeError, AttributeError):
        return Departure()
    if not isinstance(url, str) or type(at) is not int:
        return Departure()
    return Departure(url, connectors, tasks, at)


@dataclass(frozen=True)
class StatusSnapshot:
    """Every connector's and task's current status, read up to ``positions`` (partition →
    next offset). Immutable."""

    connectors: Mapping[str, Status]
    tasks: Mapping[TaskId, Status]
    positions: Mapping[int, int]
    left: frozenset[str] = frozenset()
    #: What each member in ``left`` said it ran when it left.
    departures: Mapping[str, Departure] = field(default_factory=dict)

    def tasks_of(self, connector: str) -> dict[int, Status]:
        return {t.task: s for t, s in self.tasks.items() if t.connector == connector}


class StatusView:
    """Status records applied one by one under the putSafe rule. Pure; one owner."""

    def __init__(self) -> None:
        self.connectors: dict[str, Status] = {}
        self.tasks: dict[TaskId, Status] = {}
        self.left: dict[str, Departure] = {}  # member ids, oldest first

    def apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        try:
            text = key.decode() if key is not None else None
        except UnicodeDecodeError:
            text = None
        if text is None:
            log.warning("status topic: record at offset %d has no UTF-8 key; skipped", offset)
            return
        if text.startswith(CONNECTOR_PREFIX):
            self._put(self.connectors, text[len(CONNECTOR_PREFIX) :], text, value, offset)
        elif text.startswith(TASK_PREFIX):
            connector, _, number = text[len(TASK_PREFIX) :].rpartition("-")
            if not connector or not number.isdecimal() or not number.isascii():
                _skip(text, offset, "expected status-task-<connector>-<number>")
                return
            self._put(self.tasks, TaskId(connector, int(number)), text, value, offset)
        elif text.startswith(LEFT_PREFIX):
            member = text[len(LEFT_PREFIX) :]
            self.left.pop(member, None)
            if value is not None:
                self.left[member] = decode_departure(value)
                while len(self.left) > MAX_LEFT:
                    del self.left[next(iter(self.left))]
        elif not text.startswith(TOPIC_PREFIX):
            _skip(text, offset, "unknown key")

    @staticmethod
    def _put(
        target: dict[_K, Status], ident: _K, key: str, value: bytes | None, offset: int
    ) -> None:
        if value is None or _is_destroyed(value):
            target.pop(ident, None)
            return
        status = decode_status(key, value, offset)
        if status is None:
            return
        current = target.get(ident)
        if status.replaces(current):
            target[ident] = status
        elif current is not None:
            log.info(
                "status topic: %s at offset %d from %s (generation %d) ignored: %s reported "
                "generation %d already",
                key,
                offset,
                status.worker_id,
                status.generation,
                current.worker_id,
                current.generation,
            )


class StatusReader:
    """Reads the whole status topic into ``StatusSnapshot`` s. ``read_to_end(timeout)`` reads up
    to the end offsets observed when it is called, or raises ``StoreTimeout`` naming the topic.
    Start it after ``topics.ensure_topics``."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str | list[str],
        *,
        client_settings: Mapping[str, Any] | None = None,
        client_id: str = "connectd-status",
    ) -> None:
        self.topic = topic
        self._view = StatusView()
        self._tail = TopicTail(
            topic,
            bootstrap_servers,
            self._apply,
            client_settings=client_settings,
            client_id=client_id,
        )

    def _apply(self, record: ConsumerRecord[bytes, bytes]) -> None:
        self._view.apply(record.key, record.value, record.offset)

    async def start(self, timeout: float = 30.0) -> None:
        await self._tail.start(timeout)

    async def stop(self) -> None:
        await self._tail.stop()

    async def read_to_end(self, timeout: float) -> StatusSnapshot:
        ends = await self._tail.read_to_end(timeout)
        return StatusSnapshot(
            MappingProxyType(dict(self._view.connectors)),
            MappingProxyType(dict(self._view.tasks)),
            MappingProxyType({tp.partition: end for tp, end in ends.items()}),
            frozenset(self._view.left),
            MappingProxyType(dict(self._view.left)),
        )

    async def __aenter__(self) -> StatusReader:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class StatusWriter:
    """Writes status records (not transactional: any worker writes the statuses of what it
    runs). Each ``put_*`` returns once the broker acknowledged the record (``acks=all``), or
    raises ``StoreTimeout`` after ``write_timeout`` seconds."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str | list[str],
        *,
        write_timeout: float = 30.0,
        client_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.write_timeout = write_timeout
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            client_id="connectd-status-writer",
            **client_options(client_settings),
        )
        self._started = False

    async def start(self) -> None:
        await start_producer(self._producer, self.write_timeout)
        self._started = True

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self._producer.stop()

    async def put_connector(self, connector: str, status: Status | None) -> None:
        """Report ``connector``'s status; ``None`` removes it (a tombstone)."""
        await self._send(connector_key(connector), status)

    async def put_task(self, task: TaskId, status: Status | None) -> None:
        await self._send(task_key(task), status)

    async def put_left(
        self, member_id: str, worker_id: str, departure: Departure = Departure()
    ) -> None:
        """Say that ``member_id`` (this worker, ``worker_id``) leaves the group on purpose, and
        what it ran (``departure``)."""
        value = {
            "worker_id": worker_id,
            "url": departure.url,
            "connectors": sorted(departure.connectors),
            "tasks": [[t.connector, t.task] for t in sorted(departure.tasks)],
            "at": departure.at_ms,
        }
        await self._send_raw(LEFT_PREFIX + member_id, json.dumps(value).encode())

    async def _send(self, key: str, status: Status | None) -> None:
        await self._send_raw(key, None if status is None else status.encode())

    async def _send_raw(self, key: str, value: bytes | None) -> None:
        try:
            async with asyncio.timeout(self.write_timeout):
                await self._producer.send_and_wait(self.topic, key=key.encode(), value=value)
        except TimeoutError:
            raise StoreTimeout(
                f"topic {self.topic!r}: status {key} not acknowledged within "
                f"{self.write_timeout:g}s"
            ) from None

    async def __aenter__(self) -> StatusWriter:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _is_destroyed(value: bytes) -> bool:
    try:
        doc = json.loads(value)
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("state") == DESTROYED


def _skip(key: str, offset: int, why: str) -> None:
    log.warning("status topic: skipped %s at offset %d: %s", key, offset, why)
