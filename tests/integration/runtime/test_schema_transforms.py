"""Connect's transforms on keys and values with a schema, on real parts (issue 30): a ParquetSink
reads Connect JSON envelopes (``JsonConverter``, ``schemas.enable=true``) for keys and values
through a chain of MaskField, Cast, Flatten, SetSchemaMetadata, InsertField and ExtractField$Key;
the table's columns keep the types Connect's schemas give them (a masked list stays a list, a
Timestamp cast to a string is printed as Connect prints it, a nested struct's leaves are
columns of their own, the inserted timestamp is a timestamp, the extracted key an int32), and
each record is in the table once."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

pytestmark = pytest.mark.integration

D = "org.apache.kafka.connect.data."
RECORDS = 30
KEY = {"type": "struct", "optional": False, "fields": [{"type": "int32", "field": "k"}]}
VALUE = {
    "type": "struct",
    "name": "shop.Order",
    "optional": False,
    "fields": [
        {"type": "int64", "field": "id"},
        {"type": "string", "field": "ssn", "optional": True},
        {"type": "array", "field": "tags", "items": {"type": "string"}, "optional": True},
        {"type": "int64", "field": "at", "name": D + "Timestamp"},
        {
            "type": "struct",
            "field": "addr",
            "optional": True,
            "fields": [
                {"type": "string", "field": "city"},
                {"type": "int32", "field": "zip", "optional": True},
            ],
        },
    ],
}
AT = 1_700_000_000_000


def _record(i: int) -> tuple[bytes, bytes]:
    value: dict[str, Any] = {
        "id": i,
        "ssn": f"123-45-{i:04d}",
        "tags": ["a", f"t{i}"],
        "at": AT + i,
        "addr": {"city": f"c{i % 3}", "zip": None if i % 2 else i},
    }
    key = json.dumps({"schema": KEY, "payload": {"k": i * 10}}).encode()
    return key, json.dumps({"schema": VALUE, "payload": value}).encode()


async def test_a_chain_on_values_with_a_schema_keeps_their_types(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    await produce(kafka_bootstrap, topic, [_record(i) for i in range(RECORDS)])
    table = tmp_path / "table"
    sink = {
        "name": "typed-chain",
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "2",
        "path": str(table),
        "flush.interval.ms": "500",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "transforms": "mask,cast,flat,meta,insert,key",
        "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
        "transforms.mask.fields": "ssn,tags",
        "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.cast.spec": "id:string,at:string",
        "transforms.flat.type": "org.apache.kafka.connect.transforms.Flatten$Value",
        "transforms.flat.delimiter": "_",
        "transforms.meta.type": "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
        "transforms.meta.schema.name": "shop.Renamed",
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.offset.field": "off",
        "transforms.insert.timestamp.field": "ts",
        "transforms.key.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
        "transforms.key.field": "k",
    }
    await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == RECORDS, 120, "every record committed")

    data = ds.dataset(table, format="parquet").to_table()
    types = {f.name: str(f.type) for f in data.schema}
    assert types["key"] == "int32", types
    assert types["id"] == "string" and types["at"] == "string", types
    assert types["ssn"] == "string" and types["tags"] == "list<element: string>", types
    assert types["addr_city"] == "string" and types["addr_zip"] == "int32", types
    assert types["off"] == "int64" and types["ts"] == types["kafka_timestamp"], types
    assert "addr" not in types, types
    rows = sorted(data.to_pylist(), key=lambda r: int(r["id"]))
    assert [int(r["id"]) for r in rows] == list(range(RECORDS))  # each record once
    for i, r in enumerate(rows):
        assert r["key"] == i * 10
        assert (r["ssn"], r["tags"]) == ("", [])
        stamp = datetime.datetime.fromtimestamp((AT + i) / 1000, datetime.UTC)
        assert r["at"] == stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
        assert (r["addr_city"], r["addr_zip"]) == (f"c{i % 3}", None if i % 2 else i)
        assert r["off"] == r["kafka_offset"]
        assert r["ts"] == r["kafka_timestamp"]
