"""DeltaSink's ``table``: a table of the executors' Spark catalog instead of a path. Here the
catalog is Hive's, with an embedded Derby metastore in the test's directory: one executor
(size 1, no spare) is the only JVM using it, as a real deployment's executors would share a
metastore service (docs/connectors.md#deltasink)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.spark import spark_settings

from daemon.connectors.tables import timeparts
from daemon.connectors.tables.jobs import raise_for
from daemon.executor import ExecutorPool
from daemon.storage.logstate import ZombieEpoch

pytestmark = pytest.mark.integration

J = "daemon.connectors.delta.jobs"


@pytest.fixture
async def hive_pool(tmp_path: Path) -> AsyncIterator[ExecutorPool]:
    conf = {
        **spark_settings().spark_conf,
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(tmp_path / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={tmp_path / 'metastore'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp_path}",
    }
    pool = ExecutorPool(spark_settings(spares=0, spark_conf=conf, formats=frozenset({"delta"})))
    await pool.start()
    try:
        yield pool
    finally:
        await pool.close(graceful_timeout=0.0)


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "kafka_topic": ["t"] * n,
            "kafka_partition": pa.array([0] * n, pa.int32()),
            "kafka_offset": pa.array(range(start, start + n), pa.int64()),
            "value": [f"v{i}" for i in range(n)],
        }
    )


def count(spark: Any, batch: Any, *, table: str) -> int:
    return int(spark.table(table).count())


async def test_a_catalog_table_is_created_and_fenced(
    hive_pool: ExecutorPool, tmp_path: Path
) -> None:
    async def job(fn: str, batch: pa.Table | None = None, **kw: Any) -> Any:
        result = await hive_pool.run(
            "lake-0",
            f"{J}:{fn}",
            batch,
            timeout=240,
            kwargs={"path": "", "table": "lake.events", **kw},
        )
        return raise_for(result)

    opened = await job("open_table", connector="c", task=0, epoch=1, partitions=[["t", 0]])
    assert opened["exists"] is False
    state = opened["state"]
    for start in (0, 10):
        done = await job(
            "commit",
            rows(start, 10),
            connector="c",
            task=0,
            epoch=1,
            ranges=[["t", 0, start, start + 10]],
            state=state,
        )
        state = done["state"]
    assert (tmp_path / "warehouse" / "lake.db" / "events" / "_delta_log").is_dir()
    newer = await job("open_table", connector="c", task=1, epoch=2, partitions=[["t", 0]])
    assert newer["offsets"] == [["t", 0, 20]]
    with pytest.raises(ZombieEpoch):
        await job(
            "commit",
            rows(20, 5),
            connector="c",
            task=0,
            epoch=1,
            ranges=[["t", 0, 20, 25]],
            state=state,
        )
    assert (
        await hive_pool.run(
            "lake-0", f"{__name__}:count", timeout=120, kwargs={"table": "lake.events"}
        )
        == 20
    )
    assert (await job("read_offsets", connector="c"))["offsets"] == [["t", 0, 20]]

    # A catalog table partitioned by a time transform: its column is a generated column.
    _, columns = timeparts.split_partition_by(["day(kafka_timestamp)"])
    stamps = pa.array([0, 86_400_000 - 1, None], pa.timestamp("ms", "UTC"))
    timed = timeparts.derived(rows(0, 3).append_column("kafka_timestamp", stamps), columns, 0)
    made = await job(
        "open_table", connector="d", task=0, epoch=1, partitions=[["t", 0]], table="lake.timed"
    )
    await job(
        "commit",
        timed,
        connector="d",
        task=0,
        epoch=1,
        ranges=[["t", 0, 0, 3]],
        state=made["state"],
        table="lake.timed",
        partition_by=["kafka_timestamp_day"],
        generated={"kafka_timestamp_day": ["day", "kafka_timestamp"]},
    )
    assert await hive_pool.run(
        "lake-0", f"{__name__}:generation", timeout=120, kwargs={"table": "lake.timed"}
    ) == {
        "kafka_timestamp_day": timeparts.generation_expression(
            "day", "kafka_timestamp", "timestamp"
        )
    }


def generation(spark: Any, batch: Any, *, table: str) -> dict[str, str]:
    """The generation expressions of ``table``'s columns, from its Delta log's metadata (a
    read's schema leaves them out)."""
    from daemon.connectors.delta import log

    where = log.location(spark, "", table)
    schema = json.loads(log.latest(spark, log.delta_log(spark, where)).metadata().schemaString())
    key = "delta.generationExpression"
    return {f["name"]: f["metadata"][key] for f in schema["fields"] if key in f["metadata"]}
