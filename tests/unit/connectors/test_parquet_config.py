"""ParquetSink's settings: paths, formats, codecs, partition columns, value.fields, aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.connectors import default_registry
from daemon.connectors.parquet.settings import ParquetSettings
from daemon.connectors.parquet.sink import ParquetSinkConnector, ParquetSinkTask
from daemon.connectors.tables.location import table_location, table_path
from daemon.connectors.tables.settings import write_timeout
from daemon.connectors.testing import EchoSinkConnector, HangSinkConnector
from daemon.errors import ConfigError, InvalidConfig


def problems(config: dict[str, str]) -> dict[str | None, str]:
    return {p.key: str(p) for p in ParquetSinkConnector().validate(config) if p.is_error}


def test_plain_paths_and_file_uris_name_local_directories() -> None:
    assert table_path("/data/orders") == Path("/data/orders")
    assert table_path("file:///data/orders") == Path("/data/orders")
    assert table_path("file://localhost/data/my%20orders") == Path("/data/my orders")


@pytest.mark.parametrize(
    "uri", ["hdfs://nn:8020/t", "viewfs://cluster/t/", "s3a://bucket/t", "abfs://c@a.host/t"]
)
def test_hadoop_uris_are_taken_as_given(uri: str) -> None:
    """Their commit log runs in the executors' JVMs; which filesystems give the exclusive
    create is decided there (daemon.storage.hadoopfs), not by the daemon's config check."""
    assert table_location(uri) == uri.rstrip("/")
    assert "path" not in problems({"path": uri})
    s = ParquetSettings.from_config({"path": uri})
    assert s.hadoop and s.target("t").name == uri.rstrip("/")
    assert s.staging_lease >= 2 * s.table.write_timeout
    with pytest.raises(ValueError, match="not a local path"):
        table_path(uri)


@pytest.mark.parametrize("uri", ["hdfs://nn:8020", "hdfs://nn/", "hdfs://nn/t?x=1"])
def test_hadoop_uris_without_a_directory_are_refused(uri: str) -> None:
    with pytest.raises(ValueError):
        table_location(uri)
    assert "path" in problems({"path": uri})


def test_relative_paths_and_remote_file_hosts_are_refused() -> None:
    with pytest.raises(ValueError, match="relative"):
        table_path("data/orders")
    with pytest.raises(ValueError, match="host"):
        table_path("file://otherhost/data")


def test_defaults() -> None:
    s = ParquetSettings.from_config({"path": "/t"})
    assert (s.format, s.table.partition_by, s.compression) == ("parquet", (), "")
    assert s.engine == "auto"
    policy = s.table.flush_policy
    assert (policy.max_records, policy.interval, s.table.write_timeout) == (50_000, 10.0, 60.0)
    assert s.table.merge_schema  # new value fields become new columns, as before


