"""The worker group's wire format: member metadata and assignments as versioned JSON bytes.

Both travel in the ``user_data`` of the classic consumer-group protocol (the topic-partition
lists stay empty). The shapes copy Connect's incremental cooperative protocol
(``IncrementalCooperativeConnectProtocol``): a member reports its URL, the config offset it has
read and what it runs now (so a new leader can rebuild the picture); an assignment carries an
error, the leader, the config offset, what to start, what to stop and a scheduled delay.

Guarantee: ``decode_*`` never raises anything but ``ProtocolError`` whatever the bytes are, and
``decode(encode(x)) == x``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from daemon.errors import ConnectdError
from daemon.structs import TaskId

#: The only version this code writes; decoding refuses any other (a later version must add
#: itself here and keep reading this one, for rolling upgrades).
VERSION = 1

# Bounds against hostile input: names longer or lists larger than this are refused, so a bad
# member cannot make the leader allocate without limit.
_MAX_NAME = 1024
_MAX_ITEMS = 100_000


class ProtocolError(ConnectdError):
    """Bytes in the group protocol could not be decoded: a member of another version or kind
    joined the group, or the bytes are corrupt. Not retriable: the same bytes fail again."""

    retriable = False


class AssignmentError(enum.StrEnum):
    """Connect's assignment error codes that this protocol uses."""

    NONE = "NONE"
    # Some member has read the config log further than the leader: everyone must read to the
    # end and rejoin (Connect's ensureLeaderConfig).
    CONFIG_MISMATCH = "CONFIG_MISMATCH"
    # connectd's own: members keep their configs, offsets or statuses in other topics than
    # the group's (``Assignment.storage``); such a member must not take work, and leaves.
    FOREIGN_STORAGE = "FOREIGN_STORAGE"


