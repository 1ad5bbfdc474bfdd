"""Delta tables, from either engine: what their transaction log says was committed, and when.

While a run goes on, the log is read from its files (``_delta_log/NNNNNNNNNNNNNNNNNNNN.json``,
one per commit, published whole by a rename, never changed): a commit's instant is its file's
modification time, the moment its rows became visible, as for the other sinks' logs
(tables.py). Its rows are the ``numRecords`` of the files it adds (Delta's statistics), or
``operationMetrics.numOutputRows`` where a file has none. The table itself is checked with
delta-rs (``deltalake``), a reader independent of both writers: never through connectd.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

from ss.tables import data_files_on_disk, row_problems

LOG = "_delta_log"


@dataclass
class Commit:
    version: int
    mtime: float
    rows: int
    files: int
    operation: str
    #: Where a commit's time went after its data files were written, in seconds: from the last
    #: file's modification time (as the log records it) to the commit info's timestamp (taken
    #: as the commit begins); from there to the commit file (conflict checks, the file's write
    #: and rename); from the commit file to its checksum file (``.crc``, written after the
    #: commit, read at the end). None where a mark is missing.
    files_to_commit_s: float | None
    commit_s: float | None
    checksum_s: float | None = None


@dataclass
class DeltaLogReader:
    """Reads a Delta table's log incrementally (the same interface as ``CommitLogReader``:
    ``poll``, ``rows``, ``commits`` with rows, ``files``); every commit is kept in ``log``."""

    table: Path
    rows: int = 0
    commits: list[tuple[float, int]] = field(default_factory=list)  # (mtime, rows), with rows
    files: list[str] = field(default_factory=list)  # added data files, relative to the table
    log: list[Commit] = field(default_factory=list)  # every commit, rows or not

    def poll(self) -> int:
        while True:
            path = self.table / LOG / f"{len(self.log):020d}.json"
            try:
                text = path.read_text()
                mtime = path.stat().st_mtime
                actions = [json.loads(line) for line in text.splitlines() if line.strip()]
            except (OSError, ValueError):  # not there yet
                return self.rows
            self._add(len(self.log), mtime, actions)

    def _add(self, version: int, mtime: float, actions: list[dict[str, Any]]) -> None:
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
        rows = 0
        for add in adds:
            stats = json.loads(add.get("stats") or "{}")
            if "numRecords" not in stats:  # no statistics: the commit's own count
                rows = int(info.get("operationMetrics", {}).get("numOutputRows", 0))
                break
            rows += int(stats["numRecords"])
        last_file = max((int(a.get("modificationTime", 0)) for a in adds), default=0) / 1000
        began = int(info.get("timestamp", 0)) / 1000
        self.log.append(
            Commit(
                version,
                mtime,
                rows,
                len(adds),
                info.get("operation", "?"),
                began - last_file if began and last_file else None,
                mtime - began if began else None,
            )
        )
        self.files.extend(unquote(a["path"]) for a in adds)
        if rows:
            self.rows += rows
            self.commits.append((mtime, rows))

    def checkpoints(self) -> int:
        log = self.table / LOG
        return sum(1 for n in os.listdir(log) if ".checkpoint." in n) if log.is_dir() else 0

    def summary(self) -> dict[str, Any]:
        """Commits by kind and each commit's marks, for the run's record: every commit costs
        the writer a read of the table's state and a commit file, rows or not."""
        ops: dict[str, int] = {}
        for c in self.log:
            kind = c.operation if c.rows else f"{c.operation} (no rows)"
            ops[kind] = ops.get(kind, 0) + 1
            crc = self.table / LOG / f"{c.version:020d}.crc"
            if c.checksum_s is None and crc.exists():
                c.checksum_s = crc.stat().st_mtime - c.mtime
        return {
            "delta_versions": len(self.log),
            "delta_operations": ops,
            "delta_checkpoints": self.checkpoints(),
            "delta_log": [dataclasses.asdict(c) for c in self.log],
        }


def _same_type(got: pa.DataType, want: pa.DataType) -> bool:
    # delta-rs hands strings back as large or view strings: the same Delta type.
    if pa.types.is_string(want):
        return bool(
            pa.types.is_string(got) or pa.types.is_large_string(got) or pa.types.is_string_view(got)
        )
    return bool(got == want)


def check_delta_table(
    table: Path, listed: list[str], produced: int, *, typed: Mapping[str, str] | None
) -> tuple[list[str], int]:
    """What differs between the Delta table, read with delta-rs, and the topic (empty: rows ==
    distinct (partition, offset) == produced, the files of its current version are those the
    log added and all exist, with ``typed`` each value field has its type); and how many
    Parquet files on disk are no part of the table (left by a write that never committed, or an
    empty one: Delta writes data files straight into the table's directory)."""
    from deltalake import DeltaTable  # a test dependency: imported only when a table is read

    problems = []
    dt = DeltaTable(str(table))
    base = table.resolve()
    current = sorted(os.path.relpath(unquote(urlparse(u).path), base) for u in dt.file_uris())
    if current != sorted(listed):
        problems.append(f"files: {len(current)} in the table's version, {len(listed)} added")
    on_disk = set(data_files_on_disk(table))
    missing = [f for f in current if f not in on_disk]
    if missing:
        problems.append(f"files of the table not on disk: {missing[:5]}")
    columns = ["kafka_partition", "kafka_offset", *(typed or {})]
    data = dt.to_pyarrow_table(columns=columns)
    problems += row_problems(data, produced, typed=typed, same=_same_type)
    return problems, len(on_disk - set(current))
