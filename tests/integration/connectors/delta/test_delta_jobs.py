"""DeltaSink's executor jobs on real Spark with the real Delta jars (``delta_pool``): offsets
read back from the Delta log, zombies refused (before and while they commit), a commit killed
at its deadline leaves nothing, compaction (finished or killed) keeps every row, schema rules.
Rows are counted by Spark's Delta reader and by delta-rs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.delta import committed_offsets, rows_with_deltalake
from support.spark import ThreadedPool

from daemon.connectors.tables.jobs import raise_for
from daemon.errors import RecordRejected, WriteTimeout
from daemon.storage.logstate import OffsetsDiverged, PartitionsOwned, ZombieEpoch

pytestmark = pytest.mark.integration

J = "daemon.connectors.delta.jobs"
S = "support.delta"


def rows(partition: int, start: int, n: int, **extra: Any) -> pa.Table:
    return pa.table(
        {
            "kafka_topic": ["t"] * n,
            "kafka_partition": pa.array([partition] * n, pa.int32()),
            "kafka_offset": pa.array(range(start, start + n), pa.int64()),
            "value": [f"v{i}" for i in range(n)],
            **extra,
        }
    )


def _physical_type(path: Path, column: str) -> str:
    schema = pq.ParquetFile(path).schema
    [kind] = [
        schema.column(i).physical_type
        for i in range(len(schema))
        if schema.column(i).name == column
    ]
    return str(kind)


class Table:
    """A Delta table driven through the jobs, as one task of ``connector`` would."""

    def __init__(self, pool: ThreadedPool, path: Path, connector: str = "c") -> None:
        self.pool, self.path, self.connector = pool, str(path), connector
        self.state: dict[str, int] = {}

    async def job(
        self, fn: str, batch: pa.Table | None = None, timeout: float = 120, **kw: Any
    ) -> Any:
        result = await self.pool.run(
            "delta-0", f"{J}:{fn}", batch, timeout=timeout, kwargs={"path": self.path, **kw}
        )
        return raise_for(result)

    async def open(self, epoch: int, partitions: list[int], **kw: Any) -> dict[int, int | None]:
        result = await self.job(
            "open_table",
            connector=self.connector,
            task=0,
            epoch=epoch,
            partitions=[["t", p] for p in partitions],
            **kw,
        )
        self.state.update(result["state"])
        return {p: o for _, p, o in result["offsets"]}

    async def commit(
        self, epoch: int, batch: pa.Table | None, ranges: list[list[Any]], **kw: Any
    ) -> Any:
        result = await self.job(
            "commit",
            batch,
            connector=self.connector,
            task=0,
            epoch=epoch,
            ranges=ranges,
            state=dict(self.state),
            partition_by=["kafka_partition"],
            **kw,
        )
        self.state.update(result["state"])
        return result

    async def count(self) -> dict[str, int]:
        spark = await self.pool.run(
            "delta-count", f"{S}:spark_count", timeout=120, kwargs={"path": self.path}
        )
        rs = rows_with_deltalake(Path(self.path), ["kafka_partition", "kafka_offset"])
        assert rs.num_rows == spark["rows"], "delta-rs and Spark disagree"
        return dict(spark)


async def test_offsets_come_back_and_a_zombie_is_refused(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    t = Table(delta_pool, tmp_path / "t")
    assert await t.open(1, [0, 1, 2]) == {0: None, 1: None, 2: None}  # no table yet
    await t.commit(1, rows(0, 0, 100), [["t", 0, 0, 100]])
    await t.commit(
        1, pa.concat_tables([rows(1, 0, 50), rows(2, 0, 20)]), [["t", 1, 0, 50], ["t", 2, 0, 20]]
    )
    await t.commit(1, rows(0, 100, 10), [["t", 0, 100, 110]])
    zombie_state = dict(t.state)

    newer = Table(delta_pool, tmp_path / "t")
    assert await newer.open(2, [0, 1, 2]) == {0: 110, 1: 50, 2: 20}
    before = await t.count()
    assert before == {"rows": 180, "distinct": 180}

    t.state = zombie_state  # the zombie does not know it was fenced
    with pytest.raises(ZombieEpoch, match="newer incarnation owns t-0"):
        await t.commit(1, rows(0, 110, 5), [["t", 0, 110, 115]])
    assert await t.count() == before
    # The newer incarnation goes on; another reader sees its offsets.
    await newer.commit(2, rows(0, 110, 5), [["t", 0, 110, 115]])
    assert committed_offsets(tmp_path / "t")["connectd/c/t/0"] == 115
    assert (await newer.open(2, [0]))[0] == 115


async def test_a_zombie_in_flight_when_the_fence_lands_is_refused(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    t = Table(delta_pool, tmp_path / "t")
    await t.open(1, [0])
    await t.commit(1, rows(0, 0, 100), [["t", 0, 0, 100]])
    big = rows(0, 100, 1_500_000)
    out = await delta_pool.run(
        "delta-0",
        f"{S}:zombie_in_flight",
        big,
        timeout=300,
        kwargs={"path": t.path, "connector": "c", "state": dict(t.state)},
    )
    assert "error" not in out["fence"], out["fence"]
    assert out["zombie"]["error"][0] == "ZombieEpoch", out["zombie"]
    assert await t.count() == {"rows": 100, "distinct": 100}


async def test_a_commit_killed_at_its_deadline_leaves_nothing(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    t = Table(delta_pool, tmp_path / "t")
    await t.open(1, [0])
    await t.commit(1, rows(0, 0, 100), [["t", 0, 0, 100]])
    with pytest.raises(WriteTimeout):
        await t.job(
            "commit",
            rows(0, 100, 3_000_000),
            timeout=3,
            connector="c",
            task=0,
            epoch=1,
            ranges=[["t", 0, 100, 3_000_100]],
            state=dict(t.state),
            partition_by=["kafka_partition"],
        )
    assert await t.count() == {"rows": 100, "distinct": 100}
    assert (await t.open(1, [0]))[0] == 100
    await t.commit(1, rows(0, 100, 10), [["t", 0, 100, 110]])
    assert await t.count() == {"rows": 110, "distinct": 110}


async def test_compaction_keeps_every_row_finished_or_killed(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    t = Table(delta_pool, tmp_path / "t")
    await t.open(1, [0, 1])
    stamps = pa.array([1_700_000_000_123] * 10, pa.timestamp("ms", tz="UTC"))
    for i in range(6):
        await t.commit(
            1,
            pa.concat_tables(
                [
                    rows(0, i * 10, 10, kafka_timestamp=stamps),
                    rows(1, i * 10, 10, kafka_timestamp=stamps),
                ]
            ),
            [["t", 0, i * 10, i * 10 + 10], ["t", 1, i * 10, i * 10 + 10]],
        )
    before = await t.count()
    assert before == {"rows": 120, "distinct": 120}
    # Killed mid-job (its deadline passes inside OPTIMIZE): the table is as it was.
    with pytest.raises(WriteTimeout):
        await t.job("upkeep", timeout=0.5, min_files=3, small_bytes=32 << 20)
    assert await t.count() == before
    done = await t.job("upkeep", min_files=3, small_bytes=32 << 20)
    assert done["compacted"] == 2
    assert done["files_after"] < done["files_before"]
    assert await t.count() == before
    assert await t.open(1, [0, 1]) == {0: 60, 1: 60}
    assert (await t.job("upkeep", min_files=3, small_bytes=32 << 20))["compacted"] == 0
    # Every data file, the commits' and the compaction's, holds microsecond timestamps (not
    # Spark's INT96, which other readers take for nanoseconds of another calendar).
    files = [f for f in (tmp_path / "t").rglob("*.parquet") if "_delta_log" not in f.parts]
    assert {_physical_type(f, "kafka_timestamp") for f in files} == {"INT64"}
    read = rows_with_deltalake(tmp_path / "t", ["kafka_timestamp"])["kafka_timestamp"]
    assert {v.timestamp() for v in read.to_pylist()} == {1_700_000_000.123}


async def test_schema_rules(delta_pool: ThreadedPool, tmp_path: Path) -> None:
    t = Table(delta_pool, tmp_path / "t")
    await t.open(1, [0])
    await t.commit(1, rows(0, 0, 5), [["t", 0, 0, 5]])
    extra = {"extra": pa.array([1] * 5, pa.int64())}
    with pytest.raises(RecordRejected, match=r"columns \['extra'\].*schema.evolution=false"):
        await t.commit(1, rows(0, 5, 5, **extra), [["t", 0, 5, 10]])
    result = await t.commit(1, rows(0, 5, 5, **extra), [["t", 0, 5, 10]], merge_schema=True)
    assert ["extra", "bigint"] in result["schema"]
    with pytest.raises(RecordRejected, match="extra: string in the batch, bigint in the table"):
        await t.commit(
            1, rows(0, 10, 5, extra=pa.array(["x"] * 5)), [["t", 0, 10, 15]], merge_schema=True
        )
    # A batch without the new column: its rows get nulls there.
    await t.commit(1, rows(0, 10, 5), [["t", 0, 10, 15]])
    data = rows_with_deltalake(tmp_path / "t", ["kafka_offset", "extra"])
    assert data.num_rows == 15 and data.column("extra").null_count == 10


async def test_another_connector_is_refused_and_a_takeover_continues(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    """Each connector has app ids of its own, so Delta alone would let two connectors write
    the same partitions (both would write every record). The newest stamp owns a partition:
    another connector's fence and commit are refused, before anything is written."""
    old, new = Table(delta_pool, tmp_path / "t", "old"), Table(delta_pool, tmp_path / "t", "new")
    await old.open(1, [0, 1])
    await old.commit(1, rows(0, 0, 10), [["t", 0, 0, 10]])
    with pytest.raises(PartitionsOwned, match=r"connector .old. owns it.*takeover=old"):
        await new.open(1, [0])
    assert await new.open(1, [1]) == {1: None}  # nobody wrote it yet: free to claim
    with pytest.raises(PartitionsOwned, match="connector 'new' owns it"):
        await old.commit(1, rows(1, 0, 5), [["t", 1, 0, 5]])
    assert await new.open(3, [0], takeover=["old"]) == {0: 10}  # continues old's offsets
    with pytest.raises(PartitionsOwned, match="connector 'new' owns it"):
        await old.commit(1, rows(0, 10, 5), [["t", 0, 10, 15]])
    with pytest.raises(PartitionsOwned, match="connector 'new' owns it"):
        await old.open(2, [0])
    await new.commit(3, rows(0, 10, 5), [["t", 0, 10, 15]])
    assert await new.count() == {"rows": 15, "distinct": 15}
    owners = await delta_pool.run(
        "delta-0", f"{S}:owners", timeout=120, kwargs={"path": new.path}, formats=("delta",)
    )
    assert owners == [["t", 0, "new"], ["t", 1, "new"]]


