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

Which connector owns a partition (the one that fenced or committed it last) is kept the same
way, once for every connector: every snapshot the sink publishes carries, under
``connectd.owners``, the whole map, decided on its parent's (``{"v": 1, "partitions":
[[topic, partition, connector], ...]}``). A table written before that key existed has its
owners derived from the connectors' states (``derive_owners``). A skip's gap and reason go
under ``connectd.skipped.<connector>`` of the snapshot that records it.

Pure data: the refusals follow ``daemon.storage.logstate``'s (``ZombieEpoch``,
``OffsetsDiverged``, ``PartitionsOwned``), with messages naming partition and numbers.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemon.connectors.tables.jobs import partitions_owned
from daemon.storage.logstate import OffsetsDiverged, ZombieEpoch

KEY_PREFIX = "connectd.offsets."
OWNERS = "connectd.owners"
SKIPPED_PREFIX = "connectd.skipped."
VERSION = 1

TP = tuple[str, int]
Owners = dict[TP, str]


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


def fence(
    state: State,
    epoch: int,
    partitions: Iterable[Sequence[Any]],
    where: str,
    taken: Mapping[TP, int | None] | None = None,
) -> State:
    """``state`` with ``partitions`` owned by ``epoch``; ``ZombieEpoch`` if a newer owns one.
    ``taken``: the offsets of partitions taken over from another connector, continued."""
    new = dict(state)
    for item in partitions:
        tp = as_tp(item)
        old = state.get(tp, Entry(None, 0))
        if old.epoch > epoch:
            raise _zombie(where, tp, old.epoch, epoch)
        new[tp] = Entry(taken[tp] if taken and tp in taken else old.offset, epoch)
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


# ---- owners ----


def encode_owners(owners: Mapping[TP, str]) -> str:
    parts = [[t, p, c] for (t, p), c in sorted(owners.items())]
    return json.dumps({"v": VERSION, "partitions": parts}, separators=(",", ":"))


def decode_owners(text: str) -> Owners:
    doc = json.loads(text)
    if doc.get("v") != VERSION:
        raise ValueError(f"unknown connectd owners version {doc.get('v')!r}")
    return {(str(t), int(p)): str(c) for t, p, c in doc["partitions"]}


def owners_of(summaries: Iterable[Mapping[str, str]]) -> Owners:
    """Which connector owns each partition, from the summaries of ``main``'s snapshots, the
    head first: the newest ``connectd.owners``; on a table written before it existed, per
    partition the connector whose newest state carrying it is the newest."""
    best: dict[TP, tuple[int, str]] = {}
    seen: set[str] = set()
    for depth, summary in enumerate(summaries):
        value = summary.get(OWNERS)
        if value is not None:
            return decode_owners(value)
        for name, text in summary.items():
            connector = name[len(KEY_PREFIX) :]
            if not name.startswith(KEY_PREFIX) or connector in seen:
                continue
            seen.add(connector)
            for tp in decode(text):
                best.setdefault(tp, (depth, connector))
    return {tp: connector for tp, (_, connector) in best.items()}


def claim(
    owners: Mapping[TP, str],
    connector: str,
    partitions: Iterable[Sequence[Any]],
    where: str,
    takeover: Collection[str] = (),
) -> dict[TP, str]:
    """The partitions of ``partitions`` another connector named in ``takeover`` owns, with
    it; ``PartitionsOwned`` for one any other connector owns."""
    taken = {}
    for item in partitions:
        tp = as_tp(item)
        other = owners.get(tp, connector)
        if other != connector:
            if other not in takeover:
                raise partitions_owned(connector, tp[0], tp[1], other, where)
            taken[tp] = other
    return taken


def properties(
    connector: str, task: int, epoch: int, state: State, owners: Mapping[TP, str]
) -> dict[str, str]:
    """The summary properties of a snapshot publishing ``state`` and ``owners``."""
    return {
        key(connector): encode(state, epoch=epoch, task=task),
        OWNERS: encode_owners(owners),
    }
