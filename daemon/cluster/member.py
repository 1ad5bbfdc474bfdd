"""One worker's membership in the worker group, on aiokafka's classic consumer-group protocol.

The member is an ``AIOKafkaConsumer`` in group ``group_id``, subscribed to one topic (the config
topic), with exactly one assignor: this module's ``_GroupAssignor`` instance, which carries the
member metadata and the assignments in ``user_data`` and leaves every partition list empty. The
guard rails of the aiokafka research (shared/research/distributed-on-aiokafka.md) are kept here:

- one assignor only (several send several JoinGroups, aiokafka PR #1168);
- a ``getmany`` pump, so a member that consumes nothing is not taken for idle and dropped
  (aiokafka #720/#1187);
- an assignment for every member, undecodable ones included (empty bytes crash the follower);
- the config offset in the metadata, so ``request_rejoin()`` after a config change is a real
  rebalance;
- ``rebalance_timeout_ms`` is both the JoinGroup rebalance timeout and aiokafka's
  ``max_poll_interval_ms`` (aiokafka defaults the first to the session timeout).

Guarantees to the owner: events arrive in ``events()`` in group order, from the coordination
task, without waiting for the owner (the queue is unbounded: heartbeats are paused until the
callbacks return). After an event with ``revoked`` work the owner must stop that work and then
call ``request_rejoin()``: only that rejoin (its metadata no longer lists the work) starts the
round that places it elsewhere. When an event's ``delay_ms`` > 0 the member rejoins by itself
once it has passed (the leader's rejoin always starts a round). A ``Lost`` event
means the broker no longer knew this member (session expired, SIGSTOP, partition): the owner must
stop everything it runs before it takes new work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.errors import KafkaError

from daemon.cluster.assignor import ClusterConfig, LeaderState, Policy, assign
from daemon.cluster.protocol import (
    EMPTY,
    Allocation,
    Assignment,
    AssignmentError,
    MemberMetadata,
    ProtocolError,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from daemon.kafka import coordinator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberSettings:
    """Connect's names: ``group.id``, ``session.timeout.ms``, ``heartbeat.interval.ms``,
    ``rebalance.timeout.ms``; ``url`` is the REST URL other workers reach this one at."""

    group_id: str
    bootstrap_servers: str
    topic: str
    url: str
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 60_000
    policy: Policy = field(default_factory=Policy)
    client: Mapping[str, Any] = field(default_factory=dict)  # security and client settings
    #: The worker's config, offset and status topics, said on every join: a group keeps one set.
    storage: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assigned:
    """A completed rebalance. ``running`` is what this member runs once it applied the event
    (nothing changes when ``assignment.error`` is not NONE: read the config log to
    ``assignment.config_offset``, then ``request_rejoin()``). Start ``assignment.assigned`` only
    once this worker's config snapshot is at ``assignment.config_offset``."""

    generation: int
    member_id: str
    leader: bool
    assignment: Assignment
    running: Allocation


@dataclass(frozen=True)
class Lost:
    """The broker no longer knew this member; ``running`` is what it ran and must stop now."""

    running: Allocation


@dataclass(frozen=True)
class Undecodable:
    """The leader's assignment could not be decoded (another connectd version is leader)."""

    error: ProtocolError


Event = Assigned | Lost | Undecodable


class _GroupAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """The single assignor instance; aiokafka calls ``metadata`` on every join, ``assign`` on the
    leader (synchronously, in the coordination task) and ``on_assignment`` on every member."""

    name = "connectd-v1"
    version = 0

    def __init__(self, member: Member) -> None:
        self._member = member
        self._state = LeaderState()
        self.received: Assignment | ProtocolError | None = None

    def metadata(self, topics: Any) -> ConsumerProtocolMemberMetadata:
        m = self._member
        meta = MemberMetadata(m.settings.url, m.config().offset, m.running, m.settings.storage)
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), encode_metadata(meta))

    def assign(self, cluster: Any, member_metadata: Mapping[str, Any]) -> dict[str, Any]:
        m = self._member
        decoded: dict[str, MemberMetadata] = {}
        for mid, meta in member_metadata.items():
            try:
                decoded[mid] = decode_metadata(meta.user_data)
            except ProtocolError as e:
                log.error("group %s: member %s gets no work: %s", m.settings.group_id, mid, e)
        leader = coordinator.member_id(m.consumer)
        config = m.config()
        if leader not in decoded:  # cannot happen unless our own metadata failed: assign nothing
            decoded = {}
        result = assign(
            decoded,
            config,
            self._state if decoded else LeaderState(),
            leader=leader,
            now_ms=m.clock_ms(),
            policy=m.settings.policy,
            left_on_purpose=m.left_on_purpose(),
            departed=m.departed(),
        )
        self._state = result.state
        leader_url = m.settings.url
        empty = Assignment(AssignmentError.NONE, leader, leader_url, config.offset)
        return {
            mid: ConsumerProtocolMemberAssignment(
                self.version, [], encode_assignment(result.assignments.get(mid, empty))
            )
            for mid in member_metadata
        }

    def on_assignment(self, assignment: Any) -> None:
        try:
            self.received = decode_assignment(assignment.user_data)
        except ProtocolError as e:
            self.received = e


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, member: Member) -> None:
        self._member = member

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._member._on_rebalance_start()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._member._on_assignment()


