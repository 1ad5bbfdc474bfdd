"""Avro records through a real Schema Registry into DeltaSink and IcebergSink (issue 31): the
columns Avro's types become (decimal, date, timestamps, nested records, arrays, maps, enums, a
general union) are taken by each table format as Spark's types, and a second schema version
that adds a field with a default becomes a new column (``schema.evolution=true``). Delta tables
are read by delta-rs, Iceberg tables by Spark's Iceberg reader: never through the daemon."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pytest
from support import delta, iceberg
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory
from support.registry import Registry, produce_serialized, serialize
from support.spark import ThreadedPool

pytestmark = pytest.mark.integration

UTC = datetime.UTC
N = 40


def _schema(version: int) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "int"}},
        {
            "name": "address",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [{"name": "city", "type": "string"}],
            },
        },
        {"name": "either", "type": ["null", "long", "string"], "default": None},
    ]
    if version == 2:
        fields.append({"name": "score", "type": "double", "default": 0.0})
    return {"type": "record", "name": "Sale", "namespace": "shop", "fields": fields}


def _value(i: int) -> dict[str, Any]:
    value = {
        "id": i,
        "amount": (decimal.Decimal(i * 101) / 100).quantize(decimal.Decimal("0.01")),
        "day": datetime.date(2024, 3, 1) + datetime.timedelta(days=i),
        "at": datetime.datetime(2024, 3, 1, 12, 0, 0, i, tzinfo=UTC),
        "color": "BLUE" if i % 2 else "RED",
        "tags": ["a", f"t{i}"],
        "counts": {"n": i},
        "address": {"city": f"c{i % 3}"},
        "either": i if i % 2 else f"s{i}",
    }
    if i >= N // 2:
        value["score"] = i / 4
    return value


def _produce(bootstrap: str, registry: Registry, topic: str) -> None:
    first = serialize(registry, _schema(1), topic, [_value(i) for i in range(N // 2)])
    second = serialize(registry, _schema(2), topic, [_value(i) for i in range(N // 2, N)])
    produce_serialized(bootstrap, topic, first + second)


def _sink(registry: Registry, topic: str) -> dict[str, str]:
    return {
        "topics": topic,
        "flush.interval.ms": "500",
        "schema.evolution": "true",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
    }


async def test_avro_types_into_a_delta_table(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    _produce(kafka_bootstrap, schema_registry, topic)
    table = tmp_path / "delta"
    sink = {"name": "avro-delta", "connector.class": "DeltaSink", "path": str(table)}
    await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"),
        connectors=[sink | _sink(schema_registry, topic)],
        executors=delta_pool,
    )
    await wait_until(lambda: delta.committed(table) == N, 180, "every record in the table")
    columns = ["id", "amount", "day", "at", "color", "tags", "counts", "address", "either"]
    data = delta.rows_with_deltalake(table, [*columns, "score"])
    types = {f.name: str(f.type) for f in data.schema}
    assert types["amount"] == "decimal128(10, 2)" and types["day"] == "date32[day]"
    assert types["at"].startswith("timestamp[us, tz=")
    assert types["address"] == "struct<city: string>"
    assert types["either"] == "struct<long: int64, string: string>"
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert len(rows) == N
    for row in rows:
        want = _value(row["id"])
        assert row["amount"] == want["amount"] and row["day"] == want["day"]
        assert row["at"] == want["at"]
        assert (row["color"], row["tags"], row["address"]) == (
            want["color"],
            want["tags"],
            want["address"],
        )
        assert dict(row["counts"]) == want["counts"]
        either = want["either"]
        assert row["either"] == (
            {"long": either, "string": None}
            if isinstance(either, int)
            else {"long": None, "string": either}
        )
        assert row["score"] == want.get("score")


async def test_avro_types_into_an_iceberg_table(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    iceberg_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    _produce(kafka_bootstrap, schema_registry, topic)
    warehouse = tmp_path / "wh"
    sink = {
        "name": "avro-ice",
        "connector.class": "IcebergSink",
        "table": "db.sales",
        "catalog.warehouse": str(warehouse),
    }
    await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"),
        connectors=[sink | _sink(schema_registry, topic)],
        executors=iceberg_pool,
    )
    table_dir = warehouse / "db" / "sales"
    await wait_until(
        lambda: iceberg.committed(table_dir, "avro-ice") == N, 180, "every record in the table"
    )
    select = ["id", "amount", "day", "unix_micros(at)", "color", "address.city", "score"]
    got = await iceberg_pool.run(
        "ice-avro",
        "support.iceberg:spark_typed",
        timeout=180,
        kwargs={
            "catalog": {"catalog.type": "hadoop", "catalog.warehouse": str(warehouse)},
            "table": "db.sales",
            "select": select,
        },
        formats=("iceberg",),
    )
    schema = got["schema"]
    for part in (
        "amount:decimal(10,2)",
        "day:date",
        "at:timestamp",
        "tags:array<string>",
        "counts:map<string,int>",
        "address:struct<city:string>",
        "either:struct<long:bigint,string:string>",
        "score:double",
    ):
        assert part in schema, (part, schema)
    assert len(got["rows"]) == N
    epoch = datetime.datetime(1970, 1, 1, tzinfo=UTC)
    for row in got["rows"]:
        want = _value(int(row[0]))
        micros = (want["at"] - epoch) // datetime.timedelta(microseconds=1)
        score = want.get("score")
        assert row[1:] == [
            str(want["amount"]),
            want["day"].isoformat(),
            str(micros),
            want["color"],
            want["address"]["city"],
            None if score is None else str(score),
        ]
