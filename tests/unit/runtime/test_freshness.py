"""``Freshness``: committed offsets against log ends, event times, stalls (on a fake clock)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import pytest

from daemon.connectors.records import OffsetRange, RawBatch, TopicPartition
from daemon.runtime.incarnation.progress import record_marks
from daemon.runtime.slot import freshness as fr
from daemon.runtime.slot.freshness import Freshness

TP = TopicPartition("orders", 0)


@dataclass(slots=True)
class Rec:
    offset: int
    timestamp: int | None


@dataclass(slots=True)
class Fetched(Rec):
    """What ``RawBatch.from_polled`` reads of a record."""

    timestamp_type: int = 0
    key: bytes | None = None
    value: bytes | None = b"{}"
    headers: tuple[tuple[str, bytes | None], ...] = ()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def wall(self) -> float:
        return 1_700_000_000.0 + self.t

    def mono(self) -> float:
        return self.t


def deliver(f: Freshness, start: int, end: int, ts: int = 0) -> None:
    records = [Rec(o, ts + o) for o in range(start, end)]
    f.delivering([OffsetRange(TP.topic, TP.partition, start, end)], record_marks({TP: records}))


def test_commits_lag_and_the_event_time_of_the_newest_committed_record() -> None:
    clock = Clock()
    f = Freshness(wall=clock.wall, monotonic=clock.mono)
    f.log_ends({TP: 100})
    deliver(f, 10, 20, ts=5000)  # the sink resumed at 10 (its committed offset)
    (p,) = f.snapshot()
    assert (p.committed, p.log_end, p.lag, p.last_commit) == (None, 100, 90, None)
    f.committed({TP: 10})  # what the sink had before: not a commit
    assert f.snapshot()[0].last_commit is None
    clock.t += 1
    deliver(f, 20, 30, ts=5000)
    f.committed({TP: 25})  # inside the second batch: record 24 is the newest committed
    (p,) = f.snapshot()
    assert (p.committed, p.lag, p.last_commit) == (25, 75, clock.wall())
    assert p.event_time == (5000 + 24) / 1000
    f.committed({TP: 30})
    assert f.snapshot()[0].event_time == (5000 + 29) / 1000


def test_active_records_are_delivered_and_not_yet_committed() -> None:
    """Connect's sink-record-active-count, per partition: unknown until delivery and a base
    (committed offset or where delivery began) are known; the offsets from the committed one to
    the end of the last delivery; 0 once everything delivered is committed."""
    clock = Clock()
    f = Freshness(wall=clock.wall, monotonic=clock.mono)
    f.log_ends({TP: 100})
    assert f.snapshot()[0].active is None
    deliver(f, 10, 20)
    assert f.snapshot()[0].active == 10  # nothing committed yet: from where delivery began
    deliver(f, 20, 30)
    f.committed({TP: 25})
    assert f.snapshot()[0].active == 5
    f.committed({TP: 30})
    assert f.snapshot()[0].active == 0


def test_a_stall_needs_lag_and_no_commit_for_the_whole_threshold() -> None:
    clock = Clock()
    f = Freshness(wall=clock.wall, monotonic=clock.mono)
    f.log_ends({TP: 10})
    deliver(f, 0, 10)
    clock.t += 5
    assert f.stall(10.0) is None
    f.committed({TP: 10})  # caught up: no lag, no clock
    clock.t += 60
    assert f.stall(10.0) is None
    f.log_ends({TP: 15})  # records arrive, none committed
    started = clock.wall()
    clock.t += 9.9
    assert f.stall(10.0) is None
    clock.t += 0.2
    stall = f.stall(10.0)
    assert stall is not None and stall.lag == 5 and stall.partitions == ("orders-0",)
    assert stall.since == fr.iso(started)
    f.committed({TP: 12})  # progress, lag left: the clock starts again at the commit
    assert f.stall(10.0) is None
    clock.t += 10
    assert f.stall(10.0) is not None
    f.resumed()  # paused meanwhile: behind by choice
    assert f.stall(10.0) is None
    f.log_ends({})  # revoked: forgotten
    assert f.snapshot() == () and f.stall(0.0) is None


def test_a_sink_that_never_commits_is_behind_from_where_it_started() -> None:
    clock = Clock()
    f = Freshness(wall=clock.wall, monotonic=clock.mono)
    f.log_ends({TP: None})  # end not known yet: no lag, no stall
    assert f.snapshot()[0].lag is None
    deliver(f, 0, 3)
    f.log_ends({TP: 3})
    clock.t += 1
    assert f.stall(1.0) is not None and f.snapshot()[0].lag == 3


def test_redelivered_records_replace_the_old_ones_and_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fr, "MAX_PENDING", 10)
    f = Freshness()
    deliver(f, 0, 8, ts=100)
    deliver(f, 4, 8, ts=900)  # a retry from 4: the new timestamps count
    f.committed({TP: 6})
    assert f.snapshot()[0].event_time == 0.905
    deliver(f, 8, 16, ts=0)
    deliver(f, 16, 24, ts=0)
    part = f._parts[TP]
    assert part.kept <= 10
    f.committed({TP: 24})  # whole batches: exact even where the records were dropped
    assert f.snapshot()[0].event_time == 0.023
    assert part.kept == 0 and not part.pending


def poll(f: Freshness, end: int, position: int | None) -> None:
    """What a poll reports, in the consumer's order: its lags, then the log ends."""
    f.consumer_lags({} if position is None else {TP: end - position})
    f.log_ends({TP: end})


