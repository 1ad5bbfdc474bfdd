"""The worker group on a real broker: members in this process (and one in a child process, to be
SIGSTOPped), one group, the assignor in the leader. After every event the test checks that no
connector or task runs on two live members at once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from support.kafka_fixtures import TopicFactory

from daemon.cluster import Assigned, ClusterConfig, Lost, Member, MemberSettings
from daemon.cluster.assignor import Policy
from daemon.cluster.protocol import EMPTY, Allocation, decode_assignment
from daemon.structs import TaskId

pytestmark = pytest.mark.integration

CONFIG = ClusterConfig(1, {"a": 3, "b": 3, "c": 2})
WORK = CONFIG.work()
CHILD = Path(__file__).with_name("member_child.py")


@dataclass
class Record:
    at: float
    name: str
    event: Assigned | Lost


@dataclass
class Cluster:
    bootstrap: str
    topic: str
    policy: Policy
    group: str = field(default_factory=lambda: f"connectd-test-{uuid.uuid4().hex[:8]}")
    members: dict[str, Member] = field(default_factory=dict)
    left: set[str] = field(default_factory=set)
    log: list[Record] = field(default_factory=list)
    external: dict[str, Allocation] = field(default_factory=dict)  # the child's last report
    watchers: list[asyncio.Task[None]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    configs: dict[str, ClusterConfig] = field(default_factory=dict)  # what each has read
    work: Allocation = WORK

    def settings(self, name: str) -> MemberSettings:
        return MemberSettings(
            self.group,
            self.bootstrap,
            self.topic,
            f"http://{name}",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
            rebalance_timeout_ms=10_000,
            policy=self.policy,
        )

    async def add(self, name: str) -> Member:
        member = Member(
            self.settings(name),
            lambda: self.configs.get(name, CONFIG),
            left_on_purpose=lambda: frozenset(self.left),
        )
        await member.start()
        self.members[name] = member
        self.watchers.append(asyncio.create_task(self._watch(name, member)))
        return member

    async def _watch(self, name: str, member: Member) -> None:
        async for event in member.events():
            if isinstance(event, Assigned | Lost):
                self.log.append(Record(time.monotonic(), name, event))
            self.check_disjoint()
            if isinstance(event, Assigned) and event.assignment.revoked:
                # what the owner does: stop the revoked work, then rejoin so it can be placed
                member.request_rejoin()

    def running(self) -> dict[str, Allocation]:
        out = {name: m.running for name, m in self.members.items()}
        out.update(self.external)
        return out

    def check_disjoint(self) -> None:
        seen = EMPTY
        for name, run in self.running().items():
            if seen & run:
                self.violations.append(f"{name} runs {seen & run} that another member runs")
            seen = seen | run

    def settled(self, names: set[str]) -> bool:
        """All of ``self.work`` runs on exactly ``names``, balanced."""
        self.check_disjoint()
        running = {n: r for n, r in self.running().items() if n in names}
        if set(running) != names:
            return False
        total = EMPTY
        for r in running.values():
            total = total | r
        cs = [len(r.connectors) for r in running.values()]
        ts = [len(r.tasks) for r in running.values()]
        return total == self.work and max(cs) - min(cs) <= 1 and max(ts) - min(ts) <= 1

    async def close(self) -> None:
        for task in self.watchers:
            task.cancel()
        for member in self.members.values():
            await member.leave()


async def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.fixture
async def cluster(kafka_bootstrap: str, kafka_topic: TopicFactory) -> AsyncIterator[Cluster]:
    c = Cluster(kafka_bootstrap, await kafka_topic(1), Policy(max_delay_ms=4000))
    yield c
    await c.close()
    assert not c.violations, c.violations


async def test_three_members_one_leader_everything_once_balanced(cluster: Cluster) -> None:
    for name in ("w1", "w2", "w3"):
        await cluster.add(name)
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3"}), 60, "three members share the work")
    last = max(r.event.generation for r in cluster.log if isinstance(r.event, Assigned))
    final = [r.event for r in cluster.log if isinstance(r.event, Assigned)]
    final = [e for e in final if e.generation == last]
    assert len(final) == 3 and sum(e.leader for e in final) == 1
    leader = next(e for e in final if e.leader)
    assert {e.assignment.leader for e in final} == {leader.member_id}
    assert all(m.is_member for m in cluster.members.values())


async def test_a_fourth_member_gets_a_share_only_after_others_stopped_it(cluster: Cluster) -> None:
    for name in ("w1", "w2", "w3"):
        await cluster.add(name)
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3"}), 60, "three members share the work")
    mark = len(cluster.log)
    await cluster.add("w4")
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3", "w4"}), 60, "w4 takes a share")
    after = [r for r in cluster.log[mark:] if isinstance(r.event, Assigned)]
    # Each share w4 is given (a loaded machine may take more rounds than one) was stopped by
    # its holder in an earlier generation.
    given = [r.event for r in after if r.name == "w4" and r.event.assignment.assigned]
    assert given and cluster.members["w4"].running, "w4 got no share"
    for got in given:
        revoked_before = EMPTY
        for r in after:
            if r.event.generation < got.generation:
                revoked_before = revoked_before | r.event.assignment.revoked
        unstopped = got.assignment.assigned - revoked_before
        assert unstopped == EMPTY, f"w4 got work nobody had stopped: {unstopped}"


async def test_a_member_that_leaves_keeps_its_work_reserved_for_the_delay(cluster: Cluster) -> None:
    for name in ("w1", "w2", "w3"):
        await cluster.add(name)
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3"}), 60, "three members share the work")
    leaver = cluster.members.pop("w3")
    theirs = leaver.running
    cluster.left.add(leaver.member_id)
    mark = len(cluster.log)
    await leaver.leave()
    assert not leaver.is_member

    def reserved() -> bool:
        return any(
            isinstance(r.event, Assigned) and r.event.assignment.delay_ms > 0
            for r in cluster.log[mark:]
        )

    await wait_for(reserved, 30, "a rebalance that reserves w3's work")
    noticed = time.monotonic()
    assert not (cluster.running()["w1"] | cluster.running()["w2"]) & theirs
    await wait_for(lambda: cluster.settled({"w1", "w2"}), 30, "w3's work moves after the delay")
    assert time.monotonic() - noticed >= 3.0  # the 4 s delay, less the time it took to notice


@pytest.fixture
async def child(cluster: Cluster) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        cluster.bootstrap,
        cluster.group,
        cluster.topic,
        "http://child",
        json.dumps(dict(CONFIG.task_counts)),
        stdout=asyncio.subprocess.PIPE,
    )
    yield proc
    if proc.returncode is None:
        os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()


async def test_a_member_whose_session_expires_loses_its_work_at_once(
    cluster: Cluster, child: asyncio.subprocess.Process
) -> None:
    cluster.policy = Policy(max_delay_ms=60_000)  # what a member that left on purpose would get
    lost: list[Allocation] = []

    async def read_child() -> None:
        assert child.stdout is not None
        async for line in child.stdout:
            msg = json.loads(line)
            run = msg["running"]
            alloc = Allocation.of(run["connectors"], (TaskId(c, i) for c, i in run["tasks"]))
            if msg["kind"] == "lost":
                lost.append(alloc)
                alloc = EMPTY
            cluster.external["child"] = alloc
            cluster.check_disjoint()

    reader = asyncio.create_task(read_child())
    for name in ("w1", "w2"):
        await cluster.add(name)
    await wait_for(lambda: cluster.settled({"w1", "w2", "child"}), 60, "three members share")
    theirs = cluster.external["child"]
    os.kill(child.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    cluster.external.pop("child")  # a zombie now: its work is fenced elsewhere, not here
    await wait_for(lambda: cluster.settled({"w1", "w2"}), 40, "the stopped member's work moves")
    moved_after = time.monotonic() - stopped
    # moved when the session expired, not after the 60 s scheduled delay
    assert moved_after < 30, moved_after
    assert not any(
        isinstance(r.event, Assigned) and r.event.assignment.delay_ms for r in cluster.log
    )
    os.kill(child.pid, signal.SIGCONT)
    await wait_for(lambda: bool(lost), 30, "the woken member to notice it is no longer a member")
    assert lost[0] == theirs
    await wait_for(
        lambda: cluster.settled({"w1", "w2", "child"}), 60, "it rejoins and gets a share"
    )
    child.send_signal(signal.SIGTERM)
    await asyncio.wait_for(child.wait(), 30)
    reader.cancel()


async def test_a_config_change_makes_a_rejoin_a_real_rebalance(cluster: Cluster) -> None:
    for name in ("w1", "w2", "w3"):
        await cluster.add(name)
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3"}), 60, "three members share the work")
    leader = next(
        r.name for r in reversed(cluster.log) if isinstance(r.event, Assigned) and r.event.leader
    )
    follower = next(n for n in ("w1", "w2", "w3") if n != leader)
    newer = ClusterConfig(2, {**CONFIG.task_counts, "d": 4})
    # a follower read further than the leader: everyone is told CONFIG_MISMATCH
    cluster.configs[follower] = newer
    mark = len(cluster.log)
    cluster.members[follower].request_rejoin()

    def mismatch_seen() -> bool:
        return (
            sum(
                isinstance(r.event, Assigned) and r.event.assignment.error == "CONFIG_MISMATCH"
                for r in cluster.log[mark:]
            )
            >= 3
        )

    await wait_for(mismatch_seen, 30, "CONFIG_MISMATCH for all three members")
    assert all(
        r.event.assignment.config_offset == 2
        for r in cluster.log[mark:]
        if isinstance(r.event, Assigned) and r.event.assignment.error == "CONFIG_MISMATCH"
    )
    # everyone catches up; the rejoin of the one follower whose offset changed (1 -> 2) is
    # enough to start a real rebalance (unchanged metadata would just get the same generation)
    for name in ("w1", "w2", "w3"):
        cluster.configs[name] = newer
    cluster.work = newer.work()
    other = next(n for n in ("w1", "w2", "w3") if n not in (leader, follower))
    cluster.members[other].request_rejoin()
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3"}), 60, "the new connector placed")


class _Garbage:
    """A member that speaks the protocol's name but sends bytes that are not connectd's."""

    name = "connectd-v1"
    version = 0

    def __init__(self) -> None:
        self.received: list[bytes] = []

    def metadata(self, topics: object) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(0, sorted(topics), b"\xff\x00 not json")

    def assign(self, cluster: object, members: dict[str, object]) -> dict[str, object]:
        raise AssertionError("the garbage member must not lead in this test")

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self.received.append(assignment.user_data)


async def test_a_member_with_undecodable_metadata_gets_an_empty_assignment(
    cluster: Cluster,
) -> None:
    for name in ("w1", "w2", "w3"):
        await cluster.add(name)
    await wait_for(lambda: cluster.settled({"w1", "w2", "w3"}), 60, "three members share the work")
    before = {n: m.running for n, m in cluster.members.items()}
    garbage = _Garbage()
    consumer = AIOKafkaConsumer(
        cluster.topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=cluster.group,
        enable_auto_commit=False,
        partition_assignment_strategy=(garbage,),
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        rebalance_timeout_ms=10_000,
    )
    await consumer.start()
    try:
        pump = asyncio.create_task(consumer.getmany(timeout_ms=30_000))
        await wait_for(lambda: bool(garbage.received), 30, "an assignment for the garbage member")
        pump.cancel()
        got = decode_assignment(garbage.received[0])
        assert got.error == "NONE" and not got.assigned and not got.revoked
    finally:
        await consumer.stop()
    # nobody else lost or gained anything, and nobody failed to decode
    assert {n: m.running for n, m in cluster.members.items()} == before
    assert all(m.is_member for m in cluster.members.values())


async def test_each_connectors_tasks_end_spread_across_members(cluster: Cluster) -> None:
    """Issue 33's three workers: a connector with six tasks and fourteen one-task connectors.
    A member gone without notice and back, then a rolling restart of all three: each time the
    six tasks end two per member (they used to end all on one, or 3/3/0)."""
    spread = ClusterConfig(1, {"p": 6, **{f"echo{i:02d}": 1 for i in range(14)}})
    cluster.work = spread.work()
    cluster.policy = Policy(max_delay_ms=2000)
    names = ("w1", "w2", "w3")
    for name in names:
        cluster.configs[name] = spread
        await cluster.add(name)

    def p_spread() -> list[int]:
        runs = cluster.running().values()
        return sorted(sum(1 for t in r.tasks if t.connector == "p") for r in runs)

    def spread_settled() -> bool:
        return cluster.settled(set(cluster.members)) and p_spread() == [2, 2, 2]

    await wait_for(spread_settled, 60, "the six tasks two per member")
    gone = cluster.members.pop("w3")
    await gone.leave()  # not in `left`: as a crash, its work moves at once
    await wait_for(lambda: cluster.settled({"w1", "w2"}), 60, "w3's work moved")
    await cluster.add("w3")  # back, a new member id at the same URL
    await wait_for(spread_settled, 60, "spread again once w3 is back")
    for name in names:  # a rolling restart: each leaves on purpose and comes back
        leaver = cluster.members.pop(name)
        cluster.left.add(leaver.member_id)
        await leaver.leave()
        await cluster.add(name)
        await wait_for(spread_settled, 60, f"spread again after {name}'s restart")
