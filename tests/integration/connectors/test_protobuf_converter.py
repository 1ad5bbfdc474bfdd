"""Confluent's ProtobufConverter on real parts (issue 31): records written by Confluent's own
``ProtobufSerializer`` through a real Schema Registry (the schema registered as a base64
descriptor) and a second version registered as ``.proto`` text, into a ParquetSink table: the
message types the columns (scalars of every width, a Timestamp, a Date, a Decimal with its
scale, repeated fields, a map, a oneof, an optional field, an enum, nested messages, a wrapper),
the second version adds a column, and records the converter cannot read are dead-lettered.
The same messages into a Delta table (read by delta-rs). The exactly-once audit on Protobuf
records through a daemon SIGKILL and an executor JVM SIGKILL is ``test_registry_matrix.py``'s."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka.schema_registry import Schema
from support import delta
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import dead_letter_settings, dead_letters
from support.kafka_fixtures import TopicFactory
from support.registry import Registry, produce_serialized, proto_classes, serialize_protobuf
from support.spark import ThreadedPool
from support.tables import committed

pytestmark = pytest.mark.integration

SALE = """
syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/type/date.proto";
import "confluent/meta.proto";
import "confluent/type/decimal.proto";

message Sale {
  int64 id = 1;
  string name = 2;
  sint32 qty = 3 [(confluent.field_meta) = {params: [{key: "connect.type", value: "int16"}]}];
  uint64 big = 4;
  float ratio = 5;
  bytes blob = 6;
  google.protobuf.Timestamp at = 7;
  google.type.Date day = 8;
  confluent.type.Decimal price = 9 [(confluent.field_meta) = {
    params: [{key: "precision", value: "10"}, {key: "scale", value: "2"}]
  }];
  repeated string tags = 10;
  map<string, int32> counts = 11;
  oneof pay {
    string card = 12;
    int32 cash = 13;
  }
  optional string note = 14;
  Kind kind = 15;
  Shop shop = 16;
  google.protobuf.StringValue coupon = 17;
  %s
  enum Kind {
    KIND_UNSPECIFIED = 0;
    ONLINE = 1;
    STORE = 2;
  }
  message Shop {
    string city = 1;
    repeated Item items = 2;
  }
  message Item {
    string sku = 1;
    int32 n = 2;
  }
}

