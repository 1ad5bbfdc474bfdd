"""IcebergSink's executor jobs on real Spark with the Iceberg 1.12 jar, a Hadoop catalog in a
temporary directory: commits and read-back, zombies refused (also one fenced mid-commit),
gaps refused, a commit killed mid-write, compaction and snapshot expiry keeping the offsets.

One private pool for the module (size 1, no spare: one JVM) whose sessions load the
``iceberg`` table format from the start (``executor.spark.formats``; the jar from
``make jars``), so no test waits for an executor to be recycled for the format. Row and file
counts come from the table's own metadata (``vN.metadata.json``, the current snapshot's
summary), independent of Spark; pyiceberg, if installed, scans the table too.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.spark import ThreadedPool

from daemon import errors
from daemon.connectors.iceberg import state
from daemon.connectors.tables.jobs import raise_for
from daemon.storage.logstate import OffsetsDiverged, PartitionsOwned, ZombieEpoch

pytestmark = pytest.mark.integration

JOBS = "daemon.connectors.iceberg.jobs"
TIMEOUT = 180.0
CONNECTOR = "ice"


class Table:
    """One test's table: its location kwargs and readers of its metadata files."""

    def __init__(self, pool: ThreadedPool, warehouse: Path) -> None:
        self.pool = pool
        self.warehouse = warehouse
        self.name = f"t{uuid.uuid4().hex[:8]}"
        self.where = {
            "catalog": {"catalog.type": "hadoop", "catalog.warehouse": str(warehouse)},
            "table": f"db.{self.name}",
        }

    async def job(self, fn: str, batch: pa.Table | None = None, **kwargs: Any) -> Any:
        timeout = kwargs.pop("timeout", TIMEOUT)
        result = await self.pool.run(
            "task-0",
            f"{JOBS}:{fn}",
            batch,
            timeout=timeout,
            kwargs={**self.where, **kwargs},
            formats=("iceberg",),
        )
        return raise_for(result)

    async def commit(self, batch: pa.Table, epoch: int, ranges: list[list[Any]], **kw: Any) -> Any:
        return await self.job(
            "commit",
            batch,
            connector=CONNECTOR,
            task=0,
            epoch=epoch,
            ranges=ranges,
            partition_by=["kafka_partition"],
            **kw,
        )

    def metadata_path(self) -> Path:
        meta = self.warehouse / "db" / self.name / "metadata"
        version = (meta / "version-hint.text").read_text().strip()
        return meta / f"v{version}.metadata.json"

    def metadata(self) -> dict[str, Any]:
        return json.loads(self.metadata_path().read_text())  # type: ignore[no-any-return]

    def summary(self) -> dict[str, str]:
        meta = self.metadata()
        current = meta["current-snapshot-id"]
        return next(s["summary"] for s in meta["snapshots"] if s["snapshot-id"] == current)

    def rows(self) -> int:
        return int(self.summary()["total-records"])

    def files(self) -> int:
        return int(self.summary()["total-data-files"])


@pytest.fixture
def table(iceberg_pool: ThreadedPool, tmp_path: Path) -> Table:
    return Table(iceberg_pool, tmp_path / "wh")


def rows(ranges: list[list[Any]]) -> pa.Table:
    """Records for ``ranges`` ([topic, partition, start, end]) with the audit columns."""
    cols: dict[str, list[Any]] = {k: [] for k in ("kafka_topic", "kafka_partition", "kafka_offset")}
    for topic, partition, start, end in ranges:
        cols["kafka_topic"] += [topic] * (end - start)
        cols["kafka_partition"] += [partition] * (end - start)
        cols["kafka_offset"] += list(range(start, end))
    n = len(cols["kafka_offset"])
    return pa.table(
        {
            "kafka_topic": pa.array(cols["kafka_topic"], pa.string()),
            "kafka_partition": pa.array(cols["kafka_partition"], pa.int32()),
            "kafka_offset": pa.array(cols["kafka_offset"], pa.int64()),
            "kafka_timestamp": pa.array(
                [1_700_000_000_000_000 + i for i in range(n)], pa.timestamp("us", "UTC")
            ),
            "value": pa.array([f"v{i}" for i in range(n)], pa.string()),
        }
    )


PARTS = [["top", 0], ["top", 1], ["top", 2]]


