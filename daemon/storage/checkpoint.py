"""Checkpoints of the commit log: the whole state after a record, so ``open`` can start there.

A checkpoint ``_connectd/checkpoint/<seq:020d>.json`` holds the whole state ``CommitLog.open``
derives from records ``1..seq``: per partition the end offset and the connector that owns it,
per (connector, partition) the last epoch. It is published like a record (atomically and
exclusively: ``TableFs.publish_exclusive``) and only after every record up to ``seq`` is done
(its files in place), so ``open`` reads the latest checkpoint and only the records after it.

The clean-up of what checkpoints make unnecessary is ``daemon.storage.cleanup``.
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
from daemon.structs import TopicPartition

META = "_connectd"
LOG, DONE, CHECKPOINT = f"{META}/log", f"{META}/done", f"{META}/checkpoint"
CHECKPOINT_FORMAT = 1
_SEQ_JSON = re.compile(r"^(\d{20})\.json$")


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
