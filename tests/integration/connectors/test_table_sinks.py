"""What every table sink does, one test per behaviour run against ParquetSink and DeltaSink in
the daemon, on a real broker and real Spark (the session's warm pool; ``delta_pool`` with the
Delta jars): one table per topic (``${topic}``) with Connect's offsets API answered per table;
a field that changes type refused (errant), also by a connector that knows the table's column
types only from the table (ParquetSink: the files Spark wrote; DeltaSink: its log). Tables are
read by pyarrow (ParquetSink) and delta-rs (DeltaSink), never through the daemon."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from support import delta, tables
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.fake_worker import Client
from support.kafka import consume_all, delete_topic, produce
from support.kafka_fixtures import TopicFactory

from daemon.runtime.model import State

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Sink:
    name: str  # connector.class
    pool: str  # the fixture of its executors
    committed: Callable[[Path], int]  # offsets committed into a table, summed
    read: Callable[[Path, list[str]], pa.Table]  # a table's rows


def _parquet_rows(table: Path, columns: list[str]) -> pa.Table:
    return ds.dataset(table, format="parquet").to_table(columns=columns)


SINKS = [
    Sink("ParquetSink", "sink_pool", tables.committed, _parquet_rows),
    Sink("DeltaSink", "delta_pool", delta.committed, delta.rows_with_deltalake),
]


@pytest.fixture(params=SINKS, ids=[s.name for s in SINKS])
def sink(request: pytest.FixtureRequest) -> Sink:
    return request.param  # type: ignore[no-any-return]


async def test_one_table_per_topic_and_the_offsets_api(
    sink: Sink,
    request: pytest.FixtureRequest,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    """``path`` with ``${topic}``: each topic lands in its own table, with its own
    exactly-once state; GET/PATCH/DELETE /connectors/<name>/offsets answer from the tables."""
    topics = [await kafka_topic(partitions=2), await kafka_topic(partitions=1)]
    for i, topic in enumerate(topics):
        await produce(kafka_bootstrap, topic, 40 * (i + 1))
    daemon = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"),
        executors=request.getfixturevalue(sink.pool),
    )
    name = "per-topic"
    config = {
        "connector.class": sink.name,
        "topics": ",".join(topics),
        "tasks.max": "2",
        "path": str(tmp_path / "tables" / "${topic}"),
        "flush.max.records": "30",
    }
    assert daemon.herder is not None and daemon.rest_url is not None
    await daemon.herder.create_connector(name, config)
    dirs = [tmp_path / "tables" / t for t in topics]
    await wait_until(lambda: [sink.committed(t) for t in dirs] == [40, 80], 180, "both in")
    for topic, table in zip(topics, dirs, strict=True):
        assert set(sink.read(table, ["kafka_topic"]).column("kafka_topic").to_pylist()) == {topic}
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
        assert [sink.committed(t) for t in dirs] == [40, 7]
        assert (await client.call("DELETE", f"/connectors/{name}/offsets")).status == 200
        assert (await client.get(f"/connectors/{name}/offsets")).json == {"offsets": []}
    assert [sink.read(t, ["kafka_offset"]).num_rows for t in dirs] == [40, 80]  # rows stay


async def test_a_field_that_changes_type_is_errant(
    sink: Sink,
    request: pytest.FixtureRequest,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    """JSON values with their fields as columns: a record whose ``id`` turns from a number
    into text goes to the dead-letter topic (errors.tolerance=all) and the others land
    (ParquetSink wrote it before, and its table held an ``id`` of two types). A connector that
    never saw a numeric ``id`` (its converter infers text) meets the table's bigint column:
    with errors.tolerance=none its task fails naming the field and the record, and the table
    is unchanged."""
    topic, other = await kafka_topic(partitions=1), await kafka_topic(partitions=1)
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"value.converter": "json", "value.converter.schemas.enable": "false"},
    )
    daemon = await run_daemon(props, executors=request.getfixturevalue(sink.pool))
    worker = daemon.herder
    assert worker is not None
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    base = {
        "connector.class": sink.name,
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
    await wait_until(lambda: sink.committed(table) == 10, 180, "10 records in")
    await produce(kafka_bootstrap, topic, [(None, b'{"id": "eleven", "name": "x"}')])
    more = [(None, json.dumps({"id": i, "name": f"n{i}"}).encode()) for i in range(11, 16)]
    await produce(kafka_bootstrap, topic, more)
    try:
        await wait_until(lambda: sink.committed(table) == 16, 180, "the tolerant one past it")
        # ParquetSink moves a commit's files into place just after its record is published.
        data = await wait_until(
            lambda: (d := sink.read(table, ["kafka_offset", "id"])).num_rows == 15 and d,
            10,
            "the committed rows in place",
        )
        assert sorted(data.column("kafka_offset").to_pylist()) == [*range(10), *range(11, 16)]
        assert data.schema.field("id").type == pa.int64()
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
    assert sink.read(table, ["kafka_offset"]).num_rows == 15
