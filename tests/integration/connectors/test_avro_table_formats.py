"""Avro records through a real Schema Registry into DeltaSink and IcebergSink (issue 31): the
columns Avro's types become (decimal, date, timestamps, nested records, arrays, maps, enums, a
general union) are taken by each table format as Spark's types, and a second schema version
that adds a field with a default becomes a new column (``schema.evolution=true``), and one that
adds a field to a nested record widens its struct column; records of the first version after
that (and after a restart, so their batch's struct lacks the field) hold null there. Delta tables
are read by delta-rs, Iceberg tables by Spark's Iceberg reader: never through the daemon."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
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
                "fields": [
                    {"name": "city", "type": "string"},
                    *(
                        [{"name": "zip", "type": ["null", "string"], "default": None}]
                        * (version - 1)
                    ),
                ],
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
    if _version(i) == 2:
        value["score"] = i / 4
        value["address"]["zip"] = f"z{i}"
    return value


def _version(i: int) -> int:
    """Records 0..N/2 are written with the first schema, N/2..N with the second (which adds a
    column and a field inside ``address``), and N..3N/2 with the first again."""
    return 2 if N // 2 <= i < N else 1


def _produce(bootstrap: str, registry: Registry, topic: str, ids: range) -> None:
    values = [_value(i) for i in ids]
    produce_serialized(
        bootstrap, topic, serialize(registry, _schema(_version(ids[0])), topic, values)
    )


async def _evolving(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    registry: Registry,
    topic: str,
    tmp_path: Path,
    sink: dict[str, str],
    executors: ThreadedPool,
    committed: Callable[[], int],
) -> None:
    """The three phases, each committed before the next: the first schema; the second, so
    that the table's ``address`` struct gains ``zip`` in a commit of its own; the first again
    after a restart, so the batch's struct lacks the table's ``zip``."""
    properties = worker_properties(kafka_bootstrap, tmp_path / "state")
    connectors = [sink | _sink(registry, topic)]
    daemon = await run_daemon(properties, connectors=connectors, executors=executors)
    for ids in (range(N // 2), range(N // 2, N)):
        _produce(kafka_bootstrap, registry, topic, ids)
        end = ids.stop
        await wait_until(lambda e=end: committed() == e, 180, f"records up to {end}")
    await daemon.shutdown()
    _produce(kafka_bootstrap, registry, topic, range(N, N + N // 2))
    await run_daemon(properties, connectors=connectors, executors=executors)
    await wait_until(lambda: committed() == N + N // 2, 180, "every record in the table")


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
    table = tmp_path / "delta"
    sink = {"name": "avro-delta", "connector.class": "DeltaSink", "path": str(table)}
    await _evolving(
        run_daemon,
        kafka_bootstrap,
        schema_registry,
        topic,
        tmp_path,
        sink,
        delta_pool,
        lambda: delta.committed(table),
    )
    columns = ["id", "amount", "day", "at", "color", "tags", "counts", "address", "either"]
    data = delta.rows_with_deltalake(table, [*columns, "score"])
    types = {f.name: str(f.type) for f in data.schema}
    assert types["amount"] == "decimal128(10, 2)" and types["day"] == "date32[day]"
    assert types["at"].startswith("timestamp[us, tz=")
    assert types["address"] == "struct<city: string, zip: string>"
    assert types["either"] == "struct<long: int64, string: string>"
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(N + N // 2))
    for row in rows:
        want = _value(row["id"])
        assert row["amount"] == want["amount"] and row["day"] == want["day"]
        assert row["at"] == want["at"]
        assert (row["color"], row["tags"], row["address"]) == (
            want["color"],
            want["tags"],
            {"zip": None} | want["address"],
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
    warehouse = tmp_path / "wh"
    sink = {
        "name": "avro-ice",
        "connector.class": "IcebergSink",
        "table": "db.sales",
        "catalog.warehouse": str(warehouse),
    }
    table_dir = warehouse / "db" / "sales"
    await _evolving(
        run_daemon,
        kafka_bootstrap,
        schema_registry,
        topic,
        tmp_path,
        sink,
        iceberg_pool,
        lambda: iceberg.committed(table_dir, "avro-ice"),
    )
    select = [
        "id",
        "amount",
        "day",
        "unix_micros(at)",
        "color",
        "address.city",
        "address.zip",
        "score",
    ]
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
        "address:struct<city:string,zip:string>",
        "either:struct<long:bigint,string:string>",
        "score:double",
    ):
        assert part in schema, (part, schema)
    assert sorted(int(row[0]) for row in got["rows"]) == list(range(N + N // 2))
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
            want["address"].get("zip"),
            None if score is None else str(score),
        ]