class Member:
    """``async with Member(settings, config) as m:`` joins the group; leaving the block sends
    LeaveGroup (``leave()``). ``config`` returns the config this worker has read (its offset goes
    into the metadata; on the leader it is what gets assigned); ``left_on_purpose`` returns the
    member ids known to have left on purpose (their work is reserved for the delay), ``departed``
    what those said they ran (member id → URL, work, ms since it left)."""

    def __init__(
        self,
        settings: MemberSettings,
        config: Callable[[], ClusterConfig],
        *,
        left_on_purpose: Callable[[], frozenset[str]] = frozenset,
        departed: Callable[[], Mapping[str, tuple[str, Allocation, int]]] = dict,
        clock_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
    ) -> None:
        self.settings = settings
        self.config = config
        self.left_on_purpose = left_on_purpose
        self.departed = departed
        self.clock_ms = clock_ms
        self.running: Allocation = EMPTY
        self._assignor = _GroupAssignor(self)
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._joined_once = False
        self._pump: asyncio.Task[None] | None = None
        self._delay: asyncio.TimerHandle | None = None
        s = settings
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=s.bootstrap_servers,
            group_id=s.group_id,
            enable_auto_commit=False,
            partition_assignment_strategy=(self._assignor,),
            session_timeout_ms=s.session_timeout_ms,
            heartbeat_interval_ms=s.heartbeat_interval_ms,
            rebalance_timeout_ms=s.rebalance_timeout_ms,
            max_poll_interval_ms=s.rebalance_timeout_ms,
            **dict(s.client),
        )

    async def __aenter__(self) -> Member:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.leave()

    async def start(self) -> None:
        self.consumer.subscribe([self.settings.topic], listener=_Listener(self))
        await self.consumer.start()
        self._pump = asyncio.create_task(self._run_pump(), name=f"group-pump-{self.settings.url}")

    async def _run_pump(self) -> None:
        # Partitions are never assigned, so this returns nothing; it keeps aiokafka's idle check
        # satisfied and surfaces coordinator errors.
        while True:
            try:
                await self.consumer.getmany(timeout_ms=1000)
            except KafkaError as e:
                log.warning("group %s: %s; still trying", self.settings.group_id, e)
                await asyncio.sleep(1)

    async def leave(self) -> None:
        """Leave the group on purpose (LeaveGroup) and stop; safe to call twice."""
        if self._delay is not None:
            self._delay.cancel()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
            self._pump = None
        await self.consumer.stop()

    @property
    def is_member(self) -> bool:
        return coordinator.is_member(self.consumer)

    @property
    def member_id(self) -> str:
        return coordinator.member_id(self.consumer)

    def request_rejoin(self) -> None:
        """Rejoin now with fresh metadata (after a config change or after stopping revoked work)."""
        coordinator.request_rejoin(self.consumer)

    async def events(self) -> AsyncIterator[Event]:
        while True:
            yield await self._events.get()

    async def next_event(self) -> Event:
        return await self._events.get()

    # --- called from aiokafka's coordination task: never block -------------------------------

    def _on_rebalance_start(self) -> None:
        if self._joined_once and not coordinator.is_member(self.consumer) and self.running:
            lost, self.running = self.running, EMPTY
            self._events.put_nowait(Lost(lost))

    def _on_assignment(self) -> None:
        self._joined_once = True
        received, self._assignor.received = self._assignor.received, None
        if received is None:
            return
        if isinstance(received, ProtocolError):
            self._events.put_nowait(Undecodable(received))
            return
        if received.error is AssignmentError.NONE:
            self.running = (self.running - received.revoked) | received.assigned
        mid = coordinator.member_id(self.consumer)
        event = Assigned(
            coordinator.generation(self.consumer),
            mid,
            received.leader == mid,
            received,
            self.running,
        )
        self._events.put_nowait(event)
        if self._delay is not None:
            self._delay.cancel()
            self._delay = None
        if received.delay_ms > 0:
            loop = asyncio.get_running_loop()
            self._delay = loop.call_later(received.delay_ms / 1000, self.request_rejoin)
