"""Checkpoints of the commit log, and the clean-up of records they make unnecessary.

A checkpoint ``_connectd/checkpoint/<seq:020d>.json`` holds the whole state ``CommitLog.open``
derives from records ``1..seq``: per partition the end offset and the connector that owns it,
per (connector, partition) the last epoch. It is published like a record (atomically and
exclusively: ``TableFs.publish_exclusive``) and only after every record up to ``seq`` is done
(its files in place), so ``open`` reads the latest checkpoint and only the records after it.

Clean-up (``clean_up``): records and ``done`` markers up to the checkpoint *before* the latest
are no longer needed by anyone opening the log (an opener that listed the checkpoints just
before a newer one appeared still reads from the latest it saw); they are deleted once older
than the retention (kept for audit), oldest first, then checkpoints older than that one. Each
step deletes only files no opener needs, so a kill between any two steps leaves a log that
opens; leftovers (a ``done`` marker whose record is gone) are deleted by the next run.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.errors import StorageCorrupt
from daemon.storage.fs import TableFs, join
from daemon.storage.records import CommitRecord
from daemon.structs import TopicPartition

META = "_connectd"
LOG, DONE, CHECKPOINT = f"{META}/log", f"{META}/done", f"{META}/checkpoint"
CHECKPOINT_FORMAT = 1
_SEQ_JSON = re.compile(r"^(\d{20})\.json$")
_SEQ = re.compile(r"^(\d{20})$")


def record_name(seq: int) -> str:
    return f"{seq:020d}.json"


def done_name(seq: int) -> str:
    return f"{seq:020d}"


@dataclass(frozen=True)
class Checkpoint:
    """The state after record ``seq`` (see the module docs)."""

    seq: int
    ends: Mapping[TopicPartition, int]
    epochs: Mapping[tuple[str, TopicPartition], int]
    claimed_by: Mapping[TopicPartition, str]
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_json(self) -> bytes:
        body = self._body()
        body["checksum"] = _checksum(body)
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    def _body(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "seq": self.seq,
            "created_ms": self.created_ms,
            "ends": [[tp.topic, tp.partition, end] for tp, end in sorted(self.ends.items())],
            "epochs": [
                [c, tp.topic, tp.partition, e] for (c, tp), e in sorted(self.epochs.items())
            ],
            "claimed_by": [
                [tp.topic, tp.partition, c] for tp, c in sorted(self.claimed_by.items())
            ],
        }

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> Checkpoint:
        """Parse and verify; ``StorageCorrupt`` naming ``source`` if it is damaged."""
        try:
            body = json.loads(data)
            checksum = body.pop("checksum")
            if checksum != _checksum(body):
                raise ValueError("checksum mismatch")
            if body["format"] != CHECKPOINT_FORMAT:
                raise ValueError(f"format {body['format']} is not {CHECKPOINT_FORMAT}")
            return cls(
                seq=int(body["seq"]),
                created_ms=int(body["created_ms"]),
                ends={TopicPartition(t, int(p)): int(e) for t, p, e in body["ends"]},
                epochs={(c, TopicPartition(t, int(p))): int(e) for c, t, p, e in body["epochs"]},
                claimed_by={TopicPartition(t, int(p)): c for t, p, c in body["claimed_by"]},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StorageCorrupt(
                f"commit log checkpoint {source} is damaged ({type(e).__name__}: {e}); "
                "checkpoints are published whole, so it was changed by hand: restore it from a "
                "backup, or delete it if the records after the checkpoint before it are all there"
            ) from e


def _created_ms(fs: TableFs, name: str) -> int:
    """When record ``name`` was created; 0 if it is gone (deleted by a racing clean-up)."""
    data = fs.read(name)
    return 0 if data is None else CommitRecord.from_json(data, source=fs.uri(name)).created_ms


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def checkpoint_seqs(fs: TableFs) -> list[int]:
    """The seqs of the published checkpoints, ascending (temporary files are skipped)."""
    return sorted(int(m.group(1)) for n in fs.listdir(CHECKPOINT) if (m := _SEQ_JSON.match(n)))


def read_checkpoint(fs: TableFs, seq: int) -> Checkpoint | None:
    """Checkpoint ``seq``; ``None`` if it is gone (a clean-up deleted it meanwhile)."""
    name = join(CHECKPOINT, record_name(seq))
    data = fs.read(name)
    if data is None:
        return None
    checkpoint = Checkpoint.from_json(data, source=fs.uri(name))
    if checkpoint.seq != seq:
        raise StorageCorrupt(f"commit log checkpoint {fs.uri(name)} says seq {checkpoint.seq}")
    return checkpoint


@dataclass
class CleanUp:
    """What one ``clean_up`` run did."""

    records: int = 0
    markers: int = 0
    checkpoints: int = 0
    #: ``False`` if the deadline stopped it before it was through (the next run continues).
    finished: bool = True
    #: Records up to this seq may be deleted (the checkpoint before the latest); 0: none yet.
    upto: int = 0


def clean_up(
    fs: TableFs, *, retention_ms: int, stale_after: float, deadline: float | None = None
) -> CleanUp:
    """Delete records, ``done`` markers and checkpoints no opener needs (module docs), and
    temporary files of killed publishers older than ``stale_after`` seconds in the log (here,
    not in ``open``: listing the log directory costs as much as the records it retains).

    ``deadline``: a ``time.monotonic()`` value; the run stops at the first step past it.
    Blocks on I/O (listing the log): run it in a thread, never on the event loop.
    """
    report = CleanUp()
    fs.remove_stale_temps(LOG, stale_after)
    checkpoints = checkpoint_seqs(fs)
    if len(checkpoints) < 2:
        return report
    upto = report.upto = checkpoints[-2]
    horizon_ms = time.time() * 1000 - retention_ms

    def late() -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            report.finished = False
            return True
        return False

    # Records up to a checkpoint were all created before it: if it is past the retention,
    # so are they, and none needs reading for its time.
    before = read_checkpoint(fs, upto)
    all_old = before is not None and before.created_ms <= horizon_ms
    seqs = sorted(int(m.group(1)) for n in fs.listdir(LOG) if (m := _SEQ_JSON.match(n)))
    # Records below the first one listed are gone already: so may their markers be.
    deleted_upto = min(seqs[0] - 1, upto) if seqs else upto
    for seq in seqs:
        if seq > upto or late():
            break
        name = join(LOG, record_name(seq))
        if not all_old and _created_ms(fs, name) > horizon_ms:
            break  # kept for audit; later records are younger still
        # The record first, then its marker: a marker without its record is harmless (below
        # the checkpoint nothing reads markers) and the loop below removes it.
        fs.remove(name)
        report.records += 1
        fs.remove(join(DONE, done_name(seq)))
        report.markers += 1
        deleted_upto = seq
    for n in fs.listdir(DONE):
        m = _SEQ.match(n)
        if m and int(m.group(1)) <= deleted_upto and not late():
            fs.remove(join(DONE, n))
            report.markers += 1
    for seq in checkpoints[:-2]:
        if late():
            break
        fs.remove(join(CHECKPOINT, record_name(seq)))
        report.checkpoints += 1
    return report