async def test_two_connectors_first_commits_into_a_new_table_land_once(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    """Two connectors commit the same partition's first records into a table that does not
    exist yet, at the same instant (nothing to fence before: a first commit creates the
    table): their commits both read and set the partition's claim app id, so Delta refuses
    one of them, which decides again and finds the other connector owning the partition."""
    path = str(tmp_path / "t")
    out = await delta_pool.run(
        "delta-0",
        f"{S}:racing_first_commits",
        rows(0, 0, 200),
        timeout=300,
        kwargs={"path": path},
        formats=("delta",),
    )
    errors = sorted(o["error"][0] for o in out.values() if "error" in o)
    assert errors == ["PartitionsOwned"], out
    count = await delta_pool.run(
        "delta-count", f"{S}:spark_count", timeout=120, kwargs={"path": path}
    )
    assert count == {"rows": 200, "distinct": 200}


async def test_a_skip_moves_the_offset_and_says_why(
    delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    t = Table(delta_pool, tmp_path / "t")
    await t.open(1, [0])
    await t.commit(1, rows(0, 0, 10), [["t", 0, 0, 10]])
    before = dict(t.state)
    reason = "errors.offset.out.of.range=earliest: offsets 10..39 were deleted"
    await t.commit(1, None, [["t", 0, 10, 40]], reason=reason)
    after, t.state = dict(t.state), before
    with pytest.raises(OffsetsDiverged):  # versioned like a commit: a second one is refused
        await t.commit(1, None, [["t", 0, 10, 40]], reason=reason)
    t.state = after
    assert (await Table(delta_pool, tmp_path / "t").open(2, [0]))[0] == 40
    with pytest.raises(ZombieEpoch):  # fenced like a commit
        await t.commit(1, None, [["t", 0, 40, 50]], reason=reason)
    from deltalake import DeltaTable

    skips = [
        json.loads(c["userMetadata"])
        for c in DeltaTable(t.path).history()
        if c.get("userMetadata") and json.loads(c["userMetadata"])["kind"] == "skip"
    ]
    assert [(s["skipped"], s["reason"], s["epoch"]) for s in skips] == [
        ([["t", 0, 10, 40]], reason, 1)
    ]
    assert await t.count() == {"rows": 10, "distinct": 10}
