"""The commit log's record format: one JSON document per record, checksummed, versioned.

Records are created once and never changed; a damaged one is reported (``StorageCorrupt``),
never guessed at. Pure data: no filesystem access here.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from daemon.errors import StorageCorrupt
from daemon.structs import OffsetRange, TopicPartition

FORMAT = 1
Kind = Literal["commit", "fence", "offsets", "skip"]


@dataclass(frozen=True, order=True)
class DataFile:
    """A data file of a commit: ``staged`` relative to its staging dir, ``final`` relative to the
    table directory."""

    staged: str
    final: str


@dataclass(frozen=True)
class CommitRecord:
    """One record of the log. ``kind``: ``commit`` (data + ranges), ``fence`` (an incarnation
    claims partitions: older epochs are refused from then on) or ``offsets`` (an operator set
    or reset partitions' next offsets; ``None`` forgets a partition) or ``skip`` (a task
    skipped ``ranges`` without data, e.g. offsets retention deleted before they were consumed;
    ``reason`` says why, for an audit)."""

    seq: int
    kind: Kind
    connector: str
    task: int | None = None
    epoch: int | None = None
    commit_id: str | None = None
    ranges: tuple[OffsetRange, ...] = ()
    files: tuple[DataFile, ...] = ()
    offsets: tuple[tuple[TopicPartition, int | None], ...] = ()
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    reason: str | None = None

    def to_json(self) -> bytes:
        body = self._body()
        body["checksum"] = _checksum(body)
        return json.dumps(body, sort_keys=True, indent=1).encode()

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "format": FORMAT,
            "seq": self.seq,
            "kind": self.kind,
            "connector": self.connector,
            "task": self.task,
            "epoch": self.epoch,
            "commit_id": self.commit_id,
            "created_ms": self.created_ms,
            "ranges": [
                {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end}
                for r in self.ranges
            ],
            "files": [{"staged": f.staged, "final": f.final} for f in self.files],
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": o}
                for tp, o in self.offsets
            ],
        }
        if self.reason is not None:
            # Only when set: records without one stay byte-identical to older versions'.
            body["reason"] = self.reason
        return body

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> CommitRecord:
        """Parse and verify a record; ``StorageCorrupt`` naming ``source`` if it is damaged."""
        try:
            body = json.loads(data)
            checksum = body.pop("checksum")
            if checksum != _checksum(body):
                raise ValueError("checksum mismatch")
            if body["format"] != FORMAT:
                raise ValueError(f"format {body['format']} is not {FORMAT}")
            return cls(
                seq=body["seq"],
                kind=body["kind"],
                connector=body["connector"],
                task=body["task"],
                epoch=body["epoch"],
                commit_id=body["commit_id"],
                created_ms=body["created_ms"],
                ranges=tuple(OffsetRange(**r) for r in body["ranges"]),
                files=tuple(DataFile(**f) for f in body["files"]),
                offsets=tuple(
                    (TopicPartition(o["topic"], o["partition"]), o["offset"])
                    for o in body["offsets"]
                ),
                reason=body.get("reason"),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StorageCorrupt(
                f"commit record {source} is damaged ({type(e).__name__}: {e}); the table's "
                "progress cannot be trusted: restore the file from a backup, or stop the "
                "connector and move the table's _connectd directory aside to start over"
            ) from e


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
