"""Connect's number converters on real parts (issue 31): a ParquetSink connector reads keys
written by Kafka's LongSerializer and values by its DoubleSerializer, through
``org.apache.kafka.connect.converters.LongConverter`` / ``DoubleConverter``; the table's ``key``
and ``value`` columns hold the numbers, typed; a value of the wrong width is a bad record that
``errors.tolerance=all`` skips, its offset committed past."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

pytestmark = pytest.mark.integration


async def test_long_keys_and_double_values_land_as_numbers(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = await kafka_topic(partitions=1)
    records = [(struct.pack(">q", 10**12 + i), struct.pack(">d", i / 4)) for i in range(20)]
    records[7] = (struct.pack(">q", 7), b"\x01\x02")  # not a double: 2 bytes
    await produce(kafka_bootstrap, topic, records)
    table = tmp_path / "table"
    sink = {
        "name": "numbers",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "key.converter": "org.apache.kafka.connect.converters.LongConverter",
        "value.converter": "org.apache.kafka.connect.converters.DoubleConverter",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
    }
    await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == 20, 120, "every offset committed past")
    data = ds.dataset(table, format="parquet").to_table()
    assert (str(data.schema.field("key").type), str(data.schema.field("value").type)) == (
        "int64",
        "double",
    )
    rows = sorted(
        zip(
            data.column("kafka_offset").to_pylist(),
            data.column("key").to_pylist(),
            data.column("value").to_pylist(),
            strict=True,
        )
    )
    assert rows == [(i, 10**12 + i, i / 4) for i in range(20) if i != 7]
    assert "Size of data received by Deserializer is not 8" in caplog.text  # errors.log.enable
