"""The incremental cooperative assignor, driven round by round like a group would drive it:
every member reports what it runs, applies its assignment (stops ``revoked``, starts
``assigned``) and rejoins. Each round checks that nothing runs on two members and that nothing is
assigned while another member still runs it."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from daemon.cluster.assignor import ClusterConfig, LeaderState, Policy, assign
from daemon.cluster.protocol import (
    EMPTY,
    Allocation,
    Assignment,
    AssignmentError,
    MemberMetadata,
)
from daemon.structs import TaskId

DELAY = 10_000


def union(allocs: Iterable[Allocation]) -> Allocation:
    out = EMPTY
    for a in allocs:
        out = out | a
    return out


def config(offset: int = 5, **tasks: int) -> ClusterConfig:
    return ClusterConfig(offset, tasks)


@dataclass
class Group:
    """A simulated group: member id → (url, what it runs), the leader's state and a clock."""

    config: ClusterConfig
    policy: Policy = field(default_factory=lambda: Policy(max_delay_ms=DELAY))
    members: dict[str, tuple[str, Allocation]] = field(default_factory=dict)
    state: LeaderState = field(default_factory=LeaderState)
    now: int = 1_000
    left: set[str] = field(default_factory=set)
    last: dict[str, Assignment] = field(default_factory=dict)

    def join(self, mid: str, url: str | None = None) -> None:
        self.members[mid] = (url or f"http://{mid}", EMPTY)

    def drop(self, mid: str, *, on_purpose: bool) -> None:
        del self.members[mid]
        if on_purpose:
            self.left.add(mid)

    def round(self) -> dict[str, Assignment]:
        meta = {
            m: MemberMetadata(url, self.config.offset, run)
            for m, (url, run) in self.members.items()
        }
        leader = min(self.members)
        result = assign(
            meta,
            self.config,
            self.state,
            leader=leader,
            now_ms=self.now,
            policy=self.policy,
            left_on_purpose=frozenset(self.left),
        )
        assert set(result.assignments) == set(self.members)
        running_before = {m: run for m, (_, run) in self.members.items()}
        for mid, a in result.assignments.items():
            assert a.error is AssignmentError.NONE
            assert a.leader == leader and a.leader_url == self.members[leader][0]
            # revocation before assignment: nothing assigned is still run by anyone
            for other, run in running_before.items():
                assert not (a.assigned & run), (mid, other, a.assigned & run)
            assert not (a.assigned & a.revoked)
            url, run = self.members[mid]
            assert a.revoked - run == EMPTY  # only what it runs is revoked
            self.members[mid] = (url, (run - a.revoked) | a.assigned)
        self.state = result.state
        self.last = dict(result.assignments)
        self.check_no_duplicates()
        return self.last

    def settle(self, rounds: int = 4) -> None:
        for _ in range(rounds):
            self.round()

    def check_no_duplicates(self) -> None:
        seen = EMPTY
        for _, run in self.members.values():
            assert not (seen & run), seen & run
            seen = seen | run

    def running(self) -> Allocation:
        out = EMPTY
        for _, run in self.members.values():
            out = out | run
        return out

    def check_balanced_and_complete(self) -> None:
        assert self.running() == self.config.work()
        cs = [len(run.connectors) for _, run in self.members.values()]
        ts = [len(run.tasks) for _, run in self.members.values()]
        assert max(cs) - min(cs) <= 1, cs
        assert max(ts) - min(ts) <= 1, ts


def test_three_members_get_everything_balanced_in_one_round() -> None:
    g = Group(config(a=3, b=4, c=2))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.round()
    g.check_balanced_and_complete()
    assert all(a.revoked == EMPTY and a.delay_ms == 0 for a in g.last.values())
    assert all(a.config_offset == 5 for a in g.last.values())


