"""DeltaSink in the daemon, on a real broker and real Spark with the Delta jars: the SIGKILL
audit, the hang demo's kill, one table per topic with Connect's offsets API, errant records
by the table's schema. Rows are read by delta-rs and by Spark's Delta reader."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import aiohttp
import pyarrow.compute as pc
import pytest
from support.daemon import DaemonFactory, ProcessFactory, wait_until, worker_properties
from support.delta import committed, committed_offsets, rows_with_deltalake
from support.exactly_once import PARTITIONS, RECORDS, audit
from support.fake_worker import Client
from support.kafka import consume_all, delete_topic, produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.executor.process import read_stat
from daemon.runtime.model import State

pytestmark = pytest.mark.integration


async def spark_rows(pool: ThreadedPool, table: Path) -> dict[str, int]:
    return dict(
        await pool.run(
            "delta-check", "support.delta:spark_count", timeout=120, kwargs={"path": str(table)}
        )
    )


async def test_delta_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    """20,000 records, 3 partitions, the daemon SIGKILLed three times and two executor JVMs
    SIGKILLed: the Delta table holds each offset once, by delta-rs and by Spark."""
    topic = await kafka_topic(partitions=PARTITIONS)

    async def check(table: Path) -> None:
        data = rows_with_deltalake(table, ["kafka_partition", "kafka_offset", "value"])
        assert data.num_rows == RECORDS
        assert data.group_by(["kafka_partition", "kafka_offset"]).aggregate([]).num_rows == RECORDS
        values = pc.utf8_slice_codeunits(data.column("value"), 0, 8)
        assert pc.count_distinct(values).as_py() == RECORDS
        assert await spark_rows(delta_pool, table) == {"rows": RECORDS, "distinct": RECORDS}

    await audit(
        daemon_process,
        kafka_bootstrap,
        topic,
        tmp_path,
        worker_extra={"executor.spark.formats": "delta"},
        sink_extra={"connector.class": "DeltaSink", "partition.by": "kafka_partition"},
        progress=committed,
        check=check,
    )


async def test_a_hung_delta_write_is_killed_and_nothing_of_it_lands(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first commit hangs in a Python UDF inside Delta's write: at the write deadline the
    executor's tree is killed, the restarted task writes every record once, and the table's
    history holds no row of the killed write. The daemon's pool loads Delta on demand."""
    n = 300
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, n)
    table = tmp_path / "table"
    marker = tmp_path / "udf.pid"
    monkeypatch.setenv("CONNECTD_HANG_MARKER", str(marker))  # executors inherit it
    props = worker_properties(
        kafka_bootstrap, tmp_path / "state", **{"task.write.timeout.ms": "20000"}
    )
    daemon = await run_daemon(props)
    worker = daemon.herder
    assert worker is not None
    await worker.create_connector(
        "hang-delta",
        {
            "connector.class": "support.delta_hang:HangOnceDeltaSink",
            "topics": topic,
            "tasks.max": "1",
            "path": str(table),
            "errors.restart.max": "1",
            "errors.restart.backoff.max.ms": "1000",
        },
    )
    await wait_until(marker.exists, 240, "the UDF hanging inside the Delta write")
    udf_pid = int(marker.read_text())
    executor_pid = worker.task_status("hang-delta", 0).executor_pid
    assert executor_pid is not None
    await wait_until(lambda: read_stat(executor_pid) is None, 90, "the deadline's kill")

    def udf_gone() -> bool:
        stat = read_stat(udf_pid)
        return stat is None or not stat.running

    # The pool confirms the whole tree gone before it reports the kill; the executor's own
    # pid goes first.
    await wait_until(udf_gone, 10, "the UDF's Python worker gone with its executor")
    await wait_until(lambda: committed(table) >= n, 240, "the restarted task caught up")
    data = rows_with_deltalake(table, ["kafka_offset"])
    assert data.num_rows == n and pc.count_distinct(data.column("kafka_offset")).as_py() == n
    from deltalake import DeltaTable

    written = 0
    for commit in DeltaTable(str(table)).history():
        written += int((commit.get("operationMetrics") or {}).get("numOutputRows", 0))
        meta = json.loads(commit["userMetadata"]) if commit.get("userMetadata") else None
        if meta is not None:
            assert meta["epoch"] > 0 and meta["kind"] in ("fence", "write")
    assert written == n, "rows of the killed write reached the table's history"
    assert await spark_rows(delta_pool, table) == {"rows": n, "distinct": n}


