"""Issue 31's proof matrix: Avro, Protobuf and JSON Schema records through a real Schema
Registry, each topic written by Confluent's own serializer in three schema versions (the
second adds a column and a field inside a nested record, the third drops an optional field),
20,000 records each, into a ParquetSink, a DeltaSink and an IcebergSink: nine connectors on
one daemon process, which is SIGKILLed and restarted once, and whose executor JVM is SIGKILLed
once. Then each table, read by pyarrow, delta-rs and pyiceberg (never through connectd), holds
rows == distinct (partition, offset) == produced, its columns have the types the docs' table
gives, and every value (the decimal, the timestamp, the date, the nested record) is the one
the producer sent."""

from __future__ import annotations

import datetime
import decimal
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from support import delta, iceberg
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.exactly_once import PARTITIONS, executors_gone, jvm_fault
from support.kafka_fixtures import TopicFactory
from support.registry import (
    Registry,
    produce_serialized,
    proto_classes,
    serialize,
    serialize_protobuf,
)
from support.tables import committed

pytestmark = pytest.mark.integration

UTC = datetime.UTC
RECORDS = 20_000
#: The first record of schema versions 2 and 3.
V2, V3 = 7_000, 14_000
FORMATS = ("avro", "protobuf", "json")
SINKS = ("parquet", "delta", "iceberg")
CONVERTERS = {
    "avro": "io.confluent.connect.avro.AvroConverter",
    "protobuf": "io.confluent.connect.protobuf.ProtobufConverter",
    "json": "io.confluent.connect.json.JsonSchemaConverter",
}
AT0 = datetime.datetime(2024, 3, 1, tzinfo=UTC)
DAY0 = datetime.date(2024, 1, 1)
EPOCH = datetime.date(1970, 1, 1)


def _version(i: int) -> int:
    return 1 if i < V2 else 2 if i < V3 else 3


def _expected(i: int) -> dict[str, Any]:
    """Record ``i`` as the table must hold it, whatever its format."""
    v = _version(i)
    return {
        "id": i,
        "amount": decimal.Decimal(i * 101).scaleb(-2),
        "at": AT0 + datetime.timedelta(seconds=i, milliseconds=i % 1000),
        "day": DAY0 + datetime.timedelta(days=i % 1000),
        "address": {"city": f"c{i % 5}", "zip": None if v == 1 else f"z{i}"},
        "note": f"note {i}" if v < 3 and i % 3 else None,
        "score": None if v == 1 else i / 4,
    }


def _avro_schema(v: int) -> dict[str, Any]:
    address = [{"name": "city", "type": "string"}]
    if v >= 2:
        address.append({"name": "zip", "type": ["null", "string"], "default": None})
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "address", "type": {"type": "record", "name": "Address", "fields": address}},
    ]
    if v <= 2:
        fields.append({"name": "note", "type": ["null", "string"], "default": None})
    if v >= 2:
        fields.append({"name": "score", "type": "double", "default": 0.0})
    return {"type": "record", "name": "Sale", "namespace": "matrix", "fields": fields}


def _avro(registry: Registry, topic: str, ids: range) -> list[bytes | None]:
    values = []
    for i in ids:
        value = {k: v for k, v in _expected(i).items() if v is not None}
        value["address"] = {k: v for k, v in value["address"].items() if v is not None}
        values.append(value)
    return serialize(registry, _avro_schema(_version(ids[0])), topic, values)


PROTO = """
syntax = "proto3";
package matrix;

import "google/protobuf/timestamp.proto";
import "google/type/date.proto";
import "confluent/meta.proto";
import "confluent/type/decimal.proto";

message Sale {
  int64 id = 1;
  confluent.type.Decimal amount = 2 [(confluent.field_meta) = {
    params: [{key: "precision", value: "10"}, {key: "scale", value: "2"}]
  }];
  google.protobuf.Timestamp at = 3;
  google.type.Date day = 4;
  Address address = 5;
  %s
  message Address {
    string city = 1;
    %s
  }
}
"""


def _proto(v: int) -> str:
    fields = ("optional string note = 6;" if v <= 2 else "") + (
        " double score = 7;" if v >= 2 else ""
    )
    return PROTO % (fields, "string zip = 2;" if v >= 2 else "")