def test_a_new_member_takes_a_share_revoked_first_then_assigned() -> None:
    g = Group(config(a=6, b=6))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.round()
    before = {m: run for m, (_, run) in g.members.items()}
    g.join("m4")
    first = g.round()
    assert first["m4"].assigned == EMPTY  # nothing free yet: others must stop it first
    revoked = sum(len(a.revoked.tasks) + len(a.revoked.connectors) for a in first.values())
    assert revoked == 3 + 0  # 12 tasks / 4 = 3 each; the 2 connectors stay
    second = g.round()
    assert len(second["m4"].assigned.tasks) == 3
    g.check_balanced_and_complete()
    # sticky: every old member kept what it was not asked to give up
    for m, run in before.items():
        assert len(run.tasks - g.members[m][1].tasks) == len(first[m].revoked.tasks)
    assert all(a.revoked == EMPTY and a.assigned == EMPTY for a in g.round().values())


def test_a_stable_group_moves_nothing() -> None:
    g = Group(config(a=5, b=1))
    for m in ("m1", "m2"):
        g.join(m)
    g.settle()
    for a in g.round().values():
        assert a.assigned == EMPTY and a.revoked == EMPTY


def test_deleted_work_is_revoked_and_new_work_goes_to_the_least_loaded() -> None:
    g = Group(config(a=4, b=2))
    for m in ("m1", "m2"):
        g.join(m)
    g.settle()
    g.config = config(6, a=4, c=1)
    out = g.round()
    gone = Allocation.of(["b"], [TaskId("b", 0), TaskId("b", 1)])
    assert union(a.revoked for a in out.values()) == gone
    assert union(a.assigned for a in out.values()) == Allocation.of(["c"], [TaskId("c", 0)])
    # c went to the member left without a connector once b was revoked
    assert all(len(run.connectors) == 1 for _, run in g.members.values())
    g.settle()
    g.check_balanced_and_complete()


def test_a_member_that_left_on_purpose_keeps_its_work_reserved_for_the_delay() -> None:
    g = Group(config(a=6))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.settle()
    theirs = g.members["m3"][1]
    g.drop("m3", on_purpose=True)
    out = g.round()
    assert all(a.delay_ms == DELAY for a in out.values())
    assert not (g.running() & theirs)  # not assigned to anyone during the delay
    g.now += DELAY - 1
    out = g.round()
    assert all(a.delay_ms == 1 for a in out.values())
    assert not (g.running() & theirs)
    g.now += 1
    out = g.round()
    assert all(a.delay_ms == 0 for a in out.values())
    assert (g.running() & theirs) == theirs  # placed once the delay ended
    g.settle()
    g.check_balanced_and_complete()


def test_a_member_that_comes_back_within_the_delay_gets_its_work_back() -> None:
    g = Group(config(a=3, b=3))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.settle()
    theirs = g.members["m3"][1]
    g.drop("m3", on_purpose=True)
    g.round()
    g.now += 100
    g.join("m3-again", url="http://m3")  # a restart: new member id, same URL
    out = g.round()
    assert out["m3-again"].assigned == theirs
    assert all(a.delay_ms == 0 for a in out.values())


def test_a_crashed_member_has_its_work_moved_at_once() -> None:
    g = Group(config(a=6))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.settle()
    g.drop("m3", on_purpose=False)
    out = g.round()
    assert all(a.delay_ms == 0 for a in out.values())
    g.check_balanced_and_complete()


def test_connects_exact_behaviour_reserves_a_crashed_members_work_too() -> None:
    g = Group(config(a=6), policy=Policy(max_delay_ms=DELAY, delay_crashed=True))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.settle()
    theirs = g.members["m3"][1]
    g.drop("m3", on_purpose=False)
    out = g.round()
    assert all(a.delay_ms == DELAY for a in out.values())
    assert not (g.running() & theirs)


def test_a_zero_delay_moves_work_of_a_member_that_left_on_purpose_at_once() -> None:
    g = Group(config(a=6), policy=Policy(max_delay_ms=0))
    for m in ("m1", "m2"):
        g.join(m)
    g.settle()
    g.drop("m2", on_purpose=True)
    g.round()
    g.check_balanced_and_complete()


