"""IcebergSink's upkeep job (``jobs.upkeep``, by the interface of ``tables.jobtables``):
compaction, branches left by killed commits, snapshot expiry that keeps every connector's
offsets. Imports only the standard library and ``daemon`` modules that do at import time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from daemon.connectors.iceberg import table as table_module
from daemon.connectors.iceberg.catalog import declare
from daemon.connectors.tables.jobs import job

#: Upkeep's defaults: snapshots younger than this stay (readers in progress, time travel), and
#: a branch of the sink older than this was left by a killed commit.
RETAIN_MS = 24 * 3600 * 1000
BRANCH_TTL_MS = 3600 * 1000


def upkeep(
    spark: Any,
    batch: Any,
    *,
    catalog: Mapping[str, Any],
    table: str,
    min_files: int,
    small_bytes: int = 32 << 20,
    retain_ms: int = RETAIN_MS,
    branch_ttl_ms: int = BRANCH_TTL_MS,
) -> dict[str, Any]:
    """Compact partitions with at least ``min_files`` data files (``rewrite_data_files``),
    drop branches left by killed commits, and expire snapshots older than ``retain_ms``
    except the newest one carrying each connector's state and everything after it (counted
    and by commit time: ``state_carriers``).
    Killed at any instant: each step is one catalog commit, so the table is as before or
    after that step; the rows never change."""
    began = time.monotonic()

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        tbl = table_module.load(spark, cat)
        report: dict[str, Any] = {
            "compacted": 0,
            "files_before": 0,
            "files_after": 0,
            "branches_dropped": 0,
            "snapshots_expired": 0,
        }
        if tbl is None or tbl.currentSnapshot() is None:
            return {**report, "seconds": time.monotonic() - began}
        report["files_before"] = _data_files(tbl)
        counts = spark.sql(
            f"SELECT count(*) FROM {cat.table}.files WHERE file_size_in_bytes < {int(small_bytes)}"
            " GROUP BY partition"
        ).collect()
        report["compacted"] = sum(1 for r in counts if int(r[0]) > max(1, min_files))
        if report["compacted"]:
            options = {
                "min-input-files": str(max(2, int(min_files))),
                "min-file-size-bytes": str(int(small_bytes)),
            }
            pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
            spark.sql(
                f"CALL {cat.name}.system.rewrite_data_files(table => '{cat.in_catalog}', "
                f"options => map({pairs}))"
            ).collect()
            tbl.refresh()
        report["files_after"] = _data_files(tbl)
        for name in table_module.stale_branches(tbl, branch_ttl_ms):
            try:
                tbl.manageSnapshots().removeBranch(name).commit()
                report["branches_dropped"] += 1
            except Exception:  # raced with another commit: the next upkeep drops it
                tbl.refresh()
        before = _snapshot_count(tbl)
        carriers = table_module.state_carriers(tbl).values()
        keep = max((depth for depth, _ in carriers), default=0) + 1
        # Never older than a state carrier: a commit or a compaction by another task landing
        # after the depths were counted pushes a carrier deeper than ``keep``, not later in time.
        cutoff = min(
            int(time.time() * 1000) - int(retain_ms),
            min((at for _, at in carriers), default=2**62),
        )
        tbl.expireSnapshots().expireOlderThan(cutoff).retainLast(keep).commit()
        tbl.refresh()
        report["snapshots_expired"] = before - _snapshot_count(tbl)
        return {**report, "seconds": time.monotonic() - began}

    return job(run)


def _data_files(table: Any) -> int:
    snap = table.currentSnapshot()
    return 0 if snap is None else int(snap.summary().get("total-data-files") or 0)


def _snapshot_count(table: Any) -> int:
    return sum(1 for _ in table.snapshots())
