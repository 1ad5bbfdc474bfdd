"""``header.converter`` on real parts (issue 31): records with headers (text, bytes that are not
UTF-8, a null value) through a ParquetSink whose connector sets Connect's
SimpleHeaderConverter: the table's ``headers`` column holds each header's text, a header an
InsertHeader transform added included; the worker's ByteArrayConverter (another connector)
keeps their bytes; a header converter connectd does not have is refused when the connector is
created, naming the key. Connect's JsonConverter as the header converter: each header's JSON
text (an envelope's payload), a header it cannot read making its record errant at Connect's
HEADER_CONVERTER stage."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import dead_letter_settings, dead_letters
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
        bad = _sink("long-headers", topic, tmp_path / "never") | {
            "header.converter": "org.apache.kafka.connect.converters.LongConverter"
        }
        async with http.post("/connectors", json={"name": bad["name"], "config": bad}) as r:
            body = await r.json()
            assert r.status == 400, body
            assert "header.converter" in body["message"], body


ENVELOPE = (
    b'{"schema": {"type": "struct", "optional": false, "fields":'
    b' [{"field": "n", "type": "int32", "optional": false}]}, "payload": {"n": 7}}'
)


async def test_json_headers_are_their_json_text_and_an_unreadable_one_is_errant(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    dlq = await kafka_topic(partitions=1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"good", headers=[("h", ENVELOPE), ("none", None)])
        await producer.send_and_wait(topic, b"bad", headers=[("h", b"{not json")])
        await producer.send_and_wait(topic, b"plain", headers=[("h", b"[1, 2.50]")])
    finally:
        await producer.stop()
    enveloped, plain = tmp_path / "enveloped", tmp_path / "plain"
    json_headers = {"header.converter": "org.apache.kafka.connect.json.JsonConverter"}
    first = _sink("json-enveloped", topic, enveloped) | json_headers | dead_letter_settings(dlq)
    first |= {
        "transforms": "mark",
        "transforms.mark.type": "org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.mark.header": "via",
        "transforms.mark.value.literal": "connectd",
    }
    second = (
        _sink("json-plain", topic, plain)
        | json_headers
        | {
            "header.converter.schemas.enable": "false",
            "errors.tolerance": "all",
        }
    )
    await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[first, second]
    )
    await wait_until(
        lambda: committed(enveloped) == 3 and committed(plain) == 3, 120, "both tables"
    )
    rows = ds.dataset(enveloped, format="parquet").to_table(columns=["value", "headers"])
    assert str(rows.schema.field("headers").type) == (
        "list<element: struct<key: string, value: string>>"
    )
    # Under schemas.enable (Connect's default) a header not in an envelope is errant too.
    assert rows.to_pylist() == [
        {
            "value": "good",
            "headers": [
                {"key": "h", "value": '{"n":7}'},
                {"key": "none", "value": None},
                {"key": "via", "value": '"connectd"'},  # InsertHeader's string, as JSON
            ],
        }
    ]
    letters = await dead_letters(kafka_bootstrap, dlq, 2)
    assert sorted(v for v, _ in letters) == [b"bad", b"plain"]
    for _, headers in letters:
        assert headers["__connect.errors.stage"] == "HEADER_CONVERTER"
        assert headers["__connect.errors.class.name"] == (
            "org.apache.kafka.connect.json.JsonConverter"
        )
        assert "header 'h'" in headers["__connect.errors.exception.message"]
    rows = ds.dataset(plain, format="parquet").to_table(columns=["value", "headers"])
    assert rows.to_pylist() == [
        {
            "value": "good",
            "headers": [
                {"key": "h", "value": json_text(ENVELOPE)},
                {"key": "none", "value": None},
            ],
        },
        {"value": "plain", "headers": [{"key": "h", "value": "[1,2.50]"}]},
    ]


def json_text(raw: bytes) -> str:
    import json

    return json.dumps(json.loads(raw), separators=(",", ":"))
