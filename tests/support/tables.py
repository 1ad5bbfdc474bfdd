"""Reading a file table's commit log from a test, never through the daemon."""

from __future__ import annotations

import os
from pathlib import Path

from daemon.storage.commitlog import META, CommitRecord


def committed(table: Path) -> int:
    """Offsets the table's commit log covers so far, summed over partitions (each starts at
    0); an operator's ``offsets`` record sets a partition's end too."""
    ends: dict[tuple[str, int], int] = {}
    log = table / META / "log"
    if not log.is_dir():
        return 0
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        try:
            record = CommitRecord.from_json((log / name).read_bytes(), source=name)
        except Exception:  # a record being published: read it next time
            break
        for r in record.ranges:
            ends[(r.topic, r.partition)] = r.end
        for tp, offset in record.offsets:
            if offset is not None and record.kind == "offsets":
                ends[(tp.topic, tp.partition)] = offset
    return sum(ends.values())
