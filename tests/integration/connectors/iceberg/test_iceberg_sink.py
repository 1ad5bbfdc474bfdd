"""IcebergSink in the daemon, on a real broker and real Spark with the Iceberg jar: the SIGKILL
audit (rows read by Spark's Iceberg reader), and the offsets API answered from the table's
snapshots."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from support.daemon import DaemonFactory, ProcessFactory, wait_until, worker_properties
from support.exactly_once import (
    PARTITIONS,
    SHORT_RECORDS,
    SHORT_WINDOWS,
    TRANSFORMED,
    TRANSFORMED_ROW,
    audit,
)
from support.fake_worker import Client
from support.iceberg import committed, committed_offsets, rows_with_pyiceberg
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

pytestmark = pytest.mark.integration


async def spark_rows(
    pool: ThreadedPool, warehouse: Path, table: str, where: str = ""
) -> dict[str, int]:
    catalog = {"catalog.type": "hadoop", "catalog.warehouse": str(warehouse)}
    return dict(
        await pool.run(
            "ice-check",
            "support.iceberg:spark_count",
            timeout=180,
            kwargs={"catalog": catalog, "table": table, "where": where},
            formats=("iceberg",),
        )
    )


@pytest.mark.spark_line
async def test_iceberg_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    iceberg_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    """6,000 records, 3 partitions, the daemon SIGKILLed and an executor JVM SIGKILLed (each
    fault ParquetSink's 20,000-record audit repeats, once), through a chain of six of Connect's
    transforms (a router among them): the Iceberg table holds each offset once, as the chain
    leaves it (Spark's Iceberg reader, and pyiceberg)."""
    topic = await kafka_topic(partitions=PARTITIONS)
    warehouse = tmp_path / "wh"
    table_dir = warehouse / "db" / "eos"

    async def check(_: Path) -> None:
        assert await spark_rows(iceberg_pool, warehouse, "db.eos", TRANSFORMED_ROW) == {
            "rows": SHORT_RECORDS,
            "distinct": SHORT_RECORDS,
            "where": SHORT_RECORDS,
        }
        # And read by pyiceberg, which is neither Spark nor connectd.
        data = rows_with_pyiceberg(table_dir, ["kafka_partition", "kafka_offset"])
        pairs = set(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True))
        assert data.num_rows == len(pairs) == SHORT_RECORDS

    await audit(
        daemon_process,
        kafka_bootstrap,
        topic,
        tmp_path,
        worker_extra={"executor.spark.formats": "iceberg"},
        sink_extra={
            "connector.class": "IcebergSink",
            "path": None,
            "table": "db.eos",
            "catalog.warehouse": str(warehouse),
            "partition.by": "kafka_partition",
            **TRANSFORMED,
        },
        progress=lambda _: committed(table_dir, "eos"),
        check=check,
        records=SHORT_RECORDS,
        windows=SHORT_WINDOWS,
    )


async def test_iceberg_tables_per_topic_and_the_offsets_api(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    iceberg_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topics = [await kafka_topic(partitions=1), await kafka_topic(partitions=1)]
    for i, topic in enumerate(topics):
        await produce(kafka_bootstrap, topic, 30 * (i + 1))
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props, executors=iceberg_pool)
    assert daemon.herder is not None and daemon.rest_url is not None
    name = "ice-topics"
    warehouse = tmp_path / "wh"
    await daemon.herder.create_connector(
        name,
        {
            "connector.class": "IcebergSink",
            "topics": ",".join(topics),
            "table": "db.${topic}",
            "catalog.warehouse": str(warehouse),
        },
    )
    dirs = [warehouse / "db" / t.replace(".", "_") for t in topics]
    await wait_until(lambda: [committed(d, name) for d in dirs] == [30, 60], 180, "both in")
    async with aiohttp.ClientSession(daemon.rest_url) as session:
        client = Client(session)
        assert (await client.call("PUT", f"/connectors/{name}/stop")).status == 204
        shown = (await client.get(f"/connectors/{name}/offsets")).json["offsets"]
        assert sorted(o["offset"]["kafka_offset"] for o in shown) == [30, 60]
        partition = {"kafka_topic": topics[0], "kafka_partition": 0}
        wanted = {"offsets": [{"partition": partition, "offset": {"kafka_offset": 5}}]}
        altered = await client.call("PATCH", f"/connectors/{name}/offsets", json=wanted)
        assert altered.status == 200, altered.text
        assert committed_offsets(dirs[0], name) == {(topics[0], 0): 5}
        assert (await client.call("DELETE", f"/connectors/{name}/offsets")).status == 200
        assert (await client.get(f"/connectors/{name}/offsets")).json == {"offsets": []}
    for d, n in zip(dirs, (30, 60), strict=True):
        assert await spark_rows(iceberg_pool, warehouse, f"db.{d.name}") == {
            "rows": n,
            "distinct": n,
        }