@dataclass(frozen=True)
class Allocation:
    """A set of connectors and tasks (what a member runs, or is told to start or stop)."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    @staticmethod
    def of(connectors: Iterable[str] = (), tasks: Iterable[TaskId] = ()) -> Allocation:
        return Allocation(frozenset(connectors), frozenset(tasks))

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def __or__(self, other: Allocation) -> Allocation:
        return Allocation(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: Allocation) -> Allocation:
        return Allocation(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: Allocation) -> Allocation:
        return Allocation(self.connectors & other.connectors, self.tasks & other.tasks)


EMPTY = Allocation()


@dataclass(frozen=True)
class MemberMetadata:
    """What a member says about itself on every join."""

    url: str
    config_offset: int
    allocation: Allocation = EMPTY
    #: The worker's config, offset and status topics (``config.storage.topic``, ...); empty
    #: from a member that does not say.
    storage: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assignment:
    """What the leader tells one member. ``assigned`` is what to start now (in addition to what
    it keeps), ``revoked`` what to stop before it rejoins; ``delay_ms`` > 0 asks every member to
    rejoin after that long (work of a departed member is reserved until then)."""

    error: AssignmentError
    leader: str
    leader_url: str
    config_offset: int
    assigned: Allocation = EMPTY
    revoked: Allocation = EMPTY
    delay_ms: int = 0
    #: With ``FOREIGN_STORAGE``: the group's topics (a member whose own differ leaves).
    storage: tuple[str, ...] = ()


def _alloc_json(a: Allocation) -> dict[str, Any]:
    return {
        "connectors": sorted(a.connectors),
        "tasks": [
            [t.connector, t.task] for t in sorted(a.tasks, key=lambda t: (t.connector, t.task))
        ],
    }


def encode_metadata(m: MemberMetadata) -> bytes:
    body = {"version": VERSION, "url": m.url, "config_offset": m.config_offset}
    body["allocation"] = _alloc_json(m.allocation)
    if m.storage:
        body["storage"] = list(m.storage)
    return json.dumps(body, separators=(",", ":")).encode()


def encode_assignment(a: Assignment) -> bytes:
    body: dict[str, Any] = {
        "version": VERSION,
        "error": a.error.value,
        "leader": a.leader,
        "leader_url": a.leader_url,
        "config_offset": a.config_offset,
        "assigned": _alloc_json(a.assigned),
        "revoked": _alloc_json(a.revoked),
        "delay_ms": a.delay_ms,
    }
    if a.storage:
        body["storage"] = list(a.storage)
    return json.dumps(body, separators=(",", ":")).encode()


# --- decoding: every check raises ProtocolError -----------------------------------------------


def _load(data: bytes, what: str) -> dict[str, Any]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProtocolError(f"{what}: expected bytes, got {type(data).__name__}")
    try:
        body = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ProtocolError(
            f"{what}: not JSON ({e}); is another kind of member in the group?"
        ) from e
    if not isinstance(body, dict):
        raise ProtocolError(f"{what}: expected a JSON object")
    if type(body.get("version")) is not int or body["version"] != VERSION:
        raise ProtocolError(
            f"{what}: version {body.get('version')!r} is not {VERSION}; "
            "all workers of a group must run compatible connectd versions"
        )
    return body


def _str(body: dict[str, Any], key: str, what: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or len(value) > _MAX_NAME:
        raise ProtocolError(f"{what}: {key!r} must be a string of at most {_MAX_NAME} chars")
    return value


def _int(body: dict[str, Any], key: str, what: str) -> int:
    value = body.get(key)
    if type(value) is not int or value < 0:
        raise ProtocolError(f"{what}: {key!r} must be a non-negative integer")
    return value


def _alloc(body: dict[str, Any], key: str, what: str) -> Allocation:
    raw = body.get(key)
    if not isinstance(raw, dict):
        raise ProtocolError(f"{what}: {key!r} must be an object")
    connectors, tasks = raw.get("connectors"), raw.get("tasks")
    if not isinstance(connectors, list) or not isinstance(tasks, list):
        raise ProtocolError(f"{what}: {key!r} needs 'connectors' and 'tasks' lists")
    if len(connectors) + len(tasks) > _MAX_ITEMS:
        raise ProtocolError(f"{what}: {key!r} has more than {_MAX_ITEMS} items")
    names: list[str] = []
    for c in connectors:
        if not isinstance(c, str) or len(c) > _MAX_NAME:
            raise ProtocolError(f"{what}: connector names must be short strings")
        names.append(c)
    ids: list[TaskId] = []
    for t in tasks:
        ok = isinstance(t, list) and len(t) == 2 and isinstance(t[0], str)
        if not ok or type(t[1]) is not int or t[1] < 0 or len(t[0]) > _MAX_NAME:
            raise ProtocolError(f"{what}: a task must be [connector, number >= 0]")
        ids.append(TaskId(t[0], t[1]))
    return Allocation.of(names, ids)


def _names(body: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    raw = body.get(key, [])
    if not isinstance(raw, list) or len(raw) > 3:
        raise ProtocolError(f"{what}: {key!r} must be a list of at most 3 topic names")
    if any(not isinstance(t, str) or len(t) > _MAX_NAME for t in raw):
        raise ProtocolError(f"{what}: {key!r} must hold topic names")
    return tuple(raw)


def decode_metadata(data: bytes) -> MemberMetadata:
    what = "member metadata"
    body = _load(data, what)
    return MemberMetadata(
        url=_str(body, "url", what),
        config_offset=_int(body, "config_offset", what),
        allocation=_alloc(body, "allocation", what),
        storage=_names(body, "storage", what),
    )


def decode_assignment(data: bytes) -> Assignment:
    what = "assignment"
    body = _load(data, what)
    try:
        error = AssignmentError(str(body.get("error")))
    except ValueError:
        raise ProtocolError(f"{what}: unknown error code {body.get('error')!r}") from None
    return Assignment(
        error=error,
        leader=_str(body, "leader", what),
        leader_url=_str(body, "leader_url", what),
        config_offset=_int(body, "config_offset", what),
        assigned=_alloc(body, "assigned", what),
        revoked=_alloc(body, "revoked", what),
        delay_ms=_int(body, "delay_ms", what),
        storage=_names(body, "storage", what),
    )