async def test_commits_are_read_back_at_open(table: Table) -> None:
    opened = await table.job("open_table", connector=CONNECTOR, task=0, epoch=1, partitions=PARTS)
    assert opened["exists"] is False
    assert opened["offsets"] == [["top", 0, None], ["top", 1, None], ["top", 2, None]]
    batches = [
        [["top", 0, 0, 10], ["top", 1, 0, 5]],
        [["top", 1, 5, 8], ["top", 2, 100, 120]],
        [["top", 0, 10, 30], ["top", 2, 120, 121]],
    ]
    for ranges in batches:
        result = await table.commit(rows(ranges), 1, ranges)
        assert result["rows"] == sum(e - s for _, _, s, e in ranges)
    assert ["kafka_partition", "int"] in result["schema"]
    assert table.rows() == 10 + 5 + 3 + 20 + 20 + 1
    reopened = await table.job("open_table", connector=CONNECTOR, task=0, epoch=2, partitions=PARTS)
    assert reopened["exists"] is True
    assert reopened["offsets"] == [["top", 0, 30], ["top", 1, 8], ["top", 2, 121]]
    assert reopened["partition_by"] == ["kafka_partition"]
    assert ["value", "string"] in reopened["schema"]
    read = await table.job("read_offsets", connector=CONNECTOR)
    assert read["offsets"] == reopened["offsets"]
    # Another connector's state is its own.
    assert (await table.job("read_offsets", connector="other"))["offsets"] == []
    # An empty batch moves only offsets (records filtered out as errant).
    await table.commit(rows([]), 2, [["top", 0, 30, 35]])
    assert table.rows() == 59
    assert (await table.job("read_offsets", connector=CONNECTOR))["offsets"][0] == ["top", 0, 35]


async def test_a_zombie_is_refused_and_the_table_unchanged(table: Table) -> None:
    await table.job("open_table", connector=CONNECTOR, task=0, epoch=1, partitions=PARTS[:1])
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    await table.job("open_table", connector=CONNECTOR, task=0, epoch=2, partitions=PARTS[:1])
    with pytest.raises(ZombieEpoch, match="owned by epoch 2"):
        await table.commit(rows([["top", 0, 10, 20]]), 1, [["top", 0, 10, 20]])
    # Opening with an older epoch fences nothing: the task learns the newest epoch.
    opened = await table.job(
        "open_table", connector=CONNECTOR, task=0, epoch=1, partitions=PARTS[:1]
    )
    assert opened == {"newest_epoch": 2, "fenced": False}
    assert table.rows() == 10
    assert not [r for r in table.metadata()["refs"] if r != "main"]  # no branch left behind


