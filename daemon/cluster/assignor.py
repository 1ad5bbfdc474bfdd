"""The incremental cooperative assignor: who runs which connector and task. Pure: no I/O, no clock
of its own, nothing global; the leader calls ``assign`` once per rebalance and keeps the returned
``LeaderState`` for the next one.

Rules (after Connect's ``IncrementalCooperativeAssignor``, with issue 14's 6(a) on top):

- **Never on two members at once.** Work is assigned only if no present member reports running
  it, it is not reserved for a departed member and it is not revoked in this same round. Work
  revoked for balance is assigned in the *next* round, after its owner has stopped it and
  rejoined without it.
- **Deleted work is revoked**; work reported by two members is revoked from both.
- **Sticky.** Work stays where it runs; only a member's excess over its balanced share is revoked.
- **Balanced.** Connectors and tasks are spread separately; once the revoked work is placed the
  counts of any two members differ by at most one (work reserved for a departed member aside).
- **Each connector's tasks spread.** Which of a member's tasks are revoked for balance: those of
  the connector it holds most over that connector's fair share (ceil(its tasks / members));
  where new work goes among the least loaded: the member holding fewest of that connector's
  tasks. Stickiness first: nothing is revoked for spreading alone.
- **Departed members.** A member that left on purpose (``left_on_purpose``) keeps its work
  reserved for ``max_delay_ms``; every assignment then carries ``delay_ms`` so members rejoin
  when it ends. A member that comes back (same URL) within the delay gets its work back. A
  member that crashed (gone without being in ``left_on_purpose``) has its work moved at once,
  unless ``Policy.delay_crashed`` restores Connect's behaviour (reserve it too).
- **One set of topics.** Members that say which config, offset and status topics they keep
  (``MemberMetadata.storage``) must all keep the same: the topics most members keep (the
  leader's on a tie) are the group's, a member with others gets ``FOREIGN_STORAGE`` naming the
  group's and no work, and the rest are assigned as if it were not there. When the leader is
  the odd one, its snapshot is of another config log: every member gets ``FOREIGN_STORAGE``,
  nothing moves, the leader leaves and the others rejoin.
- **Leader config check.** If a member has read the config log further than the leader's
  snapshot, every member gets ``CONFIG_MISMATCH`` (Connect's ``ensureLeaderConfig``).
- **A new leader** starts from ``LeaderState()``: what runs comes from the members' reports.
  A member that left on purpose before it took over, the old leader among them, said what it
  ran on its way out (``departed``: URL, work, how long ago): that work is reserved until
  ``max_delay_ms`` after it left, as the old leader would have kept it (Connect places it at
  once).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from daemon.cluster.protocol import (
    EMPTY,
    Allocation,
    Assignment,
    AssignmentError,
    MemberMetadata,
)
from daemon.storage.kafka import ConfigSnapshot
from daemon.structs import TaskId

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class ClusterConfig:
    """The work to spread: connectors and their task counts, as of config ``offset``."""

    offset: int
    task_counts: Mapping[str, int]

    @staticmethod
    def from_snapshot(snapshot: ConfigSnapshot) -> ClusterConfig:
        counts = {name: len(snapshot.tasks(name)) for name in snapshot.connectors}
        return ClusterConfig(snapshot.offset, MappingProxyType(counts))

    def work(self) -> Allocation:
        tasks = (TaskId(c, i) for c, n in self.task_counts.items() for i in range(n))
        return Allocation.of(self.task_counts, tasks)


@dataclass(frozen=True)
class Policy:
    """``max_delay_ms`` is ``scheduled.rebalance.max.delay.ms``; ``delay_crashed`` = True reserves
    a crashed member's work too, exactly as Connect does."""

    max_delay_ms: int = 300_000
    delay_crashed: bool = False


@dataclass(frozen=True)
class Reserved:
    """Work of a departed member (by URL) held back until ``deadline_ms``."""

    allocation: Allocation
    deadline_ms: int


@dataclass(frozen=True)
class LeaderState:
    """What the leader remembers between rounds: each member's URL and work after the last round,
    and the reservations still running."""

    members: Mapping[str, tuple[str, Allocation]] = field(default_factory=dict)
    reserved: Mapping[str, Reserved] = field(default_factory=dict)


@dataclass(frozen=True)
class Round:
    assignments: Mapping[str, Assignment]
    state: LeaderState


def _union(allocs: Iterable[Allocation]) -> Allocation:
    out = EMPTY
    for a in allocs:
        out = out | a
    return out


