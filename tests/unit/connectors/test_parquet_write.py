"""The executor-side write function without Spark (pyarrow writes): files, checks, formats."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from daemon.connectors.parquet.write import (
    arrow_refusal,
    data_files,
    micros_timestamps,
    spark_partition_value,
    write_staged,
)
from daemon.connectors.testing import sample_batch
from daemon.executor.handoff import Batch, write_table


def handoff(tmp_path: Path, table: pa.Table) -> Batch:
    return Batch(write_table(table, tmp_path / "batch.arrow"), None)


def test_data_files_skips_what_readers_skip(tmp_path: Path) -> None:
    for name in ("a.parquet", "_SUCCESS", ".a.parquet.crc", "x=1/b.parquet", "_temporary/0/c"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert data_files(tmp_path) == ["a.parquet", "x=1/b.parquet"]


def test_returns_the_files_written_and_the_row_count(tmp_path: Path) -> None:
    out = tmp_path / "stage"
    out.mkdir()
    batch = handoff(tmp_path, sample_batch("t", 2, 0, 5).table)
    result = write_staged(None, batch, path=str(out), partition_by=["kafka_partition"])
    assert result["files"] == ["kafka_partition=2/part-00000.snappy.parquet"]
    assert result["rows"] == 5 and result["engine"] == "arrow"
    assert write_staged(None, None, path=str(out))["rows"] == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "avro"}, "format"),
        ({"format": "orc", "compression": "gzip"}, "compression"),
        ({"source": "csv"}, "source"),
        ({"partition_by": ["region"]}, "region"),
    ],
)
def test_refuses_what_it_cannot_write(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    batch = handoff(tmp_path, sample_batch(count=2).table)
    with pytest.raises(ValueError, match=message):
        write_staged(None, batch, path=str(tmp_path / "o"), **kwargs)  # type: ignore[arg-type]


def test_partition_values_are_named_as_spark_names_them() -> None:
    # The full character set is checked against Spark in test_parquet_engines.
    assert spark_partition_value("a/b=c d%") == "a%2Fb%3Dc d%25"
    assert spark_partition_value("{x}[^]") == "%7Bx}%5B%5E%5D"
    assert spark_partition_value("\x01\x7f日本") == "%01%7F日本"
    assert spark_partition_value(None) == spark_partition_value("") == "__HIVE_DEFAULT_PARTITION__"
    assert (spark_partition_value(True), spark_partition_value(-3)) == ("true", "-3")


@pytest.mark.parametrize(
    ("schema", "partition_by", "why"),
    [
        (pa.schema([("x", pa.uint8())]), [], "column x is uint8"),
        (pa.schema([("x", pa.timestamp("ns"))]), [], "column x is timestamp[ns]"),
        (pa.schema([("x", pa.list_(pa.null()))]), [], "column x is list<item: null>"),
        (pa.schema([("p", pa.float64())]), ["p"], "partition column p is double"),
    ],
)
def test_arrow_names_the_column_it_cannot_write_as_spark(
    schema: pa.Schema, partition_by: list[str], why: str
) -> None:
    assert why in (arrow_refusal(schema, "parquet", partition_by, "") or "")


def test_without_spark_other_types_are_still_written_by_pyarrow(tmp_path: Path) -> None:
    batch = handoff(tmp_path, pa.table({"x": pa.array([1, 2], pa.uint16())}))
    result = write_staged(None, batch, path=str(tmp_path / "o"))
    assert result == {**result, "rows": 2, "engine": "arrow", "files": ["part-00000.parquet"]}


def test_text_formats_flatten_headers_and_may_be_gzipped(tmp_path: Path) -> None:
    batch = handoff(tmp_path, sample_batch(count=2).table)
    out = tmp_path / "json"
    result = write_staged(None, batch, path=str(out), format="json", compression="gzip")
    assert result["files"] == ["part-00000.json.gz"]
    first = json.loads(gzip.decompress((out / result["files"][0]).read_bytes()).splitlines()[0])
    assert first["key"] == "key-0" and first["headers"] == [{"key": "source", "value": "c2FtcGxl"}]
    csv_out = tmp_path / "csv"
    write_staged(None, batch, path=str(csv_out), format="csv")
    header, row = (csv_out / "part-00000.csv").read_text().splitlines()[:2]
    assert "headers" in header and "c2FtcGxl" in row
    with pytest.raises(ValueError, match="gzip"):
        write_staged(None, batch, path=str(tmp_path / "x"), format="csv", compression="lz4")


def test_the_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, daemon.connectors.parquet.write as w; "
        "print(sorted(m for m in ('pyspark', 'pyarrow.parquet', 'aiohttp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class _Conf:
    def __init__(self, **values: str) -> None:
        self.values = dict(values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Spark:
    def __init__(self, **values: str) -> None:
        self.conf = _Conf(**values)


def test_microsecond_timestamps_only_while_writing_and_restored_after_a_failure() -> None:
    key = "spark.sql.parquet.outputTimestampType"
    unset, custom = _Spark(), _Spark(**{key: "TIMESTAMP_MILLIS"})
    for spark in (unset, custom):
        before = dict(spark.conf.values)
        with pytest.raises(RuntimeError), micros_timestamps(spark):
            assert spark.conf.get(key) == "TIMESTAMP_MICROS"
            raise RuntimeError("the write failed")
        assert spark.conf.values == before