def test_offsets_the_consumer_passed_without_a_record_are_not_lag() -> None:
    # A transactional producer: records 0..4, its commit marker at 5, the log ends at 6.
    clock = Clock()
    f = Freshness(wall=clock.wall, monotonic=clock.mono)
    poll(f, 6, 5)  # the records are returned, the consumer is at 5
    deliver(f, 0, 5)
    f.committed({TP: 5})  # all the sink has: the marker is no record
    assert f.snapshot()[0].lag == 1  # the marker not fetched yet: not known to be one
    poll(f, 6, 6)  # the marker fetched: no record returned, the position moved past it
    assert f.snapshot()[0].lag == 1  # the position moved in this poll: not settled yet
    poll(f, 6, 6)  # the same position twice: all the consumer returned was delivered
    assert f.snapshot()[0].lag == 0
    clock.t += 60
    assert f.stall(10.0) is None
    # More records arrive and are polled: until they are delivered they are lag, even though
    # the consumer is past them already.
    poll(f, 12, 11)
    assert f.snapshot()[0].lag == 6
    deliver(f, 6, 11)
    assert f.snapshot()[0].lag == 6  # delivered, not committed: lag (and the marker at 11)
    poll(f, 12, 12)
    poll(f, 12, 12)
    assert f.snapshot()[0].lag == 5  # the records 6..10, not the markers at 5 and 11
    clock.t += 11
    stall = f.stall(10.0)
    assert stall is not None and stall.lag == 5
    f.committed({TP: 11})
    assert f.snapshot()[0].lag == 0 and f.stall(0.0) is None


def test_a_restarted_task_resumes_before_a_marker_and_is_caught_up() -> None:
    f = Freshness()
    f.committed({TP: 5})  # the table's offset: the next incarnation seeks there
    poll(f, 6, 5)
    assert f.snapshot()[0].lag == 1
    poll(f, 6, 6)
    poll(f, 6, 6)  # nothing delivered, the consumer passed the marker at 5
    assert f.snapshot()[0].lag == 0
    poll(f, 6, None)  # position unknown (a seek): the marker is still no record
    assert f.snapshot()[0].lag == 0
    poll(f, 9, None)  # records after it, not fetched yet
    assert f.snapshot()[0].lag == 3


@pytest.mark.timeout(60)
def test_a_task_that_never_commits_keeps_a_bounded_number_of_entries() -> None:
    f = Freshness()
    n, size = 100_000, 5
    for i in range(n):  # 100k polls delivered, nothing committed
        deliver(f, i * size, (i + 1) * size, ts=1000)
    part = f._parts[TP]
    assert part.kept <= fr.MAX_PENDING
    assert len(part.pending) <= fr.MAX_BATCHES + 1
    assert len(part.pending[0]) == 0  # the oldest reduced and merged into one entry
    f.committed({TP: 3})  # inside the reduced entry: no event time newer than the truth
    assert f.snapshot()[0].event_time is None
    f.committed({TP: n * size - 2})  # inside the newest batch, which has its records
    assert f.snapshot()[0].event_time == (1000 + n * size - 3) / 1000
    f.committed({TP: n * size})
    assert part.kept == 0 and not part.pending


def test_delivering_a_poll_runs_no_python_code_per_record() -> None:
    # The event loop's share of a poll: a fixed number of Python calls, however many records
    # (a generator over the records would be resumed once per record).
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    f = Freshness()
    counts = []
    for n in (10, 10_000):
        marks = record_marks({TP: [Rec(o, 5) for o in range(n)]})
        calls = 0
        sys.setprofile(profile)
        try:
            f.delivering([OffsetRange(TP.topic, TP.partition, 0, n)], marks)
        finally:
            sys.setprofile(None)
        counts.append(calls)
    assert counts[1] <= counts[0] < 40, counts  # about 20 either way
    f.committed({TP: 10_000})
    assert f.snapshot()[0].event_time == 0.005


def test_marks_sliced_from_the_polls_columns_are_the_records_own() -> None:
    # The conversion thread reads offsets and timestamps once (RawBatch.from_polled, partitions
    # in TopicPartition order) and slices the marks from them; they must be what the records say.
    b, a, empty = TopicPartition("orders", 1), TopicPartition("audit", 0), TopicPartition("x", 0)
    polled: dict[TopicPartition, list[Any]] = {
        b: [Fetched(o, 100 + o) for o in range(5, 9)],
        empty: [],
        a: [Fetched(o, -1) for o in range(2)],
    }
    raw = RawBatch.from_polled(polled)
    sliced = record_marks(polled, (raw.offsets, raw.timestamps))
    assert sliced == record_marks(polled)
    assert list(sliced) == [a, b]  # no entry for a partition without records
    assert list(sliced[b][0]) == [5, 6, 7, 8] and list(sliced[b][1]) == [105, 106, 107, 108]
