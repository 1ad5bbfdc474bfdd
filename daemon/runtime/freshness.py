"""What a task has committed against what its partitions hold: freshness, and stalls.

One ``Freshness`` per task slot: it outlives incarnations, so a task that fails and restarts
without ever committing stays stalled. The incarnation reports through its ``TaskMetrics``: the
slot gives it a ``SlotRecorder``, which keeps what matters here and passes every call on to the
daemon's metrics. Three calls feed it:

- ``record_delivering``: the offset ranges of a batch about to be handed to ``put``, with its
  records (the offset and ``timestamp`` of each are kept until committed, so the event time of
  the newest committed record is known);
- ``record_committed``: what ``pre_commit`` returned, the offsets durable in the sink;
- ``set_log_ends``: after every poll, each assigned partition's end (highwater), ``None`` where
  not known yet; partitions no longer assigned are forgotten.

A partition's lag is ``log_end - committed``. Until the sink reports a committed offset (a sink
that has committed nothing yet), the start of the first range delivered stands in for it: where
the task began, i.e. the sink's committed position once it sought there.

Stalled: a partition's lag has stayed above 0 for ``task.stall.warn.ms`` and no commit advanced
it. The clock starts when lag appears, or at the last commit that left lag behind; a resume
restarts it (a paused task is behind by choice). Only a RUNNING task is reported stalled (the
slot decides that: a FAILED one says so already).

Everything here runs on the event loop and is cheap: a poll's records cost two ``array``
appends per partition, and what is kept per partition is bounded (``MAX_PENDING``).
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.runtime.model import PartitionFreshness, Stall
from daemon.runtime.restart import iso
from daemon.runtime.steps import TaskMetrics

#: Records per partition whose offsets and timestamps are kept while not committed. Past it the
#: oldest batches keep only their last record's: a commit inside one of those reports the event
#: time of the batch before (older, never newer than the truth). Sinks that commit whole batches
#: (ParquetSink flushes all it buffered) are exact either way. 16 bytes a record.
MAX_PENDING = 100_000


@dataclass
class _Batch:
    """Records delivered on one partition in one poll, not committed yet."""

    first: int
    end: int  # after the last record
    last_time: int  # ms; -1 for none
    offsets: array[int] | None
    times: array[int] | None

    def __len__(self) -> int:
        return 0 if self.offsets is None else len(self.offsets)


@dataclass
class _Partition:
    committed: int | None = None
    start: int | None = None  # where delivery began, while nothing is committed
    log_end: int | None = None
    last_commit: float | None = None  # wall
    event_ms: int | None = None
    waiting: float | None = None  # monotonic: since when lag > 0 without a commit
    pending: deque[_Batch] = field(default_factory=deque)
    kept: int = 0  # records with their offsets and times in ``pending``

    @property
    def lag(self) -> int | None:
        base = self.committed if self.committed is not None else self.start
        if base is None or self.log_end is None:
            return None
        return max(0, self.log_end - base)

    def tick(self, now: float) -> None:
        """Start the stall clock when lag appears; stop it when lag is gone (or unknown)."""
        if not self.lag:
            self.waiting = None
        elif self.waiting is None:
            self.waiting = now

    def add(self, first: int, end: int, records: Sequence[Any]) -> None:
        self.drop_from(first)  # delivered again (a retry, a seek back): the new ones count
        if not records:
            return
        offsets = array("q", (r.offset for r in records))
        times = array("q", (_ms(r.timestamp) for r in records))
        self.pending.append(_Batch(first, end, times[-1], offsets, times))
        self.kept += len(offsets)
        for old in self.pending:
            if self.kept <= MAX_PENDING:
                break
            self.kept -= len(old)
            old.offsets = old.times = None

    def drop_from(self, offset: int) -> None:
        while self.pending and self.pending[-1].first >= offset:
            self.kept -= len(self.pending.pop())
        if self.pending and self.pending[-1].end > offset:
            last = self.pending[-1]
            last.end = offset
            if last.offsets is not None and last.times is not None:
                i = bisect_left(last.offsets, offset)
                self.kept -= len(last.offsets) - i
                del last.offsets[i:], last.times[i:]
                last.last_time = last.times[-1] if i else -1

    def take_committed(self, offset: int) -> int | None:
        """Forget what is committed up to ``offset``; the newest committed record's time."""
        newest: int | None = None
        while self.pending and self.pending[0].end <= offset:
            batch = self.pending.popleft()
            self.kept -= len(batch)
            newest = batch.last_time
        if self.pending and self.pending[0].first < offset:
            batch = self.pending[0]
            if batch.offsets is not None and batch.times is not None:
                i = bisect_left(batch.offsets, offset)
                if i:
                    newest = batch.times[i - 1]
                    self.kept -= i
                    del batch.offsets[:i], batch.times[:i]
                    batch.first = offset
        return newest if newest is not None and newest >= 0 else None


def _ms(timestamp: int | None) -> int:
    return -1 if timestamp is None or timestamp < 0 else int(timestamp)