def assign(
    members: Mapping[str, MemberMetadata],
    config: ClusterConfig,
    state: LeaderState,
    *,
    leader: str,
    now_ms: int,
    policy: Policy,
    left_on_purpose: frozenset[str] = frozenset(),
    departed: Mapping[str, tuple[str, Allocation, int]] = MappingProxyType({}),
) -> Round:
    """One rebalance: an assignment for every member of ``members`` (member id → metadata) and
    the state to pass to the next call. ``leader`` is the leader's member id."""
    leader_url = members[leader].url if leader in members else ""
    kinds = Counter(m.storage for m in members.values() if m.storage)
    if len(kinds) > 1:
        own = members[leader].storage if leader in members else ()
        group = max(kinds, key=lambda k: (kinds[k], k == own))
        foreign = sorted(mid for mid, m in members.items() if m.storage not in ((), group))
        refusal = Assignment(
            AssignmentError.FOREIGN_STORAGE, leader, leader_url, config.offset, storage=group
        )
        if own != group:
            return Round(MappingProxyType(dict.fromkeys(members, refusal)), state)
        rest = {mid: m for mid, m in members.items() if mid not in foreign}
        done = assign(
            rest,
            config,
            state,
            leader=leader,
            now_ms=now_ms,
            policy=policy,
            left_on_purpose=left_on_purpose,
            departed=departed,
        )
        out = {**done.assignments, **dict.fromkeys(foreign, refusal)}
        return Round(MappingProxyType(out), done.state)
    ids = sorted(members)
    newest = max((m.config_offset for m in members.values()), default=0)
    if newest > config.offset:
        bad = Assignment(AssignmentError.CONFIG_MISMATCH, leader, leader_url, newest)
        return Round(MappingProxyType(dict.fromkeys(ids, bad)), state)

    work = config.work()
    running = {mid: members[mid].allocation for mid in ids}
    revoked = {mid: running[mid] - work for mid in ids}  # deleted work
    twice = _duplicates(running)
    for mid in ids:
        revoked[mid] = revoked[mid] | (running[mid] & twice)
    kept = {mid: running[mid] - revoked[mid] for mid in ids}

    reserved, returning = _departures(
        members, state, kept, work, now_ms, policy, left_on_purpose, departed
    )
    held = _union(kept.values()) | _union(r.allocation for r in reserved.values())
    unowned = work - held - twice
    assigned = {mid: EMPTY for mid in ids}
    for mid in ids:
        back = returning.get(members[mid].url, EMPTY) & unowned
        assigned[mid] = back
        unowned = unowned - back

    reserved_work = _union(r.allocation for r in reserved.values())
    loads = {mid: kept[mid] | assigned[mid] for mid in ids}
    total = work - reserved_work
    excess_c = _excess(
        {m: loads[m].connectors for m in ids},
        {m: kept[m].connectors for m in ids},
        len(total.connectors),
        sorted,
    )
    shares = _task_shares(total.tasks, len(ids))
    excess_t = _excess(
        {m: loads[m].tasks for m in ids},
        {m: kept[m].tasks for m in ids},
        len(total.tasks),
        _task_order,
        pick=lambda load, revocable, over: _spread_pick(load, revocable, over, shares),
    )
    for mid in ids:
        extra = Allocation(excess_c[mid], excess_t[mid])
        revoked[mid] = revoked[mid] | extra
        loads[mid] = loads[mid] - extra
    new_c = _place(sorted(unowned.connectors), {m: len(loads[m].connectors) for m in ids})
    new_t = _place(
        _task_order(unowned.tasks),
        {m: len(loads[m].tasks) for m in ids},
        spread={m: Counter(t.connector for t in loads[m].tasks) for m in ids},
    )
    for mid in ids:
        assigned[mid] = assigned[mid] | Allocation(frozenset(new_c[mid]), frozenset(new_t[mid]))

    delay = min((r.deadline_ms for r in reserved.values()), default=now_ms) - now_ms
    out = {
        mid: Assignment(
            AssignmentError.NONE,
            leader,
            leader_url,
            config.offset,
            assigned[mid],
            revoked[mid],
            max(delay, 0),
        )
        for mid in ids
    }
    after = {mid: (members[mid].url, kept[mid] - revoked[mid] | assigned[mid]) for mid in ids}
    new_state = LeaderState(MappingProxyType(after), MappingProxyType(reserved))
    return Round(MappingProxyType(out), new_state)


def _duplicates(running: Mapping[str, Allocation]) -> Allocation:
    seen, twice = EMPTY, EMPTY
    for a in running.values():
        twice = twice | (seen & a)
        seen = seen | a
    return twice


