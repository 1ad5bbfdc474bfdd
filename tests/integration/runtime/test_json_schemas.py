"""Connect's JsonConverter with schemas.enable=true on real parts (issue 31): envelopes as
Connect's JsonConverter writes them (a struct with a Decimal, a Date, a Timestamp, a nested
struct and an optional field with a default) land in a ParquetSink table as typed columns, the
logical types decoded; a later schema version adds a field (a new column); an envelope whose
payload does not match its schema is dead-lettered (errors.tolerance=all)."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import dead_letter_settings, dead_letters, produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

pytestmark = pytest.mark.integration

D = "org.apache.kafka.connect.data."


def _schema(version: int) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [
        {"type": "int64", "field": "id"},
        {
            "type": "bytes",
            "field": "price",
            "name": D + "Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        },
        {"type": "int32", "field": "day", "name": D + "Date"},
        {"type": "int64", "field": "at", "name": D + "Timestamp"},
        {
            "type": "struct",
            "field": "shop",
            "fields": [{"type": "string", "field": "city"}],
        },
        {"type": "string", "field": "note", "optional": True, "default": "none"},
    ]
    if version == 2:
        fields.append({"type": "double", "field": "score", "optional": True})
    return {"type": "struct", "name": "Sale", "optional": False, "fields": fields}


def _envelope(i: int, version: int) -> bytes:
    cents = i * 101
    payload: dict[str, Any] = {
        "id": i,
        "price": base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode(),
        "day": 19_000 + i,
        "at": 1_700_000_000_000 + i,
        "shop": {"city": f"c{i % 3}"},
        "note": None if i % 2 else f"n{i}",
    }
    if version == 2:
        payload["score"] = i / 2
    return json.dumps({"schema": _schema(version), "payload": payload}).encode()


async def test_connect_json_envelopes_land_as_typed_columns(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    dlq = await kafka_topic(partitions=1)
    values = [_envelope(i, 1) for i in range(20)] + [_envelope(i, 2) for i in range(20, 40)]
    bad = json.dumps({"schema": _schema(1), "payload": {"id": 99}}).encode()  # no price
    await produce(kafka_bootstrap, topic, [(None, v) for v in [*values, bad]])
    table = tmp_path / "table"
    sink = {
        "name": "envelopes",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "schema.evolution": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        **dead_letter_settings(dlq),
    }
    await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == 41, 120, "every offset committed past")
    data = ds.dataset(table, format="parquet").to_table()
    types = {f.name: str(f.type) for f in data.schema}
    assert types["price"] == "decimal128(10, 2)" and types["day"] == "date32[day]"
    assert types["at"].startswith("timestamp[") and types["shop"] == "struct<city: string>"
    assert types["score"] == "double"
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(40))
    for r in rows:
        i = r["id"]
        assert r["price"] == decimal.Decimal(i * 101) / 100
        assert r["day"] == datetime.date(1970, 1, 1) + datetime.timedelta(days=19_000 + i)
        assert r["at"] == datetime.datetime.fromtimestamp(
            (1_700_000_000_000 + i) / 1000, datetime.UTC
        )
        assert r["shop"] == {"city": f"c{i % 3}"}
        assert r["note"] == ("none" if i % 2 else f"n{i}")  # the default replaces a null
        assert r["score"] == (i / 2 if i >= 20 else None)
    [(_, headers)] = await dead_letters(kafka_bootstrap, dlq, 1)
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert (
        "Invalid null value for required BYTES field"
        in (headers["__connect.errors.exception.message"])
    )