message Refund {
  int64 id = 1;
}
"""
V1 = SALE % ""
V2 = SALE % "double score = 18;"
DAY0 = datetime.date(2026, 1, 1)


def _sale(classes: dict[str, Any], i: int, version: int) -> Any:
    m = classes["shop.Sale"](
        id=i, name=f"n{i}", qty=-i, big=2**63 + i, ratio=i / 2, blob=bytes([i % 256])
    )
    m.at.seconds, m.at.nanos = 1_700_000_000 + i, 7_000_000
    day = DAY0 + datetime.timedelta(days=i)
    m.day.year, m.day.month, m.day.day = day.year, day.month, day.day
    m.price.value = (i * 100 + 25).to_bytes(4, "big", signed=True)
    m.price.scale = 2
    m.tags.extend([f"t{i}", "x"])
    m.counts["a"] = i
    if i % 2:
        m.cash = i
    else:
        m.card = f"c{i}"
    if i % 3 == 0:
        m.note = f"note {i}"
    m.kind = 1 + i % 2
    if i % 4:
        m.shop.city = f"city{i % 3}"
        m.shop.items.add(sku=f"s{i}", n=i)
    if i % 5 == 0:
        m.coupon.value = f"cp{i}"
    if version == 2:
        m.score = i / 4
    return m


async def test_protobuf_records_land_as_typed_columns(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    dlq = await kafka_topic(partitions=1)
    v1 = proto_classes(V1)
    values = serialize_protobuf(
        schema_registry, v1["shop.Sale"], topic, [_sale(v1, i, 1) for i in range(30)]
    )
    # The second version registered as .proto text (as Confluent's registry answers every
    # Protobuf schema), its records framed by hand: magic byte, id, message index [0].
    v2 = proto_classes(V2)
    with schema_registry.client() as client:
        v2_id = client.register_schema(f"{topic}-value", Schema(V2, "PROTOBUF"))
    head = b"\x00" + v2_id.to_bytes(4, "big")
    values += [head + b"\x00" + _sale(v2, i, 2).SerializeToString() for i in range(30, 60)]
    v1_id = int.from_bytes(values[0][1:5], "big")  # type: ignore[index]
    refund = (
        b"\x00"
        + v1_id.to_bytes(4, "big")
        + b"\x02\x02"
        + v1["shop.Refund"](id=1).SerializeToString()
    )
    unknown = b"\x00\x00\x0f\x42\x40\x00" + v1["shop.Refund"](id=2).SerializeToString()
    truncated = values[1][:-3]  # type: ignore[index]
    produce_serialized(kafka_bootstrap, topic, [*values, refund, unknown, truncated], partitions=2)
    table = tmp_path / "table"
    sink = {
        "name": "protobuf",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "schema.evolution": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
        "value.converter.schema.registry.url": schema_registry.url,
        **dead_letter_settings(dlq),
    }
    await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == 63, 120, "every offset committed past")
    data = ds.dataset(table, format="parquet").to_table()
    types = {f.name: str(f.type) for f in data.schema}
    assert types["pay_0"] == "struct<card: string, cash: int32>"
    assert [types[k] for k in ("id", "name", "qty", "big", "ratio", "blob")] == [
        "int64",
        "string",
        "int16",
        "int64",
        "float",
        "binary",
    ]
    assert types["at"] in ("timestamp[ms, tz=UTC]", "timestamp[us, tz=UTC]")
    assert types["day"] == "date32[day]"
    assert types["price"] == "decimal128(10, 2)" and types["tags"] == "list<element: string>"
    assert types["counts"] == "map<string, int32 ('counts')>"
    assert types["note"] == "string" and types["kind"] == "string"
    assert types["shop"] == (
        "struct<city: string, items: list<element: struct<sku: string, n: int32>>>"
    )
    assert types["coupon"] == "struct<value: string>" and types["score"] == "double"
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(60))
    for r in rows:
        i = r["id"]
        assert (r["name"], r["qty"], r["ratio"], r["blob"]) == (
            f"n{i}",
            -i,
            i / 2,
            bytes([i % 256]),
        )
        assert r["big"] == 2**63 + i - 2**64  # uint64 past 2^63 wraps, as Java's long does
        assert r["at"] == datetime.datetime.fromtimestamp(1_700_000_000.007 + i, datetime.UTC)
        assert r["day"] == DAY0 + datetime.timedelta(days=i)
        assert r["price"] == decimal.Decimal(i) + decimal.Decimal("0.25")
        assert r["tags"] == [f"t{i}", "x"] and r["counts"] == [("a", i)]
        assert r["pay_0"] == (
            {"card": None, "cash": i} if i % 2 else {"card": f"c{i}", "cash": None}
        )
        assert r["note"] == (f"note {i}" if i % 3 == 0 else None)
        assert r["kind"] == ("STORE" if i % 2 else "ONLINE")
        shop = {"city": f"city{i % 3}", "items": [{"sku": f"s{i}", "n": i}]}
        assert r["shop"] == (shop if i % 4 else None)
        assert r["coupon"] == ({"value": f"cp{i}"} if i % 5 == 0 else None)
        assert r["score"] == (i / 4 if i >= 30 else None)
    dead = await dead_letters(kafka_bootstrap, dlq, 3)
    messages = [h["__connect.errors.exception.message"] for _, h in dead]
    assert {h["__connect.errors.stage"] for _, h in dead} == {"VALUE_CONVERTER"}
    for expected in (
        "schema id 1000000 is not in the Schema Registry",
        "message shop.Refund but this connector reads message shop.Sale",
        "the Protobuf payload cannot be read",
    ):
        assert sum(expected in m for m in messages) == 1, (expected, messages)


def _registry_sink(registry: Registry) -> dict[str, str]:
    return {
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
        "value.converter.schema.registry.url": registry.url,
    }


async def test_protobuf_types_into_a_delta_table(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    classes = proto_classes(V2, "sale_v2.proto")
    values = serialize_protobuf(
        schema_registry, classes["shop.Sale"], topic, [_sale(classes, i, 2) for i in range(20)]
    )
    produce_serialized(kafka_bootstrap, topic, values)
    table = tmp_path / "delta"
    sink = {
        "name": "proto-delta",
        "connector.class": "DeltaSink",
        "path": str(table),
        "topics": topic,
        "flush.interval.ms": "500",
        **_registry_sink(schema_registry),
    }
    await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"),
        connectors=[sink],
        executors=delta_pool,
    )
    await wait_until(lambda: delta.committed(table) == 20, 180, "every record in the table")
    columns = ["id", "qty", "at", "day", "price", "tags", "counts", "pay_0", "kind", "shop"]
    data = delta.rows_with_deltalake(table, columns)
    types = {f.name: str(f.type) for f in data.schema}
    assert types["price"] == "decimal128(10, 2)" and types["day"] == "date32[day]"
    assert types["at"].startswith("timestamp[us, tz=") and types["qty"] == "int16"
    assert types["pay_0"] == "struct<card: string, cash: int32>"
    rows = sorted(data.to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(20))
    for r in rows:
        i = r["id"]
        assert r["at"] == datetime.datetime.fromtimestamp(1_700_000_000.007 + i, datetime.UTC)
        assert (r["day"], r["price"]) == (
            DAY0 + datetime.timedelta(days=i),
            decimal.Decimal(i) + decimal.Decimal("0.25"),
        )
        assert r["tags"] == [f"t{i}", "x"] and dict(r["counts"]) == {"a": i}
        assert r["pay_0"] == (
            {"card": None, "cash": i} if i % 2 else {"card": f"c{i}", "cash": None}
        )
        assert r["shop"] == (
            {"city": f"city{i % 3}", "items": [{"sku": f"s{i}", "n": i}]} if i % 4 else None
        )