def _departures(
    members: Mapping[str, MemberMetadata],
    state: LeaderState,
    kept: Mapping[str, Allocation],
    work: Allocation,
    now_ms: int,
    policy: Policy,
    left_on_purpose: frozenset[str],
    departed: Mapping[str, tuple[str, Allocation, int]],
) -> tuple[dict[str, Reserved], dict[str, Allocation]]:
    """Reservations still running, and work to give back to members that came back (by URL)."""
    urls = {m.url for m in members.values()}
    reserved = dict(state.reserved)
    for mid, (url, alloc, age_ms) in sorted(departed.items()):
        # left before this leader took over: only its own record says what it ran
        if mid in members or mid in state.members or not url or policy.max_delay_ms <= 0:
            continue
        deadline = now_ms - max(age_ms, 0) + policy.max_delay_ms
        old = reserved.get(url)
        if old is None and deadline > now_ms:
            reserved[url] = Reserved(alloc, deadline)
        elif old is not None:
            reserved[url] = Reserved(old.allocation | alloc, old.deadline_ms)
    for mid, (url, alloc) in state.members.items():
        if mid in members:
            continue
        on_purpose = mid in left_on_purpose
        if url in urls or not (on_purpose or policy.delay_crashed) or policy.max_delay_ms <= 0:
            if url in urls:  # restarted before the leader noticed: its old work goes back to it
                old = reserved.get(url)
                reserved[url] = Reserved(alloc | (old.allocation if old else EMPTY), now_ms)
            continue
        old = reserved.get(url)
        deadline = old.deadline_ms if old else now_ms + policy.max_delay_ms
        reserved[url] = Reserved(alloc | (old.allocation if old else EMPTY), deadline)
    returning: dict[str, Allocation] = {}
    running = _union(kept.values())
    live: dict[str, Reserved] = {}
    for url, r in reserved.items():
        alloc = (r.allocation & work) - running
        if url in urls:
            returning[url] = alloc
        elif r.deadline_ms > now_ms and alloc:
            live[url] = Reserved(alloc, r.deadline_ms)
    return live, returning


def _task_order(tasks: Iterable[TaskId]) -> list[TaskId]:
    return sorted(tasks)


def _task_shares(tasks: Iterable[TaskId], members: int) -> dict[str, int]:
    """Each connector's fair share of its tasks per member: ceil(its tasks / members)."""
    counts = Counter(t.connector for t in tasks)
    return {c: -(-n // max(members, 1)) for c, n in counts.items()}


def _spread_pick(
    load: frozenset[TaskId], revocable: frozenset[TaskId], over: int, shares: Mapping[str, int]
) -> frozenset[TaskId]:
    """``over`` of a member's ``revocable`` tasks to revoke, so that each connector's tasks end
    up spread across members: each time, a task of the connector the member holds most over
    its fair share of (``shares``; among equals, the connector with the smaller share: moving
    one of a connector's few tasks spreads nothing), its highest-numbered one."""
    held = Counter(t.connector for t in load)
    left = {c: sorted(t for t in revocable if t.connector == c) for c in held}
    out: list[TaskId] = []
    for _ in range(over):
        ready = [c for c, ts in left.items() if ts]
        if not ready:
            break
        c = max(ready, key=lambda c: (held[c] - shares.get(c, 1), -shares.get(c, 1), c))
        out.append(left[c].pop())
        held[c] -= 1
    return frozenset(out)


def _excess(
    loads: Mapping[str, frozenset[T]],
    revocable: Mapping[str, frozenset[T]],
    total: int,
    order: Callable[[Iterable[T]], list[T]],
    pick: Callable[[frozenset[T], frozenset[T], int], frozenset[T]] | None = None,
) -> dict[str, frozenset[T]]:
    """Per member, what to revoke so nobody holds more than its balanced share of ``total``: the
    ``total % n`` most loaded may keep ceil(total / n), the others floor. Only ``revocable`` work
    (what the member already runs) is taken: ``pick(load, revocable, over)`` chooses, else the
    last items first."""
    ids = sorted(loads, key=lambda m: (-len(loads[m]), m))
    n = len(ids)
    out: dict[str, frozenset[T]] = {m: frozenset() for m in ids}
    if n == 0:
        return out
    floor, ceil_slots = divmod(total, n)
    for rank, mid in enumerate(ids):
        share = floor + (1 if rank < ceil_slots else 0)
        over = len(loads[mid]) - share
        if over > 0:
            chosen = (
                pick(loads[mid], revocable[mid], over)
                if pick is not None
                else frozenset(order(revocable[mid])[-over:])
            )
            out[mid] = chosen
    return out


def _place(
    items: list[T], loads: Mapping[str, int], spread: Mapping[str, Counter[str]] | None = None
) -> dict[str, list[T]]:
    """Each item to the least loaded member; among those, with ``spread`` (member → its tasks
    per connector), the one holding fewest of the task's connector; then the smallest id."""
    count = dict(loads)
    held = {m: Counter(spread.get(m, ())) for m in count} if spread is not None else None
    out: dict[str, list[T]] = {m: [] for m in count}
    for item in items:
        if not count:
            break
        if held is not None and isinstance(item, TaskId):
            c = item.connector
            mid = min(count, key=lambda m: (count[m], held[m][c], m))
            held[mid][c] += 1
        else:
            mid = min(count, key=lambda m: (count[m], m))
        out[mid].append(item)
        count[mid] += 1
    return out
