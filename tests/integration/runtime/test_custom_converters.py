"""A converter of your own, named ``package.module:Class`` in a connector's ``value.converter``
(issue 31): its columns land in the table, its bad records are errant like a built-in
converter's, and a path that does not load is refused when the connector is created."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

pytestmark = pytest.mark.integration


async def test_a_python_converter_from_a_connector_config(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    lines = [f"item{i};{i * 10}".encode() for i in range(10)]
    lines[4] = b"broken"
    await produce(kafka_bootstrap, topic, [(None, v) for v in lines])
    table = tmp_path / "table"
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"))
    assert d.rest_url is not None
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "value.converter": "support.custom_converters:CsvConverter",
        "value.converter.separator": ";",
        "errors.tolerance": "all",
    }
    async with aiohttp.ClientSession(d.rest_url) as http:
        bad = {**config, "value.converter": "support.custom_converters:NoSuchConverter"}
        async with http.post("/connectors", json={"name": "nope", "config": bad}) as r:
            body = await r.json()
            assert r.status == 400 and "value.converter" in body["message"], body
            assert "cannot be loaded" in body["message"]
        wrong = {**config, "value.converter.separator": "::"}
        async with http.post("/connectors", json={"name": "nope", "config": wrong}) as r:
            body = await r.json()
            assert r.status == 400 and "separator: one character" in body["message"], body
        async with http.post("/connectors", json={"name": "csv", "config": config}) as r:
            assert r.status == 201, await r.text()
    await wait_until(lambda: committed(table) == 10, 120, "every offset committed past")
    data = ds.dataset(table, format="parquet").to_table()
    assert (str(data.schema.field("name").type), str(data.schema.field("amount").type)) == (
        "string",
        "int64",
    )
    rows = sorted(
        zip(data.column("name").to_pylist(), data.column("amount").to_pylist(), strict=True)
    )
    assert rows == sorted((f"item{i}", i * 10) for i in range(10) if i != 4)