async def test_one_table_per_topic_and_the_offsets_api(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    """``path`` with ``${topic}``: each topic lands in its own table with its own offsets;
    GET/PATCH/DELETE /connectors/<name>/offsets answer from the tables."""
    topics = [await kafka_topic(partitions=2), await kafka_topic(partitions=1)]
    for i, topic in enumerate(topics):
        await produce(kafka_bootstrap, topic, 40 * (i + 1))
    daemon = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"), executors=delta_pool
    )
    name = "per-topic"
    config = {
        "connector.class": "DeltaSink",
        "topics": ",".join(topics),
        "tasks.max": "2",
        "path": str(tmp_path / "tables" / "${topic}"),
        "flush.max.records": "30",
    }
    assert daemon.herder is not None and daemon.rest_url is not None
    await daemon.herder.create_connector(name, config)
    tables = [tmp_path / "tables" / t for t in topics]
    await wait_until(lambda: [committed(t) for t in tables] == [40, 80], 180, "both topics in")
    for topic, table in zip(topics, tables, strict=True):
        data = rows_with_deltalake(table, ["kafka_topic"])
        assert pc.unique(data.column("kafka_topic")).to_pylist() == [topic]
    async with aiohttp.ClientSession(daemon.rest_url) as session:
        client = Client(session)
        assert (await client.call("PUT", f"/connectors/{name}/stop")).status == 204
        shown = (await client.get(f"/connectors/{name}/offsets")).json["offsets"]
        got = {
            (o["partition"]["kafka_topic"], o["partition"]["kafka_partition"]): o["offset"][
                "kafka_offset"
            ]
            for o in shown
        }
        assert sum(got.values()) == 120 and set(got) == {
            (topics[0], 0),
            (topics[0], 1),
            (topics[1], 0),
        }
        partition = {"kafka_topic": topics[1], "kafka_partition": 0}
        wanted = {"offsets": [{"partition": partition, "offset": {"kafka_offset": 7}}]}
        altered = await client.call("PATCH", f"/connectors/{name}/offsets", json=wanted)
        assert altered.status == 200, altered.text
        assert committed_offsets(tables[1])[f"connectd/{name}/{topics[1]}/0"] == 7
        assert (await client.call("DELETE", f"/connectors/{name}/offsets")).status == 200
        assert (await client.get(f"/connectors/{name}/offsets")).json == {"offsets": []}
    assert [rows_with_deltalake(t, ["kafka_offset"]).num_rows for t in tables] == [40, 80]


async def test_a_field_that_changes_type_is_errant(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    """JSON values with their fields as columns: a record whose ``id`` turns from a number
    into text goes to the dead-letter topic (errors.tolerance=all) and the others land. A
    connector that never saw a numeric ``id`` (its converter infers text) meets the table's
    bigint column: with errors.tolerance=none its task fails naming the field and the record,
    and the table is unchanged."""
    topic, other = await kafka_topic(partitions=1), await kafka_topic(partitions=1)
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"value.converter": "json", "value.converter.schemas.enable": "false"},
    )
    daemon = await run_daemon(props, executors=delta_pool)
    worker = daemon.herder
    assert worker is not None
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    base = {
        "connector.class": "DeltaSink",
        "value.converter.mode": "infer",
        "flush.linger.ms": "200",
        "errors.restart.enabled": "false",
    }
    good = [(None, json.dumps({"id": i, "name": f"n{i}"}).encode()) for i in range(10)]
    await produce(kafka_bootstrap, topic, good)
    table = tmp_path / "table"
    await worker.create_connector(
        "tolerant",
        {
            **base,
            "topics": topic,
            "path": str(table),
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
        },
    )
    await wait_until(lambda: committed(table) == 10, 180, "10 records in")
    await produce(kafka_bootstrap, topic, [(None, b'{"id": "eleven", "name": "x"}')])
    more = [(None, json.dumps({"id": i, "name": f"n{i}"}).encode()) for i in range(11, 16)]
    await produce(kafka_bootstrap, topic, more)
    try:
        await wait_until(lambda: committed(table) == 16, 180, "the tolerant one past it")
        data = rows_with_deltalake(table, ["kafka_offset", "id"])
        assert data.num_rows == 15 and 10 not in data.column("kafka_offset").to_pylist()
        assert (await consume_all(kafka_bootstrap, dlq, 1))[0].offset == 0
    finally:
        await delete_topic(kafka_bootstrap, dlq)

    await produce(kafka_bootstrap, other, [(None, b'{"id": "one", "name": "y"}')])
    await worker.create_connector("strict", {**base, "topics": other, "path": str(table)})

    def failed() -> str | None:
        (task,) = worker.connector_status("strict").tasks
        return task.trace if task.state is State.FAILED else None

    trace = await wait_until(failed, 120, "the strict one FAILED")
    assert f"topic {other} partition 0 offset 0" in trace
    assert "field id is string here but the table's column is bigint" in trace
    assert rows_with_deltalake(table, ["kafka_offset"]).num_rows == 15