def _protobuf(registry: Registry, topic: str, ids: range) -> list[bytes | None]:
    v = _version(ids[0])
    sale = proto_classes(_proto(v), name=f"matrix_v{v}.proto")["matrix.Sale"]
    messages = []
    for i in ids:
        want = _expected(i)
        m = sale(id=i)
        m.amount.value = (i * 101).to_bytes(4, "big", signed=True)
        m.amount.scale = 2
        at = want["at"] - datetime.datetime(1970, 1, 1, tzinfo=UTC)
        m.at.seconds, m.at.nanos = at.days * 86_400 + at.seconds, at.microseconds * 1000
        m.day.year, m.day.month, m.day.day = want["day"].year, want["day"].month, want["day"].day
        m.address.city = want["address"]["city"]
        if v >= 2:
            m.address.zip = want["address"]["zip"]
            m.score = want["score"]
        if want["note"] is not None:
            m.note = want["note"]
        messages.append(m)
    return serialize_protobuf(registry, sale, topic, messages)


D = "org.apache.kafka.connect.data."


def _json_schema(v: int) -> dict[str, Any]:
    address: dict[str, Any] = {"city": {"type": "string"}}
    if v >= 2:
        address["zip"] = {"type": "string"}
    props: dict[str, Any] = {
        "id": {"type": "integer"},
        "amount": {
            "type": "number",
            "title": D + "Decimal",
            "connect.type": "bytes",
            "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
        },
        "at": {"type": "integer", "title": D + "Timestamp"},
        "day": {"type": "integer", "title": D + "Date"},
        "address": {"type": "object", "properties": address},
    }
    if v <= 2:
        props["note"] = {"oneOf": [{"type": "null"}, {"type": "string"}]}
    if v >= 2:
        props["score"] = {"type": "number"}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Sale",
        "type": "object",
        "properties": props,
        "required": ["id"],
    }


def _json(registry: Registry, topic: str, ids: range) -> list[bytes | None]:
    values = []
    for i in ids:
        want = _expected(i)
        value = {
            "id": i,
            "amount": float(want["amount"]),
            "at": (want["at"] - AT0) // datetime.timedelta(milliseconds=1)
            + int(AT0.timestamp() * 1000),
            "day": (want["day"] - EPOCH).days,
            "address": {k: v for k, v in want["address"].items() if v is not None},
        }
        if _version(i) <= 2:
            value["note"] = want["note"]
        if _version(i) >= 2:
            value["score"] = want["score"]
        values.append(value)
    return serialize(registry, _json_schema(_version(ids[0])), topic, values, kind="json")


WRITERS: dict[str, Callable[[Registry, str, range], list[bytes | None]]] = {
    "avro": _avro,
    "protobuf": _protobuf,
    "json": _json,
}
COLUMNS = ["id", "amount", "at", "day", "address", "note", "score"]


def _check(fmt: str, sink: str, data: pa.Table) -> None:
    """Rows == distinct (partition, offset) == produced, the docs' column types, each value
    the producer's."""
    what = f"{fmt} into {sink}"
    assert data.num_rows == RECORDS, what
    pairs = data.group_by(["kafka_partition", "kafka_offset"]).aggregate([])
    assert pairs.num_rows == RECORDS, what
    assert pc.count_distinct(data.column("id")).as_py() == RECORDS, what
    types = {f.name: str(f.type) for f in data.schema}
    assert types["id"] == "int64" and types["score"] == "double", (what, types)
    assert types["amount"] == "decimal128(10, 2)" and types["day"] == "date32[day]", (what, types)
    assert types["at"].startswith("timestamp[") and "tz=" in types["at"], (what, types)
    assert types["address"] == "struct<city: string, zip: string>", (what, types)
    wrong = []
    for row in data.select(COLUMNS).to_pylist():
        want = _expected(row["id"])
        row["at"] = row["at"].astimezone(UTC)
        if row != want:
            wrong.append((row, want))
    assert not wrong, (what, len(wrong), wrong[:3])


def _parquet_rows(table: Path) -> pa.Table:
    files = ds.dataset(table, format="parquet").files
    # The files before the second version hold ``address`` without ``zip``: Spark's
    # mergeSchema, or pyarrow's unify_schemas, reads them together.
    schema = pa.unify_schemas([pq.read_schema(f) for f in files])
    return ds.dataset(files, schema=schema, format="parquet").to_table()


