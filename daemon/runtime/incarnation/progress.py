"""Partition progress of one incarnation: where each partition is, what is being delivered, and
which rebalance generation a poll belongs to.

``PartitionProgress`` is the one object that holds this state; the incarnation's main loop, its
rebalance part (``rebalance.py``) and its retry part (``retry.py``) change it only through
the methods below, always under the incarnation's lock (the generation a poll belongs to is read
in the same step as the poll returns, with no await in between). It guarantees:

- ``next[tp]`` is the offset after the last record delivered on ``tp``, or where ``tp`` was
  sought (by the sink or by a retry); the next delivery's range for ``tp`` starts there, so
  consecutive ranges chain (``offset_ranges``).
- ``delivering`` holds the ranges of the batch in delivery, from before anything of the delivery
  can fail until it succeeded (``delivered``) or was rewound for a retry (``rewind``).
- ``generation`` grows with every rebalance callback: records polled under an older generation
  are never delivered (the callback's commit did not cover them).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Collection, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from daemon.connectors.records import OffsetRange, TopicPartition

log = logging.getLogger("connectd.task")

#: Each partition's delivered records as two columns, their offsets and their timestamps (ms;
#: below 0 for none): what the task's freshness keeps of them (``runtime/slot/freshness.py``).
Marks = Mapping[TopicPartition, tuple["array[int]", "array[int]"]]

_offset = attrgetter("offset")
_timestamp = attrgetter("timestamp")


def record_marks(
    polled: Mapping[TopicPartition, Sequence[Any]],
    raw: tuple[Sequence[int], Sequence[int | None]] | None = None,
) -> dict[TopicPartition, tuple[array[int], array[int]]]:
    """A poll's ``Marks``, filled in C (``map(attrgetter(...))``: no Python code per record).
    The pipeline makes them in its conversion thread, beside the conversion, not on the loop.
    ``raw``: the poll's offsets and timestamps already read, partition after partition in
    ``TopicPartition`` order (``RawBatch.from_polled``'s, the order the marks are made in),
    which are then sliced, not read from the records a second time."""
    marks = {}
    at = 0
    for tp in sorted(polled):
        records = polled[tp]
        if not records:
            continue
        stamps: Iterable[Any]  # ints, or a None (format v0): array() refuses it below
        if raw is None:
            offsets, stamps = array("q", map(_offset, records)), map(_timestamp, records)
        else:
            n = len(records)
            offsets, stamps = array("q", raw[0][at : at + n]), raw[1][at : at + n]
            at += n
        try:
            times = array("q", stamps)
        except TypeError:  # a ``None`` timestamp (message format v0): the slow path, rare
            times = array("q", (-1 if t is None else int(t) for t in map(_timestamp, records)))
        marks[tp] = offsets, times
    return marks


def offset_ranges(
    polled: Mapping[TopicPartition, Sequence[Any]], positions: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """The ranges one poll covers: from each partition's position before the poll (the offset
    after the last record delivered, or the seek target) to its last record + 1. Starting at the
    position, not at the first record, keeps consecutive ranges chained across offsets that hold
    no record (compaction, transaction markers)."""
    ranges = []
    for tp, records in polled.items():
        first, last = records[0].offset, records[-1].offset
        start = positions.get(tp, first)
        if start > first:  # never expected: aiokafka drops records fetched before a seek
            log.warning("%s: record %d comes before the position %d", tp, first, start)
            start = first
        ranges.append(OffsetRange(tp.topic, tp.partition, start, last + 1))
    return ranges


class PartitionProgress:
    """Positions, the batch in delivery and the rebalance generation (module docstring)."""

    def __init__(self) -> None:
        self.generation = 0
        self.next: dict[TopicPartition, int] = {}
        self.delivering: list[OffsetRange] = []

    def rebalanced(self) -> None:
        """A rebalance callback runs: what was polled before it is not to be delivered."""
        self.generation += 1

    def begin(self, polled: Mapping[TopicPartition, Sequence[Any]]) -> list[OffsetRange]:
        """The ranges of a delivery about to start, remembered until it ends."""
        self.delivering = offset_ranges(polled, self.next)
        return self.delivering

    def delivered(self) -> None:
        """The delivery succeeded: each partition continues after its range."""
        ranges, self.delivering = self.delivering, []
        for r in ranges:
            self.next[r.tp] = r.end

    def rewind(self, owned: Collection[TopicPartition]) -> list[tuple[TopicPartition, int]]:
        """The delivery failed: its partitions still ``owned`` continue from its start again.
        Returns where to seek the consumer."""
        seeks = [(r.tp, r.start) for r in self.delivering if r.tp in owned]
        for tp, offset in seeks:
            self.next[tp] = offset
        self.delivering = []
        return seeks

    def refetch(
        self, polled: Mapping[TopicPartition, Sequence[Any]], owned: Collection[TopicPartition]
    ) -> list[tuple[TopicPartition, int]]:
        """A poll's records that are not delivered though their partitions stay ``owned`` (a
        connector pause came after the poll handed them out): where to seek the consumer.

        The consumer's position has moved past them already. Left there, the first delivery
        after the resume would start its range at ``next`` and so claim offsets whose records
        never reached ``put`` (rows missing while the sink's commit covers them). Seeking back
        to where delivery continues (``next``; the first record if nothing was delivered on the
        partition yet) fetches them again after the resume."""
        return [
            (tp, self.next.get(tp, records[0].offset))
            for tp, records in polled.items()
            if tp in owned and records
        ]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.next[tp] = offset

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions revoked: their positions belong to their next owner."""
        for tp in tps:
            self.next.pop(tp, None)

    def positions(self, scope: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The positions of the partitions in ``scope`` (what ``pre_commit`` is offered)."""
        return {tp: o for tp, o in self.next.items() if tp in scope}