def test_work_reported_by_two_members_is_revoked_from_both_then_placed_once() -> None:
    g = Group(config(a=2))
    t0 = TaskId("a", 0)
    g.members = {
        "m1": ("http://m1", Allocation.of(["a"], [t0])),
        "m2": ("http://m2", Allocation.of([], [t0])),
    }
    meta = {m: MemberMetadata(u, 5, r) for m, (u, r) in g.members.items()}
    out = assign(meta, g.config, LeaderState(), leader="m1", now_ms=0, policy=g.policy)
    assert all(t0 in a.revoked.tasks for a in out.assignments.values())
    assert all(t0 not in a.assigned.tasks for a in out.assignments.values())
    for m, a in out.assignments.items():
        url, run = g.members[m]
        g.members[m] = (url, (run - a.revoked) | a.assigned)
    g.settle()
    g.check_balanced_and_complete()


def test_a_member_ahead_of_the_leaders_config_gets_everyone_config_mismatch() -> None:
    meta = {
        "m1": MemberMetadata("http://m1", 5),
        "m2": MemberMetadata("http://m2", 8),
    }
    state = LeaderState()
    out = assign(meta, config(5, a=1), state, leader="m1", now_ms=0, policy=Policy())
    assert {a.error for a in out.assignments.values()} == {AssignmentError.CONFIG_MISMATCH}
    assert {a.config_offset for a in out.assignments.values()} == {8}
    assert all(not a.assigned and not a.revoked for a in out.assignments.values())
    assert out.state is state


def test_a_new_leader_rebuilds_the_picture_from_what_members_report() -> None:
    g = Group(config(a=4, b=5))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.settle()
    g.drop("m1", on_purpose=False)  # the leader crashed; m2 leads, knowing nothing
    g.state = LeaderState()
    kept = {m: run for m, (_, run) in g.members.items()}
    out = g.round()
    assert all(a.revoked == EMPTY for a in out.values())  # nothing running is disturbed
    for m, run in kept.items():
        assert (g.members[m][1] & run) == run
    g.settle()
    g.check_balanced_and_complete()


def test_random_joins_leaves_and_config_changes_keep_every_invariant() -> None:
    rng = random.Random(1414)
    for _ in range(40):
        g = Group(config(a=rng.randint(0, 8)))
        next_id = 0
        for _ in range(60):
            move = rng.random()
            if move < 0.25 or len(g.members) < 1:
                next_id += 1
                g.join(f"m{next_id:03}")
            elif move < 0.4 and len(g.members) > 1:
                victim = rng.choice(sorted(g.members))
                g.drop(victim, on_purpose=rng.random() < 0.5)
            elif move < 0.55:
                names = rng.sample("abcdef", rng.randint(0, 4))
                tasks = {n: rng.randint(0, 7) for n in names}
                g.config = ClusterConfig(g.config.offset + 1, tasks)
            elif move < 0.7:
                g.now += rng.randint(0, 2 * DELAY)
            g.round()
        g.now += DELAY  # every reservation ends
        g.settle(5)
        g.check_balanced_and_complete()


def test_a_member_keeping_other_topics_gets_no_work_and_moves_nothing() -> None:
    """A worker of the group whose config/offset/status topics are not the group's (issue 33):
    it gets FOREIGN_STORAGE naming the group's topics, the others keep what they run."""
    ours, theirs = ("c", "o", "s"), ("c2", "o", "s")
    cfg = config(a=4)
    running = {
        "m1": Allocation.of(["a"], [TaskId("a", 0), TaskId("a", 1)]),
        "m2": Allocation.of([], [TaskId("a", 2), TaskId("a", 3)]),
    }
    members = {
        "m1": MemberMetadata("http://m1", 5, running["m1"], ours),
        "m2": MemberMetadata("http://m2", 5, running["m2"], ours),
        "m3": MemberMetadata("http://m3", 5, EMPTY, theirs),
    }
    done = assign(members, cfg, LeaderState(), leader="m1", now_ms=0, policy=Policy())
    out = done.assignments
    assert out["m3"].error is AssignmentError.FOREIGN_STORAGE and out["m3"].storage == ours
    assert not out["m3"].assigned
    for mid in ("m1", "m2"):
        assert out[mid].error is AssignmentError.NONE
        assert not out[mid].revoked and not out[mid].assigned  # nothing moved
    # The odd one is the leader: its snapshot is another config log's, so nothing is assigned;
    # every member hears the group's topics (the leader leaves, the others rejoin).
    odd = assign(members, cfg, LeaderState(), leader="m3", now_ms=0, policy=Policy())
    assert {a.error for a in odd.assignments.values()} == {AssignmentError.FOREIGN_STORAGE}
    assert {a.storage for a in odd.assignments.values()} == {ours}
    # A tie: the leader's topics are the group's.
    pair = {"m1": members["m1"], "m3": members["m3"]}
    tie = assign(pair, cfg, LeaderState(), leader="m1", now_ms=0, policy=Policy())
    assert tie.assignments["m3"].error is AssignmentError.FOREIGN_STORAGE
    assert tie.assignments["m1"].error is AssignmentError.NONE


