"""Time-partitioned tables (issue 35 item 5) in the daemon, on a real broker and real Spark:
``partition.by=day(kafka_timestamp)`` for ParquetSink, DeltaSink and IcebergSink (each table
read by a reader that is not Spark: pyarrow, delta-rs, pyiceberg), and Confluent's
``HourlyPartitioner`` layout for ParquetSink in a time zone with an offset.

Records carry chosen Kafka timestamps across a day boundary, so every expected partition is
known in advance.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from aiokafka import AIOKafkaProducer
from support import delta, iceberg, tables
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

#: 2026-11-29 22:30 UTC, then every 45 minutes: two UTC days, several hours.
START_MS = int(dt.datetime(2026, 11, 29, 22, 30, tzinfo=dt.UTC).timestamp() * 1000)
STAMPS = [START_MS + i * 45 * 60_000 for i in range(8)]


async def _produce_at(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i, stamp in enumerate(STAMPS):
            await producer.send_and_wait(topic, b"v%d" % i, partition=0, timestamp_ms=stamp)
    finally:
        await producer.stop()


def _utc_day(stamp_ms: int) -> dt.date:
    return dt.datetime.fromtimestamp(stamp_ms / 1000, dt.UTC).date()


@dataclass(frozen=True)
class Format:
    name: str
    pool: str
    config: Callable[[Path], dict[str, str]]
    table: Callable[[Path], Path]
    committed: Callable[[Path, str], int]  # (table, connector)
    rows: Callable[[Path, list[str]], Any]
    partition_columns: Callable[[Path], list[str]]


def _parquet_partitions(table: Path) -> list[str]:
    return sorted({p.name.split("=")[0] for p in table.iterdir() if "=" in p.name})


def _delta_partitions(table: Path) -> list[str]:
    """The Delta table's partition columns; a time transform's is a generated column."""
    for line in (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            fields = json.loads(action["metaData"]["schemaString"])["fields"]
            generated = {f["name"] for f in fields if "delta.generationExpression" in f["metadata"]}
            columns = list(action["metaData"]["partitionColumns"])
            assert generated == {c for c in columns if c.startswith("kafka_timestamp_")}
            return columns
    raise AssertionError("no metaData in the first commit")


def _iceberg_partitions(table: Path) -> list[str]:
    meta = iceberg.metadata(table)
    assert meta is not None
    spec = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
    return [f["name"] for f in spec["fields"]]


FORMATS = [
    Format(
        "ParquetSink",
        "sink_pool",
        lambda where: {"path": str(where / "t")},
        lambda where: where / "t",
        lambda t, _: tables.committed(t),
        lambda t, cols: ds.dataset(t, format="parquet", partitioning="hive").to_table(columns=cols),
        _parquet_partitions,
    ),
    Format(
        "DeltaSink",
        "delta_pool",
        lambda where: {"path": str(where / "t")},
        lambda where: where / "t",
        lambda t, _: delta.committed(t),
        delta.rows_with_deltalake,
        _delta_partitions,
    ),
    Format(
        "IcebergSink",
        "iceberg_pool",
        lambda where: {"table": "db.timed", "catalog.warehouse": str(where / "wh")},
        lambda where: where / "wh" / "db" / "timed",
        iceberg.committed,
        iceberg.rows_with_pyiceberg,
        _iceberg_partitions,
    ),
]


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
async def test_day_of_the_record_time_partitions_every_format(
    fmt: Format,
    request: pytest.FixtureRequest,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    await _produce_at(kafka_bootstrap, topic)
    daemon = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"),
        executors=request.getfixturevalue(fmt.pool),
    )
    config = {
        "connector.class": fmt.name,
        "topics": topic,
        "partition.by": "day(kafka_timestamp)",
        "flush.max.records": "3",
        **fmt.config(tmp_path),
    }
    assert daemon.herder is not None
    name = f"timed-{uuid.uuid4().hex[:8]}"
    await daemon.herder.create_connector(name, config)
    table = fmt.table(tmp_path)
    await wait_until(lambda: fmt.committed(table, name) == len(STAMPS), 180, "every record in")
    assert fmt.partition_columns(table) == ["kafka_timestamp_day"]
    if fmt.name == "IcebergSink":  # hidden: no such column, Iceberg's days() places the files
        rows = fmt.rows(table, ["kafka_offset", "kafka_timestamp"]).to_pylist()
        assert sorted(r["kafka_offset"] for r in rows) == list(range(len(STAMPS)))
        spec = iceberg.metadata(table)["partition-specs"][-1]["fields"]  # type: ignore[index]
        assert [f["transform"] for f in spec] == ["day"]
        days = {p.name for p in (table / "data").iterdir() if p.name.startswith("kafka_")}
        assert days == {f"kafka_timestamp_day={_utc_day(s)}" for s in STAMPS}
        return
    rows = fmt.rows(table, ["kafka_offset", "kafka_timestamp_day"]).to_pylist()
    assert sorted(r["kafka_offset"] for r in rows) == list(range(len(STAMPS)))  # once each
    for row in rows:
        day = row["kafka_timestamp_day"]
        day = day if isinstance(day, dt.date) else dt.date.fromisoformat(str(day))
        assert day == _utc_day(STAMPS[row["kafka_offset"]]), row


async def test_confluents_hourly_layout_in_a_time_zone(
    sink_pool: Any,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    """An S3 sink's partitioner keys, unchanged: year=/month=/day=/hour= directories in
    America/New_York, from each record's Kafka timestamp."""
    topic = await kafka_topic(partitions=1)
    await _produce_at(kafka_bootstrap, topic)
    daemon = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"), executors=sink_pool
    )
    table = tmp_path / "t"
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.max.records": "4",
        "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
        "timezone": "America/New_York",
        "locale": "en-US",
        "timestamp.extractor": "Record",
    }
    assert daemon.herder is not None
    await daemon.herder.create_connector(f"hourly-{uuid.uuid4().hex[:8]}", config)
    await wait_until(lambda: tables.committed(table) == len(STAMPS), 180, "every record in")
    zone = zoneinfo.ZoneInfo("America/New_York")
    expected = {
        dt.datetime.fromtimestamp(s / 1000, zone).strftime("year=%Y/month=%m/day=%d/hour=%H")
        for s in STAMPS
    }
    files = [
        f
        for f in table.rglob("*.parquet")
        if not any(part.startswith((".", "_")) for part in f.relative_to(table).parts)
    ]
    assert {str(f.parent.relative_to(table)) for f in files} == expected
    # The files found, not a walk of the directory: the running daemon removes a commit's
    # staging directory under _connectd/ while a walk may be listing it.
    read = ds.dataset(
        [str(f) for f in files],
        format="parquet",
        partition_base_dir=str(table),
        partitioning=ds.partitioning(
            pa.schema([(n, pa.string()) for n in ("year", "month", "day", "hour")]),
            flavor="hive",
        ),
    ).to_table(columns=["kafka_offset", "hour"])
    by_offset = dict(zip(*(read.column(c).to_pylist() for c in read.column_names), strict=True))
    for offset, stamp in enumerate(STAMPS):
        assert by_offset[offset] == dt.datetime.fromtimestamp(stamp / 1000, zone).strftime("%H")
