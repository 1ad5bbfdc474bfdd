"""IcebergSink's committed state: per partition the next offset and the epoch that owns it,
kept in the table's own snapshot summaries.

Every snapshot the sink publishes carries, under ``connectd.offsets.<connector>``, the
connector's WHOLE state (every partition it ever committed or fenced), not only what that
commit changed: commits are published by compare-and-set on the table's metadata (see
``publish``), so each one was decided on the state of its parent and the newest snapshot that
carries the key is the truth. Snapshots of others (compaction's ``replace``, a user's writes)
carry no key: the reader walks back from ``main``'s head to the newest one that does, and
upkeep's snapshot expiry keeps that one.

Value (JSON): ``{"v": 1, "epoch": <the publishing epoch>, "task": n,
"partitions": [[topic, partition, next_offset_or_null, epoch], ...]}``.

Pure data: the refusals follow ``daemon.storage.logstate``'s (``ZombieEpoch``,
``OffsetsDiverged``), with messages naming partition and numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemon.storage.logstate import OffsetsDiverged, ZombieEpoch

KEY_PREFIX = "connectd.offsets."
VERSION = 1

TP = tuple[str, int]


@dataclass(frozen=True)
class Entry:
    """A partition's committed next offset (``None``: forgotten or never written) and the
    newest epoch that fenced or committed it."""

    offset: int | None
    epoch: int


State = dict[TP, Entry]


def key(connector: str) -> str:
    """The snapshot-summary key of ``connector``'s state."""
    return KEY_PREFIX + connector


def decode(text: str | None) -> State:
    if not text:
        return {}
    doc = json.loads(text)
    if doc.get("v") != VERSION:
        raise ValueError(f"unknown connectd state version {doc.get('v')!r}")
    return {
        (str(t), int(p)): Entry(None if o is None else int(o), int(e))
        for t, p, o, e in doc["partitions"]
    }


def encode(state: Mapping[TP, Entry], *, epoch: int, task: int) -> str:
    parts = [[t, p, e.offset, e.epoch] for (t, p), e in sorted(state.items())]
    return json.dumps(
        {"v": VERSION, "epoch": epoch, "task": task, "partitions": parts}, separators=(",", ":")
    )


def as_tp(item: Sequence[Any]) -> TP:
    return (str(item[0]), int(item[1]))


def _zombie(where: str, tp: TP, theirs: int, ours: int) -> ZombieEpoch:
    return ZombieEpoch(
        f"{where}: partition {tp[0]}-{tp[1]} is owned by epoch {theirs}; this incarnation's "
        f"epoch {ours} is older (a newer incarnation took over: this one is a zombie)"
    )


def fence(state: State, epoch: int, partitions: Iterable[Sequence[Any]], where: str) -> State:
    """``state`` with ``partitions`` owned by ``epoch``; ``ZombieEpoch`` if a newer owns one."""
    new = dict(state)
    for item in partitions:
        tp = as_tp(item)
        old = state.get(tp, Entry(None, 0))
        if old.epoch > epoch:
            raise _zombie(where, tp, old.epoch, epoch)
        new[tp] = Entry(old.offset, epoch)
    return new


def commit(state: State, epoch: int, ranges: Iterable[Sequence[Any]], where: str) -> State:
    """``state`` after a commit of ``ranges`` ([topic, partition, start, end]) by ``epoch``.

    Refused with ``ZombieEpoch`` (a newer epoch owns a partition) or ``OffsetsDiverged`` (the
    table's next offset is not the range's start: a gap or an overlap). A partition with no
    committed offset accepts any start (the consumer group decided where to begin)."""
    new = dict(state)
    for t, p, start, end in ranges:
        tp = (str(t), int(p))
        old = state.get(tp, Entry(None, 0))
        if old.epoch > epoch:
            raise _zombie(where, tp, old.epoch, epoch)
        if old.offset is not None and old.offset != int(start):
            kind = "a gap" if int(start) > old.offset else "an overlap"
            raise OffsetsDiverged(
                f"{where}: partition {tp[0]}-{tp[1]}: the table's next offset is {old.offset}, "
                f"this commit starts at {start} ({kind}); the offsets API can set it"
            )
        new[tp] = Entry(int(end), epoch)
    return new


def alter(state: State, epoch: int, offsets: Iterable[Sequence[Any]], where: str) -> State:
    """``state`` with offsets set ([topic, partition, offset]) or forgotten (offset ``None``)."""
    new = dict(state)
    for t, p, offset in offsets:
        tp = (str(t), int(p))
        old = state.get(tp, Entry(None, 0))
        if old.epoch > epoch:
            raise _zombie(where, tp, old.epoch, epoch)
        new[tp] = Entry(None if offset is None else int(offset), max(old.epoch, epoch))
    return new


def offsets_out(state: State, partitions: Iterable[Sequence[Any]] | None = None) -> list[Any]:
    """``[[topic, partition, next_offset_or_None], ...]`` for ``partitions`` (all without)."""
    tps = sorted(state) if partitions is None else [as_tp(i) for i in partitions]
    return [[t, p, state[(t, p)].offset if (t, p) in state else None] for t, p in tps]
