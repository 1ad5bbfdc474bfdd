"""What a task has committed against what its partitions hold: freshness, and stalls.

One ``Freshness`` per task slot: it outlives incarnations, so a task that fails and restarts
without ever committing stays stalled. The incarnation reports through its ``TaskMetrics``: the
slot gives it a ``SlotRecorder``, which keeps what matters here and passes every call on to the
daemon's metrics. These calls feed it:

- ``record_delivering``: the offset ranges of a batch about to be handed to ``put``, with its
  records' offsets and timestamps (``progress.record_marks``: kept until committed, so the
  event time of the newest committed record is known);
- ``record_committed``: what ``pre_commit`` returned, the offsets durable in the sink;
- ``set_consumer_lags`` then ``set_log_ends``, after every poll (``consumer.py``, in that order and
  in one step): each assigned partition's end (highwater), ``None`` where not known yet, and its
  consumer lag, from which its position (``end - lag``) follows; partitions no longer assigned
  are forgotten.

A partition's lag is the offsets between what the sink committed and the log end that are
still to be written: ``log_end - committed``, less the offsets known to hold no record —
transaction markers (a transactional producer's commit takes an offset after its records: the
sink commits ``N``, the log ends at ``N + 1``), aborted and compacted records. Such a stretch is
known once the consumer's position has stayed the same for two polls (no records came in
between, so all it returned has been delivered): the offsets from the end of the last delivery
(or the committed offset, if higher) to that position. A caught-up task therefore has lag 0, in
``/metrics`` and for stalls; while records are on their way (polled, not delivered yet) the
markers among them count, which only errs towards more lag. Until the sink reports a
committed offset (a sink that has committed nothing yet), the start of the first range
delivered stands in for it: where the task began, i.e. the sink's committed position once it
sought there.

Stalled: a partition's lag has stayed above 0 for ``task.stall.warn.ms`` and no commit advanced
it. The clock starts when lag appears, or at the last commit that left lag behind; a resume
restarts it (a paused task is behind by choice). Only a RUNNING task is reported stalled (the
slot decides that: a FAILED one says so already).

Everything here runs on the event loop and is cheap, whatever a stuck sink does: a poll costs
each partition O(1) bookkeeping (its records' two columns were filled in the conversion thread,
``record_marks``); per partition at most ``MAX_PENDING`` records and
``MAX_BATCHES + 1`` batch entries are kept however long nothing commits.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.kafka.traffic import ClientTraffic
from daemon.runtime.incarnation.progress import Marks
from daemon.runtime.model import PartitionFreshness, Stall, iso
from daemon.runtime.settings import TaskMetrics

#: Records per partition whose offsets and timestamps are kept while not committed. Past it the
#: oldest batches keep only their last record's: a commit inside one of those reports the event
#: time of the batch before (older, never newer than the truth). Sinks that commit whole batches
#: (ParquetSink flushes all it buffered) are exact either way. 16 bytes a record.
MAX_PENDING = 100_000
#: Batches per partition kept with their records while not committed (one per poll that had
#: records for it): past it the oldest is reduced to its last record's, like past
#: ``MAX_PENDING``. Reduced batches next to each other are merged into one entry, so a task
#: that never commits keeps at most ``MAX_BATCHES + 1`` entries per partition.
MAX_BATCHES = 1_000

#: Stretches of offsets without a record (transaction markers, aborted or compacted records)
#: kept per partition above its committed offset.
MAX_GAPS = 64


@dataclass(slots=True)
class _Batch:
    """Records delivered on one partition in one poll (or, reduced, in several consecutive
    ones), not committed yet."""

    first: int
    end: int  # after the last record
    last_time: int  # ms; below 0 for none
    offsets: array[int] | None  # ``None``: reduced to the last record's time
    times: array[int] | None

    def __len__(self) -> int:
        return 0 if self.offsets is None else len(self.offsets)


@dataclass
class _Partition:
    committed: int | None = None
    start: int | None = None  # where delivery began, while nothing is committed
    log_end: int | None = None
    delivered: int | None = None  # the end of the last range delivered
    position: int | None = None  # the consumer's, at the latest poll
    #: [low, high) stretches above the committed offset that hold no record, oldest first; a
    #: stretch forgotten (past ``MAX_GAPS``) only makes the lag higher than the truth.
    gaps: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=MAX_GAPS))
    last_commit: float | None = None  # wall
    event_ms: int | None = None
    waiting: float | None = None  # monotonic: since when lag > 0 without a commit
    pending: deque[_Batch] = field(default_factory=deque)
    kept: int = 0  # records with their offsets and times in ``pending``

    @property
    def base(self) -> int | None:
        return self.committed if self.committed is not None else self.start

    def _records_to(self, end: int | None) -> int | None:
        """Records from ``base`` to ``end``: the offsets less those known to hold no record."""
        base = self.base
        if base is None or end is None:
            return None
        passed = sum(max(0, min(hi, end) - max(lo, base)) for lo, hi in self.gaps)
        return max(0, end - base - passed)

    @property
    def lag(self) -> int | None:
        return self._records_to(self.log_end)

    @property
    def active(self) -> int | None:
        """Records delivered and not yet committed (see ``PartitionFreshness.active``)."""
        return self._records_to(self.delivered)

    def seen_at(self, position: int | None) -> None:
        """The consumer's position at a poll. The same twice in a row: the poll returned no
        record, all the consumer returned before was delivered, so the offsets from the end
        of the last delivery to the position hold no record (markers, aborted or compacted)."""
        settled = position is not None and position == self.position
        self.position = position
        base = self.base
        if not settled or position is None or base is None:
            return
        low = base if self.delivered is None else max(base, self.delivered)
        if position <= low:
            return
        gaps = self.gaps
        if gaps and low < gaps[-1][1]:
            if low >= gaps[-1][0]:  # the same stretch, or more of it
                gaps[-1] = (gaps[-1][0], max(position, gaps[-1][1]))
            return  # below it (a seek back): seen already; forgetting one only adds lag
        gaps.append((low, position))

    def forget_gaps(self) -> None:
        """Gaps wholly committed past are not needed any more."""
        base = self.base
        while self.gaps and base is not None and self.gaps[0][1] <= base:
            self.gaps.popleft()

    def tick(self, now: float) -> None:
        """Start the stall clock when lag appears; stop it when lag is gone (or unknown)."""
        if not self.lag:
            self.waiting = None
        elif self.waiting is None:
            self.waiting = now

    def add(self, first: int, end: int, marks: tuple[array[int], array[int]] | None) -> None:
        self.drop_from(first)  # delivered again (a retry, a seek back): the new ones count
        self.delivered = end
        if not marks or not marks[0]:
            return
        offsets, times = marks
        self.pending.append(_Batch(first, end, times[-1], offsets, times))
        self.kept += len(offsets)
        while self.kept > MAX_PENDING or len(self.pending) > MAX_BATCHES + 1:
            self._reduce_oldest()

    def _reduce_oldest(self) -> None:
        """Reduce the oldest batch that has its records to its last one's time, merged with a
        reduced batch before it (only the first entry can be one). O(1)."""
        pending = self.pending
        head = pending[0]
        if head.offsets is not None:
            self.kept -= len(head)
            head.offsets = head.times = None
            return
        nxt = pending[1]  # exists: reduced entries never exceed the bounds alone
        self.kept -= len(nxt)
        pending.popleft()
        nxt.first, nxt.offsets, nxt.times = head.first, None, None

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
            else:
                last.last_time = -1  # its last record is gone; which one is last now is not kept

    def take_committed(self, offset: int) -> int | None:
        """Forget what is committed up to ``offset``; the newest committed record's time."""
        newest: int | None = None
        while self.pending and self.pending[0].end <= offset:
            batch = self.pending.popleft()
            self.kept -= len(batch)
            if batch.last_time >= 0:
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
        # Monotonic readings become wall times with one offset, taken once: a stall's ``since``
        # is then the same on every read (two clock readings per read differ by a jitter).
        self._to_wall = wall() - monotonic()
        self._parts: dict[TopicPartition, _Partition] = {}
        self._consumer_lags: Mapping[TopicPartition, int] = {}

    def _part(self, tp: TopicPartition) -> _Partition:
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Partition()
        return part

    # ---- what the incarnation reports ----

    def delivering(self, ranges: Sequence[OffsetRange], marks: Marks) -> None:
        now = self._mono()
        for r in ranges:
            part = self._part(r.tp)
            if part.committed is None and part.start is None:
                part.start = r.start
            part.add(r.start, r.end, marks.get(r.tp))
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
            part.forget_gaps()
            if advanced:
                part.last_commit = self._wall()
                if newest is not None:
                    part.event_ms = newest
                part.waiting = None
            part.tick(now)

    def consumer_lags(self, lags: Mapping[TopicPartition, int]) -> None:
        """``highwater - position`` per partition, from the poll whose ends come next."""
        self._consumer_lags = lags

    def log_ends(self, ends: Mapping[TopicPartition, int | None]) -> None:
        """``ends``: every assigned partition (``None``: its end is not known yet)."""
        for tp in [tp for tp in self._parts if tp not in ends]:
            del self._parts[tp]  # revoked: its next owner reports it
        lags, self._consumer_lags = self._consumer_lags, {}
        now = self._mono()
        for tp, end in ends.items():
            part = self._part(tp)
            if end is not None:
                part.log_end = end
            lag = lags.get(tp)
            part.seen_at(None if end is None or lag is None else end - lag)
            part.tick(now)

    def resumed(self) -> None:
        """The task was paused (behind by choice): stall clocks start again now."""
        now = self._mono()
        for part in self._parts.values():
            if part.waiting is not None:
                part.waiting = now

    # ---- what the status and /metrics read ----

    def active_total(self) -> int:
        """Records delivered to the sink and not yet committed, over every partition."""
        return sum(a for p in self._parts.values() if (a := p.active) is not None)

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
                active=p.active,
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
            since=iso(earliest + self._to_wall) or "",
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
        self.freshness.consumer_lags(lags)  # the positions, with the ends that come next
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

    def record_task_counts(self, connector: str, task: int, **counts: int) -> None:
        if self._inner is not None:
            self._inner.record_task_counts(connector, task, **counts)

    def record_put(self, connector: str, task: int, records: int, seconds: float) -> None:
        if self._inner is not None:
            self._inner.record_put(connector, task, records, seconds)
            self._inner.record_active(connector, task, self.freshness.active_total())

    def record_active(self, connector: str, task: int, count: int) -> None:
        if self._inner is not None:
            self._inner.record_active(connector, task, count)

    def record_task_state(self, connector: str, task: int, state: str) -> None:
        if self._inner is not None:
            self._inner.record_task_state(connector, task, state)

    def record_commit_attempt(self, connector: str, task: int, seconds: float, ok: bool) -> None:
        if self._inner is not None:
            self._inner.record_commit_attempt(connector, task, seconds, ok)

    def record_startup(self, kind: str, ok: bool) -> None:
        if self._inner is not None:
            self._inner.record_startup(kind, ok)

    def record_delivering(
        self,
        connector: str,
        task: int,
        ranges: Sequence[OffsetRange],
        marks: Marks,
    ) -> None:
        self.freshness.delivering(ranges, marks)
        if self._inner is not None:
            self._inner.record_delivering(connector, task, ranges, marks)

    def record_committed(
        self, connector: str, task: int, offsets: Mapping[TopicPartition, int]
    ) -> None:
        self.freshness.committed(offsets)
        if self._inner is not None:
            self._inner.record_committed(connector, task, offsets)
            self._inner.record_active(connector, task, self.freshness.active_total())

    def set_log_ends(
        self, connector: str, task: int, ends: Mapping[TopicPartition, int | None]
    ) -> None:
        self.freshness.log_ends(ends)
        if self._inner is not None:
            self._inner.set_log_ends(connector, task, ends)

    def watch_client(self, traffic: ClientTraffic) -> None:
        if self._inner is not None:
            self._inner.watch_client(traffic)

    def forget_client(self, traffic: ClientTraffic) -> None:
        if self._inner is not None:
            self._inner.forget_client(traffic)