def test_every_setting_parsed() -> None:
    s = ParquetSettings.from_config(
        {
            "path": "file:///t",
            "format": "ORC",
            "partition.by": "kafka_partition, region",
            "flush.max.records": "500",
            "flush.interval.ms": "250",
            "compression": "ZSTD",
            "task.write.timeout.ms": "1500",
        }
    )
    assert s.target("x").name == "/t" and s.format == "orc" and s.compression == "zstd"
    assert not s.hadoop
    assert s.table.partition_by == ("kafka_partition", "region")
    policy = s.table.flush_policy
    assert (policy.max_records, policy.interval, s.table.write_timeout) == (500, 0.25, 1.5)


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("parquet", "snappy", "zlib"),
        ("orc", "zlib", "gzip"),
        ("json", "gzip", "zstd"),
        ("csv", "bzip2", "snappy-ish"),
    ],
)
def test_compression_is_checked_against_the_format(fmt: str, good: str, bad: str) -> None:
    assert problems({"path": "/t", "format": fmt, "compression": good}) == {}
    found = problems({"path": "/t", "format": fmt, "compression": bad})
    assert set(found) == {"compression"} and fmt in found["compression"]
    assert good in found["compression"]  # the allowed codecs are listed


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"format": "orc"}, "format orc files are written by Spark"),
        ({"compression": "lz4"}, "compression lz4 is written by Spark"),
        ({"path": "hdfs://nn/t"}, "Hadoop filesystem"),
    ],
)
def test_the_arrow_engine_is_refused_where_it_would_write_other_files(
    config: dict[str, str], why: str
) -> None:
    found = problems({"path": "/t", "write.engine": "arrow", **config})
    assert set(found) == {"write.engine"} and why in found["write.engine"]
    assert "auto or spark" in found["write.engine"]
    assert problems({"path": "/t", "write.engine": "auto", **config}) == {}
    assert ParquetSettings.from_config({"path": "/t", "write.engine": "Spark"}).engine == "spark"


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        {"format": "avro", "flush.max.records": "0", "partition.by": "headers", "path": "x"}
    )
    assert {"path", "format", "flush.max.records", "partition.by"} <= set(found)
    with pytest.raises(InvalidConfig) as info:
        ParquetSettings.from_config({"format": "avro"})
    assert {p.key for p in info.value.problems} == {"path", "format"}


def test_partition_columns_may_not_repeat() -> None:
    assert "twice" in problems({"path": "/t", "partition.by": "a,b,a"})["partition.by"]


def test_write_timeout_comes_from_the_task_config() -> None:
    assert write_timeout({}) == 60.0
    assert write_timeout({"task.write.timeout.ms": "2500"}) == 2.5
    with pytest.raises(ConfigError, match=r"task\.write\.timeout\.ms"):
        write_timeout({"task.write.timeout.ms": "0"})
    assert "task.write.timeout.ms" in problems({"path": "/t", "task.write.timeout.ms": "-1"})


def test_value_fields_is_handed_to_the_value_converter() -> None:
    connector = ParquetSinkConnector()
    connector.config = {"path": "/t", "value.fields": "id:int64,name"}
    configs = connector.task_configs(2)
    assert len(configs) == 2
    assert all(c["value.converter.fields"] == "id:int64,name" for c in configs)
    conflict = {"path": "/t", "value.fields": "id", "value.converter.fields": "name"}
    assert "value.fields" in problems(conflict)
    same = {"path": "/t", "value.fields": "id", "value.converter.fields": "id"}
    assert problems(same) == {}


def test_builtin_aliases_resolve() -> None:
    assert default_registry.resolve("ParquetSink") is ParquetSinkConnector
    assert default_registry.resolve("ParquetSinkConnector") is ParquetSinkConnector
    assert default_registry.resolve("hangsink") is HangSinkConnector
    assert default_registry.resolve("EchoSink") is EchoSinkConnector
    assert ParquetSinkConnector().task_class() is ParquetSinkTask
    names = {p.class_name for p in default_registry.list_plugins()}
    assert "daemon.connectors.parquet.ParquetSinkConnector" in names
    settings = default_registry.config_def("ParquetSink")
    assert settings is not None and settings.keys["path"].required


def test_a_table_per_topic_and_schema_evolution_by_format() -> None:
    s = ParquetSettings.from_config({"path": "/data/${topic}/t"})
    assert s.target("orders.eu").name == "/data/orders.eu/t"
    assert s.target("orders").kwargs == {"path": "/data/orders/t"}
    hadoop = ParquetSettings.from_config({"path": "hdfs://nn/tables/${topic}"})
    assert hadoop.hadoop and hadoop.target("a").name == "hdfs://nn/tables/a"
    assert "path" in problems({"path": "gs://b/${topic}"})  # the scheme is still checked
    # JSON and CSV files carry no types: the table's columns cannot be read back from them.
    found = problems({"path": "/t", "format": "json", "schema.evolution": "false"})
    assert set(found) == {"schema.evolution"} and "parquet or orc" in found["schema.evolution"]
    assert problems({"path": "/t", "format": "orc", "schema.evolution": "false"}) == {}