def _spread_of(g: Group, connector: str) -> list[int]:
    return sorted(
        sum(1 for t in run.tasks if t.connector == connector) for _, run in g.members.values()
    )


def test_each_connectors_tasks_spread_after_a_worker_returns_and_a_rolling_restart() -> None:
    """Issue 33, tried on three workers: a ParquetSink with tasks.max=6 and 14 one-task
    EchoSinks. A worker gone and back (SIGSTOP past its session) used to get the whole
    ParquetSink back (its tasks sort last, and the last were revoked for balance); a rolling
    restart ended 3/3/0. Now each connector's tasks end spread, the totals balanced."""
    g = Group(config(p=6, **{f"echo{i:02d}": 1 for i in range(14)}))
    for m in ("m1", "m2", "m3"):
        g.join(m)
    g.settle()
    g.check_balanced_and_complete()
    assert _spread_of(g, "p") == [2, 2, 2]
    # m2 cut off past its session (its work moved at once), then back as a new member id
    g.drop("m2", on_purpose=False)
    g.settle()
    assert _spread_of(g, "p") == [3, 3]
    g.join("m2b", "http://m2")
    g.settle()
    g.check_balanced_and_complete()
    assert _spread_of(g, "p") == [2, 2, 2]
    # a rolling restart: each worker leaves on purpose and comes back (new id, same URL)
    for old, new in (("m1", "m1b"), ("m2b", "m2c"), ("m3", "m3b")):
        url = g.members[old][0]
        g.drop(old, on_purpose=True)
        g.settle()
        g.join(new, url)
        g.settle()
    g.now += DELAY + 1
    g.settle()
    g.check_balanced_and_complete()
    assert _spread_of(g, "p") == [2, 2, 2]
    assert all(a.revoked == EMPTY and a.assigned == EMPTY for a in g.round().values())


def test_a_new_leader_reserves_the_work_the_old_leader_said_it_ran() -> None:
    """The old leader left on purpose (a rolling restart) and wrote what it ran; the new
    leader, which never saw it in a round, keeps that work reserved until the delay after it
    left, gives it back if it returns, and places it once the delay has passed."""
    cfg = config(a=6)
    theirs = Allocation.of(["a"], [TaskId("a", 0), TaskId("a", 1)])
    ours = {
        "m2": Allocation.of([], [TaskId("a", 2), TaskId("a", 3)]),
        "m3": Allocation.of([], [TaskId("a", 4), TaskId("a", 5)]),
    }
    members = {m: MemberMetadata(f"http://{m}", 5, run) for m, run in ours.items()}
    policy = Policy(max_delay_ms=DELAY)
    departed = {"m1": ("http://m1", theirs, 1_000)}  # left a second ago
    held = assign(
        members,
        cfg,
        LeaderState(),
        leader="m2",
        now_ms=50_000,
        policy=policy,
        left_on_purpose=frozenset({"m1"}),
        departed=departed,
    )
    assert not any(a.assigned & theirs for a in held.assignments.values())
    assert {a.delay_ms for a in held.assignments.values()} == {DELAY - 1_000}
    back = dict(members, m1b=MemberMetadata("http://m1", 5, EMPTY))
    again = assign(
        back, cfg, held.state, leader="m2", now_ms=52_000, policy=policy, departed=departed
    )
    assert again.assignments["m1b"].assigned == theirs
    stale = {"m1": ("http://m1", theirs, DELAY + 1)}  # left longer ago than the delay
    moved = assign(
        members, cfg, LeaderState(), leader="m2", now_ms=50_000, policy=policy, departed=stale
    )
    placed = EMPTY
    for a in moved.assignments.values():
        placed = placed | a.assigned
    assert placed == theirs