async def test_a_zombie_fenced_during_its_commit_is_refused(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    fence = {**table.where, "connector": CONNECTOR, "task": 0, "epoch": 2, "partitions": PARTS[:1]}
    with pytest.raises(ZombieEpoch):
        await table.commit(
            rows([["top", 0, 10, 20]]), 1, [["top", 0, 10, 20]], before_publish=fence
        )
    assert table.rows() == 10
    result = await table.commit(rows([["top", 0, 10, 20]]), 2, [["top", 0, 10, 20]])
    assert table.rows() == 20 and result["attempts"] == 1


async def test_a_sibling_commit_in_between_costs_a_retry_not_a_rewrite(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    sibling = {
        **table.where,
        "connector": CONNECTOR,
        "task": 1,
        "epoch": 2,
        "partitions": PARTS[1:2],
    }
    result = await table.commit(
        rows([["top", 0, 10, 20]]), 1, [["top", 0, 10, 20]], before_publish=sibling
    )
    assert result["attempts"] == 2 and table.rows() == 20
    read = await table.job("read_offsets", connector=CONNECTOR)
    assert read["offsets"] == [["top", 0, 20], ["top", 1, None]]


async def test_a_gap_is_refused(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    with pytest.raises(OffsetsDiverged, match="next offset is 10, this commit starts at 15"):
        await table.commit(rows([["top", 0, 15, 20]]), 1, [["top", 0, 15, 20]])
    assert table.rows() == 10


async def test_alter_offsets_sets_and_forgets(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    await table.job(
        "alter_offsets", connector=CONNECTOR, epoch=1, offsets=[["top", 0, None], ["top", 1, 50]]
    )
    read = await table.job("read_offsets", connector=CONNECTOR)
    assert read["offsets"] == [["top", 0, None], ["top", 1, 50]]
    await table.commit(rows([["top", 1, 50, 60]]), 1, [["top", 1, 50, 60]])
    assert table.rows() == 20


async def test_upkeep_compacts_and_expiry_keeps_the_offsets(table: Table) -> None:
    end = 0
    for _ in range(4):
        ranges = [["top", 0, end, end + 5], ["top", 1, end, end + 5]]
        await table.commit(rows(ranges), 1, ranges)
        end += 5
    before_files, before_rows = table.files(), table.rows()
    assert before_files == 8
    # Killed by its deadline inside the job: the table is as it was.
    with pytest.raises(errors.WriteTimeout):
        await table.job("upkeep", min_files=2, retain_ms=0, timeout=0.3)
    assert (table.files(), table.rows()) == (before_files, before_rows)
    report = await table.job("upkeep", min_files=2, retain_ms=0)
    assert report["compacted"] == 2
    assert report["files_before"] == 8 and report["files_after"] == table.files() == 2
    assert table.rows() == before_rows
    assert report["snapshots_expired"] > 0
    # main: the compaction's snapshot (no state) on the newest commit's: both kept.
    assert len(table.metadata()["snapshots"]) == 2
    read = await table.job("read_offsets", connector=CONNECTOR)
    assert read["offsets"] == [["top", 0, 20], ["top", 1, 20]]
    await table.commit(rows([["top", 0, 20, 25]]), 1, [["top", 0, 20, 25]])
    assert table.rows() == before_rows + 5


async def test_a_commit_killed_mid_write_leaves_the_table_as_it_was(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    # Killed by its deadline somewhere in its work (which step depends on the machine's speed).
    big = [["top", 0, 10, 3_000_010]]
    began = time.monotonic()
    with pytest.raises(errors.WriteTimeout):
        await table.commit(rows(big), 1, big, timeout=2.0)
    assert time.monotonic() - began < 60
    assert table.rows() == 10
    # Killed at the worst instant: rows written to its branch, main not swapped yet.
    with pytest.raises(errors.ExecutorDied):
        await table.commit(rows([["top", 0, 10, 20]]), 1, [["top", 0, 10, 20]], crash_after="write")
    assert table.rows() == 10
    left = [r for r in table.metadata()["refs"] if r.startswith("connectd_")]
    assert left, "the crashed commit's branch (its rows) is in the metadata, not on main"
    # The replacement executor (a JVM start) takes the next commit.
    result = await table.commit(rows([["top", 0, 10, 20]]), 1, [["top", 0, 10, 20]])
    assert result["rows"] == 10 and table.rows() == 20
    report = await table.job("upkeep", min_files=100, branch_ttl_ms=0)
    assert report["branches_dropped"] == len(left)
    assert list(table.metadata()["refs"]) == ["main"]
    read = await table.job("read_offsets", connector=CONNECTOR)
    assert read["offsets"] == [["top", 0, 20]]


async def test_merge_schema_adds_a_column(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    wider = rows([["top", 0, 10, 20]])
    wider = wider.append_column("extra", pa.array([1.5] * 10, pa.float64()))
    result = await table.commit(wider, 1, [["top", 0, 10, 20]], merge_schema=True)
    assert ["extra", "double"] in result["schema"] and table.rows() == 20


async def test_a_skip_moves_the_offset_and_says_why(table: Table) -> None:
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    reason = "errors.offset.out.of.range=earliest: offsets 10..39 were deleted"
    await table.commit(rows([]), 1, [["top", 0, 10, 40]], reason=reason)
    with pytest.raises(OffsetsDiverged):  # a skip continues the offsets like a commit
        await table.commit(rows([]), 1, [["top", 0, 50, 60]], reason=reason)
    await table.job("open_table", connector=CONNECTOR, task=0, epoch=2, partitions=PARTS[:1])
    with pytest.raises(ZombieEpoch):  # fenced like a commit
        await table.commit(rows([]), 1, [["top", 0, 40, 50]], reason=reason)
    read = await table.job("read_offsets", connector=CONNECTOR)
    assert read["offsets"] == [["top", 0, 40]]
    summaries = [s["summary"] for s in table.metadata()["snapshots"]]
    skips = [
        json.loads(s[state.SKIPPED_PREFIX + CONNECTOR])
        for s in summaries
        if state.SKIPPED_PREFIX + CONNECTOR in s
    ]
    assert skips == [{"skipped": [["top", 0, 10, 40]], "reason": reason}]
    assert table.rows() == 10


async def test_another_connector_is_refused_and_a_takeover_continues(table: Table) -> None:
    """Each connector keeps its state under a key of its own, so Iceberg alone would let two
    connectors write the same partitions; ``connectd.owners`` says whose a partition is."""
    await table.commit(rows([["top", 0, 0, 10]]), 1, [["top", 0, 0, 10]])
    open_as = {"task": 0, "epoch": 1, "partitions": PARTS[:1]}
    with pytest.raises(PartitionsOwned, match=f"connector '{CONNECTOR}' owns it"):
        await table.job("open_table", connector="other", **open_as)
    with pytest.raises(PartitionsOwned):
        await table.job(
            "commit", rows([["top", 0, 0, 5]]), connector="other", task=0, epoch=1,
            ranges=[["top", 0, 0, 5]],
        )  # fmt: skip
    taken = await table.job("open_table", connector="other", takeover=[CONNECTOR], **open_as)
    assert taken["offsets"] == [["top", 0, 10]]  # continues the owner's offsets
    with pytest.raises(PartitionsOwned, match="connector 'other' owns it"):
        await table.commit(rows([["top", 0, 10, 15]]), 1, [["top", 0, 10, 15]])
    await table.job(
        "commit", rows([["top", 0, 10, 15]]), connector="other", task=0, epoch=1,
        ranges=[["top", 0, 10, 15]],
    )  # fmt: skip
    assert table.rows() == 15
    assert (await table.job("read_offsets", connector=CONNECTOR))["offsets"] == []
    assert (await table.job("read_offsets", connector="other"))["offsets"] == [["top", 0, 15]]