async def test_three_formats_into_three_table_formats_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("CONNECTD_TEST_SEED", time.time_ns() % 10_000))
    rng = random.Random(seed)
    print(f"\nfault seed {seed} (CONNECTD_TEST_SEED={seed} to replay)")
    topics = {fmt: await kafka_topic(partitions=PARTITIONS) for fmt in FORMATS}
    for fmt, topic in topics.items():
        values: list[bytes | None] = []
        for ids in (range(V2), range(V2, V3), range(V3, RECORDS)):
            values += WRITERS[fmt](schema_registry, topic, ids)
        produce_serialized(kafka_bootstrap, topic, values, partitions=PARTITIONS)

    warehouse = tmp_path / "wh"
    where: dict[tuple[str, str], dict[str, str]] = {}
    progress: dict[tuple[str, str], Callable[[], int]] = {}
    for fmt in FORMATS:
        path = tmp_path / f"{fmt}-parquet"
        where[fmt, "parquet"] = {"connector.class": "ParquetSink", "path": str(path)}
        progress[fmt, "parquet"] = lambda p=path: committed(p)
        path = tmp_path / f"{fmt}-delta"
        where[fmt, "delta"] = {"connector.class": "DeltaSink", "path": str(path)}
        progress[fmt, "delta"] = lambda p=path: delta.committed(p)
        where[fmt, "iceberg"] = {
            "connector.class": "IcebergSink",
            "table": f"db.{fmt}",
            "catalog.warehouse": str(warehouse),
        }
        progress[fmt, "iceberg"] = lambda f=fmt: iceberg.committed(
            warehouse / "db" / f, f"m-{f}-iceberg"
        )
    connectors = [
        {
            "name": f"m-{fmt}-{sink}",
            "topics": topics[fmt],
            **where[fmt, sink],
            "tasks.max": "1",
            # Small commits: each table takes many, so the faults land between them.
            "flush.max.records": "2000" if sink == "parquet" else "5000",
            "buffer.max.records": "2000" if sink == "parquet" else "5000",
            "flush.interval.ms": "1000",
            "schema.evolution": "true",
            "errors.restart.backoff.max.ms": "2000",
            "value.converter": CONVERTERS[fmt],
            "value.converter.schema.registry.url": schema_registry.url,
        }
        for fmt in FORMATS
        for sink in SINKS
    ]
    # One executor JVM for the nine: a second one's start (a write overdue steps aside) costs
    # more CPU on a small machine than the writes it would share.
    worker = worker_properties(
        kafka_bootstrap, tmp_path / "state", **{"executor.pool.max.size": "1"}
    )

    def done() -> int:
        return sum(read() for read in progress.values())

    total = len(connectors) * RECORDS
    began = time.monotonic()
    # Watched from the start, not from the REST API's (support/exactly_once.py: audit).
    p = daemon_process(worker, connectors, wait=False)
    # Every sink writes through the executors (ParquetSink in their Python process, the others
    # in their JVM): the JVM dies after the first commits, the daemon about half way.
    at = rng.randint(total // 10, total // 4)
    await wait_until(lambda: done() >= at, 300, f"{at} offsets committed", interval=0.1)
    faults = [f"{await jvm_fault(p)} at {done()}"]
    at = rng.randint(total * 2 // 5, total * 3 // 5)
    await wait_until(lambda: done() >= at, 300, f"{at} offsets committed", interval=0.1)
    below = p.descendants()
    p.signal(signal.SIGKILL)
    p.wait(10)
    faults.append(f"daemon SIGKILL at {done()}")
    await executors_gone(below)
    assert done() < total, f"the faults came too late: {faults}"
    p = daemon_process(worker, connectors)
    await wait_until(lambda: done() >= total, 400, "every table caught up")
    print(f"faults (of {total} offsets): {faults}; caught up in {time.monotonic() - began:.0f} s")
    p.signal(signal.SIGTERM)
    assert p.wait(60) == 0

    columns = ["kafka_partition", "kafka_offset", *COLUMNS]
    for fmt in FORMATS:
        _check(fmt, "parquet", _parquet_rows(tmp_path / f"{fmt}-parquet"))
        _check(fmt, "delta", delta.rows_with_deltalake(tmp_path / f"{fmt}-delta", columns))
        _check(fmt, "iceberg", iceberg.rows_with_pyiceberg(warehouse / "db" / fmt, columns))
    for key, read in progress.items():
        assert read() == RECORDS, key