class Freshness:
    """One task's partitions: committed offset, log end, lag, last commit, event time."""

    def __init__(
        self,
        *,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall = wall
        self._mono = monotonic
        self._parts: dict[TopicPartition, _Partition] = {}

    def _part(self, tp: TopicPartition) -> _Partition:
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Partition()
        return part

    # ---- what the incarnation reports ----

    def delivering(
        self, ranges: Sequence[OffsetRange], polled: Mapping[TopicPartition, Sequence[Any]]
    ) -> None:
        now = self._mono()
        for r in ranges:
            part = self._part(r.tp)
            if part.committed is None and part.start is None:
                part.start = r.start
            part.add(r.start, r.end, polled.get(r.tp, ()))
            part.tick(now)

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        now = self._mono()
        for tp, offset in offsets.items():
            part = self._part(tp)
            before = part.committed if part.committed is not None else part.start
            # The first report may be what the sink had committed before this task delivered
            # anything (its table's offsets): only a move past what it had is a commit.
            advanced = before is not None and offset > before
            newest = part.take_committed(offset)
            part.committed = offset
            if advanced:
                part.last_commit = self._wall()
                if newest is not None:
                    part.event_ms = newest
                part.waiting = None
            part.tick(now)

    def log_ends(self, ends: Mapping[TopicPartition, int | None]) -> None:
        """``ends``: every assigned partition (``None``: its end is not known yet)."""
        for tp in [tp for tp in self._parts if tp not in ends]:
            del self._parts[tp]  # revoked: its next owner reports it
        now = self._mono()
        for tp, end in ends.items():
            part = self._part(tp)
            if end is not None:
                part.log_end = end
            part.tick(now)

    def resumed(self) -> None:
        """The task was paused (behind by choice): stall clocks start again now."""
        now = self._mono()
        for part in self._parts.values():
            if part.waiting is not None:
                part.waiting = now

    # ---- what the status and /metrics read ----

    def snapshot(self) -> tuple[PartitionFreshness, ...]:
        return tuple(
            PartitionFreshness(
                topic=tp.topic,
                partition=tp.partition,
                committed=p.committed,
                log_end=p.log_end,
                lag=p.lag,
                last_commit=p.last_commit,
                event_time=None if p.event_ms is None else p.event_ms / 1000,
            )
            for tp, p in sorted(self._parts.items())
        )

    def stall(self, threshold: float) -> Stall | None:
        """The stall, if a partition has had lag and no commit for ``threshold`` seconds."""
        now = self._mono()
        stalled = [
            (tp, p)
            for tp, p in sorted(self._parts.items())
            if p.waiting is not None and p.lag and now - p.waiting >= threshold
        ]
        if not stalled:
            return None
        earliest = min(p.waiting for _, p in stalled if p.waiting is not None)
        return Stall(
            since=iso(self._wall() - (now - earliest)) or "",
            lag=sum(p.lag or 0 for _, p in stalled),
            partitions=tuple(str(tp) for tp, _ in stalled),
        )


class SlotRecorder:
    """The ``TaskMetrics`` a slot gives its incarnations: freshness is kept in ``freshness``,
    every call goes on to ``inner`` (the daemon's metrics) too."""

    def __init__(self, freshness: Freshness, inner: TaskMetrics | None) -> None:
        self.freshness = freshness
        self._inner = inner

    def record_consumed(self, connector: str, task: int, count: int) -> None:
        if self._inner is not None:
            self._inner.record_consumed(connector, task, count)

    def record_written(self, connector: str, task: int, count: int, seconds: float) -> None:
        if self._inner is not None:
            self._inner.record_written(connector, task, count, seconds)

    def set_consumer_lags(
        self, connector: str, task: int, lags: Mapping[TopicPartition, int]
    ) -> None:
        if self._inner is not None:
            self._inner.set_consumer_lags(connector, task, lags)

    def task_restarted(self, connector: str, task: int, cause: str) -> None:
        if self._inner is not None:
            self._inner.task_restarted(connector, task, cause)

    def record_offsets_skipped(
        self, connector: str, task: int, tp: TopicPartition, count: int
    ) -> None:
        if self._inner is not None:
            self._inner.record_offsets_skipped(connector, task, tp, count)

    def executor_killed(self, reason: str) -> None:
        if self._inner is not None:
            self._inner.executor_killed(reason)

    def record_delivering(
        self,
        connector: str,
        task: int,
        ranges: Sequence[OffsetRange],
        polled: Mapping[TopicPartition, Sequence[Any]],
    ) -> None:
        self.freshness.delivering(ranges, polled)
        if self._inner is not None:
            self._inner.record_delivering(connector, task, ranges, polled)

    def record_committed(
        self, connector: str, task: int, offsets: Mapping[TopicPartition, int]
    ) -> None:
        self.freshness.committed(offsets)
        if self._inner is not None:
            self._inner.record_committed(connector, task, offsets)

    def set_log_ends(
        self, connector: str, task: int, ends: Mapping[TopicPartition, int | None]
    ) -> None:
        self.freshness.log_ends(ends)
        if self._inner is not None:
            self._inner.set_log_ends(connector, task, ends)
