"""Confluent's JsonSchemaConverter on real parts (issue 31): records written by Confluent's own
``JSONSerializer`` through a real Schema Registry into a ParquetSink table: the registered JSON
Schema types the columns (a Connect Decimal and Timestamp by their titles, a nested object, an
optional field, a union of an integer and a string as Confluent's OneOf struct), a second
schema version adds a column, and a record whose schema id the registry does not know is
dead-lettered."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import dead_letter_settings, dead_letters
from support.kafka_fixtures import TopicFactory
from support.registry import Registry, produce_serialized, serialize
from support.tables import committed

pytestmark = pytest.mark.integration

D = "org.apache.kafka.connect.data."
ONE_OF = "io.confluent.connect.json.OneOf"


def _schema(version: int) -> dict[str, Any]:
    props: dict[str, Any] = {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "price": {
            "type": "number",
            "title": D + "Decimal",
            "connect.type": "bytes",
            "connect.parameters": {"scale": "2"},
        },
        "at": {"type": "integer", "title": D + "Timestamp"},
        "shop": {"type": "object", "properties": {"city": {"type": "string"}}},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "amount": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
    }
    if version == 2:
        props["score"] = {"type": "number"}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Sale",
        "type": "object",
        "properties": props,
        "required": ["id", "name"],
    }


def _value(i: int, version: int) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": i,
        "name": f"n{i}",
        "price": i + 0.25,
        "at": 1_700_000_000_000 + i,
        "shop": {"city": f"c{i % 3}"},
        "note": None if i % 2 else f"note {i}",
        "amount": i if i % 3 else f"{i} EUR",
    }
    if version == 2:
        value["score"] = i / 4
    return value


async def test_json_schema_records_land_as_typed_columns(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    dlq = await kafka_topic(partitions=1)
    values = serialize(
        schema_registry, _schema(1), topic, [_value(i, 1) for i in range(30)], kind="json"
    )
    values += serialize(
        schema_registry, _schema(2), topic, [_value(i, 2) for i in range(30, 60)], kind="json"
    )
    unknown = b"\x00\x00\x0f\x42\x40" + b'{"id": 1}'
    produce_serialized(kafka_bootstrap, topic, [*values, unknown], partitions=2)
    table = tmp_path / "table"
    sink = {
        "name": "jsonschema",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "schema.evolution": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.json.JsonSchemaConverter",
        "value.converter.schema.registry.url": schema_registry.url,
        **dead_letter_settings(dlq),
    }
    await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == 61, 120, "every offset committed past")
    data = ds.dataset(table, format="parquet").to_table()
    types = {f.name: str(f.type) for f in data.schema}
    assert types["id"] == "int64" and types["price"] == "decimal128(38, 2)"
    assert types["at"].startswith("timestamp[") and types["shop"] == "struct<city: string>"
    assert types["score"] == "double" and types["note"] == "string"
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(60))
    for r in rows:
        i = r["id"]
        assert r["price"] == decimal.Decimal(i) + decimal.Decimal("0.25")
        assert r["at"] == datetime.datetime.fromtimestamp(
            (1_700_000_000_000 + i) / 1000, datetime.UTC
        )
        assert r["shop"] == {"city": f"c{i % 3}"}
        assert r["note"] == (None if i % 2 else f"note {i}")
        assert r["score"] == (i / 4 if i >= 30 else None)
        assert r["amount"] == {
            f"{ONE_OF}.field.0": i if i % 3 else None,
            f"{ONE_OF}.field.1": None if i % 3 else f"{i} EUR",
        }
    [(_, headers)] = await dead_letters(kafka_bootstrap, dlq, 1)
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert (
        "schema id 1000000 is not in the Schema Registry"
        in (headers["__connect.errors.exception.message"])
    )
