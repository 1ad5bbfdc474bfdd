"""``Freshness``: committed offsets against log ends, event times, stalls (on a fake clock)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.runtime import freshness as fr
from daemon.runtime.freshness import Freshness

TP = TopicPartition("orders", 0)


@dataclass
class Rec:
    offset: int
    timestamp: int | None


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def wall(self) -> float:
        return 1_700_000_000.0 + self.t

    def mono(self) -> float:
        return self.t


def deliver(f: Freshness, start: int, end: int, ts: int = 0) -> None:
    records = [Rec(o, ts + o) for o in range(start, end)]
    f.delivering([OffsetRange(TP.topic, TP.partition, start, end)], {TP: records})


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
