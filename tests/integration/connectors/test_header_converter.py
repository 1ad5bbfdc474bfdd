"""``header.converter`` on real parts (issue 31): records with headers (text, bytes that are not
UTF-8, a null value) through a ParquetSink whose connector sets Connect's
SimpleHeaderConverter: the table's ``headers`` column holds each header's text, a header an
InsertHeader transform added included; the worker's ByteArrayConverter (another connector)
keeps their bytes; a header converter connectd does not have is refused when the connector is
created, naming the key."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory
from support.tables import committed

pytestmark = pytest.mark.integration

HEADERS = [("trace", b"t-1"), ("raw", b"\xff\x00"), ("empty", None)]


async def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(n):
            await producer.send_and_wait(topic, b'{"id": %d}' % i, headers=HEADERS)
    finally:
        await producer.stop()


def _sink(name: str, topic: str, table: Path) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }


async def test_the_headers_column_follows_the_header_converter(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    await _produce(kafka_bootstrap, topic, 5)
    text_table, bytes_table = tmp_path / "text", tmp_path / "bytes"
    text = _sink("text", topic, text_table) | {
        "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "transforms": "mark",
        "transforms.mark.type": "org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.mark.header": "via",
        "transforms.mark.value.literal": "connectd",
    }
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    props["header.converter"] = "org.apache.kafka.connect.converters.ByteArrayConverter"
    d = await run_daemon(props, connectors=[text, _sink("bytes", topic, bytes_table)])
    await wait_until(
        lambda: committed(text_table) == 5 and committed(bytes_table) == 5, 120, "both tables"
    )
    texts = ds.dataset(text_table, format="parquet").to_table(columns=["headers"])
    assert str(texts.schema.field("headers").type) == (
        "list<element: struct<key: string, value: string>>"
    )
    assert texts.column("headers").to_pylist()[0] == [
        {"key": "trace", "value": "t-1"},
        {"key": "raw", "value": "\ufffd\x00"},
        {"key": "empty", "value": None},
        {"key": "via", "value": "connectd"},
    ]
    raw = ds.dataset(bytes_table, format="parquet").to_table(columns=["headers"])
    assert raw.column("headers").to_pylist()[0] == [{"key": k, "value": v} for k, v in HEADERS]
    # A header converter connectd does not have: 400 at create, naming the key.
    assert d.rest_url is not None
    async with aiohttp.ClientSession(d.rest_url) as http:
        bad = _sink("json-headers", topic, tmp_path / "never") | {
            "header.converter": "org.apache.kafka.connect.json.JsonConverter"
        }
        async with http.post("/connectors", json={"name": bad["name"], "config": bad}) as r:
            body = await r.json()
            assert r.status == 400, body
            assert "header.converter" in body["message"], body
