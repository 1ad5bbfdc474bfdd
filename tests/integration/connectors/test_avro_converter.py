"""Confluent's AvroConverter on real parts (issue 31): records written by Confluent's own
``AvroSerializer`` through a real Schema Registry (Apicurio, Confluent's API) into a ParquetSink
table, with the connector keys a Connect pipeline has.

- Three schema versions on one topic (the second adds a field with a default and one inside a
  nested record, the third drops an optional one): every field is a typed column, the nested
  record's struct gains the field (files written before hold it without), the logical types
  come back as the values the producer sent, a dropped field is null in the records without it.
- Bad input (no magic byte, an unknown schema id, a truncated payload) is errant: dead-lettered
  with Connect's headers under ``errors.tolerance=all``, every offset committed past.
- A registry that does not answer: the task stays RUNNING with the reason in its status, nothing
  is skipped, and it catches up by itself once the registry answers.
- The exactly-once audit on Avro records, through a daemon SIGKILL and an executor JVM SIGKILL,
  is ``test_registry_matrix.py``'s.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import dead_letter_settings, dead_letters
from support.kafka_fixtures import TopicFactory
from support.registry import Registry, produce_serialized, serialize
from support.tables import committed

pytestmark = pytest.mark.integration

UTC = datetime.UTC
_ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
_ZIP = {"name": "zip", "type": ["null", "string"], "default": None}
_V1_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long"},
    {"name": "user", "type": "string"},
    {
        "name": "amount",
        "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
    },
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "address", "type": _ADDRESS},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "either", "type": ["null", "int", "string"], "default": None},
]


def _schema(version: int) -> dict[str, Any]:
    fields = list(_V1_FIELDS)
    if version >= 2:
        fields.append({"name": "score", "type": "double", "default": 0.0})
        address = {**_ADDRESS, "fields": [*_ADDRESS["fields"], _ZIP]}  # a nested field
        fields = [{**f, "type": address} if f["name"] == "address" else f for f in fields]
    if version >= 3:
        fields = [f for f in fields if f["name"] != "note"]
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": fields}


def _value(i: int, version: int) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": i,
        "user": f"user-{i % 7}",
        "amount": decimal.Decimal(i * 1001) / 1000,
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
        "at": datetime.datetime(2024, 5, 6, 7, 8, 9, (i % 1000) * 1000, tzinfo=UTC),
        "at_us": datetime.datetime(2024, 5, 6, 7, 8, 9, i % 1_000_000, tzinfo=UTC),
        "local": datetime.datetime(2024, 5, 6, 7, 8, 9, (i % 1000) * 1000),
        "clock": datetime.time(12, 34, 56, (i % 1000) * 1000),
        "uid": str(uuid.UUID(int=i)),
        "color": "GREEN" if i % 2 else "RED",
        "tags": [f"t{j}" for j in range(i % 3)],
        "counts": {"a": i, "b": -i},
        "address": {"city": f"city-{i % 5}"},
        "note": f"note {i}" if i % 3 else None,
        "either": [None, i, f"s{i}"][i % 3],
    }
    if version >= 2:
        value["score"] = i / 8
        value["address"]["zip"] = None if i % 4 else f"{10000 + i}"
    if version >= 3:
        del value["note"]
    return value


PER_VERSION = 120


def _sink(name: str, topic: str, table: Path, registry: Registry, **extra: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "schema.evolution": "true",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
        **extra,
    }


async def test_three_schema_versions_land_as_typed_columns_and_bad_records_are_dead_lettered(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = await kafka_topic(partitions=2)
    dlq = await kafka_topic(partitions=1)
    values: list[bytes | None] = []
    sent: dict[int, dict[str, Any]] = {}
    for version in (1, 2, 3):
        batch = [_value(i, version) for i in range(len(sent), len(sent) + PER_VERSION)]
        values += serialize(schema_registry, _schema(version), topic, batch)
        sent.update((v["id"], v) for v in batch)
    good = len(values)
    bad = [
        b'{"id": 1}',  # no magic byte
        b"\x00\x00\x0f\x42\x40" + values[0][5:],  # type: ignore[index]  # id 1000000: unknown
        values[1][:12],  # type: ignore[index]  # truncated
    ]
    # The first version (and the bad records) is committed before the others are sent: the
    # table's first files hold ``address`` without ``zip``, later ones with it.
    produce_serialized(kafka_bootstrap, topic, values[:PER_VERSION] + bad, partitions=2)
    values = values[:PER_VERSION] + bad + values[PER_VERSION:]
    table = tmp_path / "table"
    sink = _sink(
        "avro",
        topic,
        table,
        schema_registry,
        **dead_letter_settings(dlq),
        # Confluent's serializer-side setting: taken, nothing to do for a reader. A mistyped
        # key: said in the log with the setting it may mean, never silently dropped.
        **{
            "value.converter.auto.register.schemas": "false",
            "value.converter.schemas.cache.confg": "10",
        },
    )
    await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    warned = [r.getMessage() for r in caplog.records if "configuration warning" in r.getMessage()]
    assert any(
        "value.converter.schemas.cache.confg" in w
        and "is not a setting of io.confluent.connect.avro.AvroConverter" in w
        and "value.converter.schemas.cache.config" in w
        for w in warned
    ), warned
    assert not any("auto.register.schemas" in w for w in warned), warned
    await wait_until(lambda: committed(table) == PER_VERSION + 3, 120, "the first version")
    produce_serialized(kafka_bootstrap, topic, values[PER_VERSION + 3 :], partitions=2)
    await wait_until(lambda: committed(table) == len(values), 120, "every offset committed past")

    files = ds.dataset(table, format="parquet").files
    structs = {str(pq.read_schema(f).field("address").type) for f in files}
    assert structs == {"struct<city: string>", "struct<city: string, zip: string>"}, structs
    schema = pa.unify_schemas([pq.read_schema(f) for f in files])  # as Spark's mergeSchema
    data = ds.dataset(files, schema=schema, format="parquet").to_table()
    types = {f.name: str(f.type) for f in data.schema}
    assert {k: types[k] for k in _V1_FIELDS_TYPES} == _V1_FIELDS_TYPES
    assert types["score"] == "double"
    rows = {r["id"]: r for r in data.to_pylist()}
    assert sorted(rows) == sorted(sent) and data.num_rows == good  # each record once
    for i, want in sent.items():
        got = rows[i]
        expected = dict(want)
        expected["clock"] = (
            (want["clock"].hour * 60 + want["clock"].minute) * 60 + want["clock"].second
        ) * 1000 + want["clock"].microsecond // 1000
        expected["either"] = _either(want["either"])
        expected["counts"] = sorted(want["counts"].items())
        expected.setdefault("note", None)  # version 3 dropped it
        expected.setdefault("score", None)  # version 1 did not have it
        expected["address"] = {"zip": None} | want["address"]
        got = {**got, "counts": sorted(got["counts"])}
        assert {k: got[k] for k in expected} == expected, i

    letters = await dead_letters(kafka_bootstrap, dlq, 3)
    headers = [h for _, h in letters]
    assert [h["__connect.errors.stage"] for h in headers] == ["VALUE_CONVERTER"] * 3
    messages = sorted(h["__connect.errors.exception.message"] for h in headers)
    assert any("Unknown magic byte!" in m for m in messages)
    assert any("schema id 1000000 is not in the Schema Registry" in m for m in messages)
    assert any("the Avro payload cannot be read" in m for m in messages)
    assert sorted(v for v, _ in letters if v is not None) == sorted(bad)


_V1_FIELDS_TYPES = {
    "id": "int64",
    "user": "string",
    "amount": "decimal128(12, 3)",
    "day": "date32[day]",
    "at": "timestamp[us, tz=UTC]",  # Spark's timestamps are in microseconds
    "at_us": "timestamp[us, tz=UTC]",
    "local": "timestamp[us]",
    "clock": "int32",
    "uid": "string",
    "color": "string",
    "tags": "list<element: string>",
    "counts": "map<string, int64 ('counts')>",
    "address": "struct<city: string, zip: string>",
    "note": "string",
    "either": "struct<int: int32, string: string>",
}


def _either(v: Any) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"int": v, "string": None} if isinstance(v, int) else {"int": None, "string": v}


async def test_a_registry_that_does_not_answer_holds_the_task_running_until_it_does(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    schema_registry: Registry,
    tmp_path: Path,
) -> None:
    """Mid-stream: records of a cached schema are committed, then the registry stops for 30 s
    while records of a schema version the daemon has not fetched arrive. The task stays
    RUNNING the whole time, its status saying why; nothing of the new version is skipped or
    written around; once the registry answers, it catches up, each record once."""
    topic = await kafka_topic(partitions=1)
    # Schemas of this test's own: the daemon below has never cached their ids.
    name = f"Outage{uuid.uuid4().hex[:8]}"
    first = serialize(
        schema_registry, _schema(1) | {"name": name}, topic, [_value(i, 1) for i in range(50)]
    )
    second = serialize(
        schema_registry, _schema(2) | {"name": name}, topic, [_value(i, 2) for i in range(50, 100)]
    )
    produce_serialized(kafka_bootstrap, topic, first)
    table = tmp_path / "table"
    sink = _sink(
        "outage",
        topic,
        table,
        schema_registry,
        **{
            "value.converter.http.read.timeout.ms": "1500",
            "errors.retry.delay.max.ms": "1000",
        },
    )
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == 50, 60, "the first version's records")
    assert d.rest_url is not None
    async with aiohttp.ClientSession(d.rest_url) as http:

        async def task() -> dict[str, Any]:
            async with http.get("/connectors/outage/status") as r:
                return (await r.json())["tasks"][0]  # type: ignore[no-any-return]

        with schema_registry.paused():
            produce_serialized(kafka_bootstrap, topic, second)
            stopped = time.monotonic()
            status = await wait_until(
                lambda: _retrying(task), 60, "the status to show the registry outage"
            )
            seen = 0
            while time.monotonic() - stopped < 30:  # the outage lasts 30 s
                status = await task()
                assert status["state"] == "RUNNING", status
                if "retrying" in status:
                    seen += 1
                    assert status["retrying"]["reason"].startswith("RegistryUnavailable: ")
                    assert "Schema Registry did not answer" in status["retrying"]["reason"]
                assert committed(table) == 50
                await asyncio.sleep(1)  # the outage's pace, not a synchronisation
            assert seen >= 20, seen  # said through the outage, between retries too
    await wait_until(lambda: committed(table) == 100, 90, "caught up after the outage")
    data = ds.dataset(table, format="parquet").to_table()
    assert sorted(data.column("id").to_pylist()) == list(range(100))  # each record once


async def _retrying(task: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any] | None:
    status = await task()
    return status if "retrying" in status else None
