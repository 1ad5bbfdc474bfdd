"""Reading a file table from a test, never through the daemon: what its commit log committed,
and the (partition, offset) of every row readers see."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow.dataset as ds

from daemon.storage.commitlog import META, CommitLog

#: How many of the newest records ``committed`` checks for files not yet in place: a task has
#: at most one commit between its record and its files' move, and tests run a few tasks.
IN_FLIGHT = 16


def committed(table: Path, *, attempts: int = 5) -> int:
    """Offsets the table's commit log covers so far with their rows in place, summed over
    partitions (each starts at 0; an operator's ``offsets`` record sets a partition's end
    too): read as the daemon reads it (the latest checkpoint and the records after it),
    without changing anything. A commit's record comes before its files move into place, so a
    commit whose files a reader cannot see yet counts from its ranges' starts: a test that
    waits for this count reads every row of it. A log being cleaned up under the reader is
    read again."""
    if not (table / META / "log").is_dir():
        return 0
    for attempt in range(attempts):
        try:
            log = CommitLog(table).open_read_only()
            offsets = log.committed_offsets()
            for record in itertools.islice(log.newest_records(), IN_FLIGHT):
                if not all((table / f.final).is_file() for f in record.files):
                    offsets.update((r.tp, r.start) for r in record.ranges)
            return sum(offsets.values())
        except Exception:  # a record cleaned up or being published while read: read again
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def coordinates(table: Path) -> list[tuple[int, int]]:
    """(kafka_partition, kafka_offset) of every row readers see."""
    if not table.is_dir():
        return []
    dataset = ds.dataset(table, format="parquet")
    if not dataset.files:
        return []
    data = dataset.to_table(columns=["kafka_partition", "kafka_offset"])
    return list(
        zip(
            data.column("kafka_partition").to_pylist(),
            data.column("kafka_offset").to_pylist(),
            strict=True,
        )
    )
