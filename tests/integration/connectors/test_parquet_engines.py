"""ParquetSink's two writers against each other: pyarrow (``write.engine=arrow``, the default
``auto`` wherever it can) must write the files Spark writes. The same batch, written once by a
Spark job and once by pyarrow in a real executor, gives the same partition directories, the
same file names past the commit's part, the same Parquet column types, and the same schema and
rows when Spark reads the two tables back."""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.spark import ThreadedPool

from daemon.connectors.parquet.write import arrow_refusal, tidy

pytestmark = pytest.mark.integration

WRITE = "daemon.connectors.parquet.write:write_staged"
READ = "daemon.connectors.testing:read_as_spark"

#: Every character Spark can put in a directory name (NUL it cannot), 32 to a value, some
#: beyond Latin-1, the empty text and a null: each value is a partition of its own, whose
#: directory name Spark escapes character by character.
TEXTS = ["".join(map(chr, range(start, min(start + 32, 256)))) for start in range(1, 256, 32)] + [
    "a b",
    "x/y=z",
    "日本",
    "%41",
    "",
    None,
]


def wide_table(n: int) -> pa.Table:
    """A row per value of ``TEXTS``, with a column of every type the arrow writer takes."""
    utc = datetime.UTC

    def pick(values: list[Any]) -> list[Any]:
        return [None if i % 7 == 3 else values[i % len(values)] for i in range(n)]

    columns = {
        "text": pa.array(TEXTS[:n], pa.string()),
        "num": pa.array([i % 3 - 1 for i in range(n)], pa.int32()),
        "flag": pa.array([i % 2 == 0 for i in range(n)]),
        "day": pa.array([datetime.date(2026, 1 + i % 2, 1) for i in range(n)]),
        "b": pa.array(pick([True, False])),
        "i8": pa.array(pick([-128, 127]), pa.int8()),
        "i16": pa.array(pick([-3, 30000]), pa.int16()),
        "i64": pa.array(pick([2**62, -1]), pa.int64()),
        "f32": pa.array(pick([1.5, -0.25]), pa.float32()),
        "f64": pa.array(pick([1e300, 0.1]), pa.float64()),
        "s": pa.array(pick(["é", "", "plain"]), pa.large_string()),
        "bin": pa.array(pick([b"\x00\xff", b""]), pa.binary()),
        "d": pa.array(pick([datetime.date(1970, 1, 1), datetime.date(2999, 12, 31)])),
        "ts": pa.array(
            pick([datetime.datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=utc)]),
            pa.timestamp("us", "UTC"),
        ),
        "ts_ms": pa.array(pick([datetime.datetime(2026, 1, 2, 3, 4, 5, 6000)]), pa.timestamp("ms")),
        "dec9": pa.array(pick([decimal.Decimal("1234567.89")]), pa.decimal128(9, 2)),
        "dec18": pa.array(pick([decimal.Decimal("-0.000000000000000001")]), pa.decimal128(18, 18)),
        "dec30": pa.array(
            pick([decimal.Decimal("12345678901234567890.123")]), pa.decimal128(30, 3)
        ),
        "ints": pa.array(pick([[1, None, 3], []]), pa.list_(pa.int64())),
        "rec": pa.array(
            pick([{"a": "x", "b": [1.0, None]}, {"a": None, "b": None}]),
            pa.struct([("a", pa.string()), ("b", pa.list_(pa.float64()))]),
        ),
        "tags": pa.array(pick([[("k", 1), ("j", None)], []]), pa.map_(pa.string(), pa.int64())),
    }
    return pa.table(columns)


def parquet_columns(path: Path) -> list[tuple[Any, ...]]:
    """Each column of a Parquet file as its readers see it: path, physical and logical type,
    levels."""
    schema = pq.ParquetFile(path).schema
    return [
        (
            c.path,
            c.physical_type,
            c.logical_type.to_json(),
            c.converted_type,
            c.max_definition_level,
            c.max_repetition_level,
        )
        for c in (schema.column(i) for i in range(len(schema)))
    ]


def layout(root: Path) -> dict[str, str]:
    """Each data file's directory under ``root`` → the name a commit gives it (the staging
    log's ``part-<commit>-NNNNN<extensions>``, tidied as ParquetSink does)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if not name.startswith(("_", ".")):
                rel = os.path.relpath(dirpath, root)
                assert rel not in out, f"two files in {rel}"
                out[rel] = tidy(f"part-c-00000{name[name.index('.') :]}")
    return out


@pytest.mark.parametrize(
    ("partition_by", "compression"),
    [([], ""), (["text"], "zstd"), (["num", "flag", "day"], "gzip"), ([], "none")],
)
async def test_arrow_writes_what_spark_writes(
    spark_pool: ThreadedPool, tmp_path: Path, partition_by: list[str], compression: str
) -> None:
    table = wide_table(len(TEXTS))
    assert arrow_refusal(table.schema, "parquet", partition_by, compression) is None
    results, reads = {}, {}
    for engine in ("spark", "arrow"):
        out = tmp_path / engine
        kwargs = {
            "path": str(out),
            "partition_by": partition_by,
            "compression": compression,
            "engine": engine,
        }
        results[engine] = await spark_pool.run("engines", WRITE, table, timeout=120, kwargs=kwargs)
        reads[engine] = await spark_pool.run(
            "engines", READ, timeout=120, kwargs={"path": str(out)}
        )
    assert results["spark"]["engine"] == "spark" and results["arrow"]["engine"] == "arrow"
    spark_files, arrow_files = layout(tmp_path / "spark"), layout(tmp_path / "arrow")
    assert spark_files == arrow_files
    if partition_by == ["text"]:
        assert len(spark_files) == len(TEXTS) - 1  # the empty text and null share one
    for rel in spark_files:
        (spark_file,) = [p for p in (tmp_path / "spark" / rel).iterdir() if p.name[0] not in "_."]
        (arrow_file,) = [p for p in (tmp_path / "arrow" / rel).iterdir() if p.name[0] not in "_."]
        assert parquet_columns(arrow_file) == parquet_columns(spark_file), rel
    assert reads["arrow"]["schema"] == reads["spark"]["schema"]
    assert reads["arrow"]["rows"] == reads["spark"]["rows"]
    assert len(reads["arrow"]["rows"]) == table.num_rows


@pytest.mark.parametrize(
    ("column", "engine", "used"),
    [
        (pa.array([1], pa.uint32()), "auto", "spark"),  # Spark reads it as a wider type
        (pa.array([1.5], pa.float64()), "auto", "arrow"),
    ],
)
async def test_auto_falls_back_to_spark_batch_by_batch(
    spark_pool: ThreadedPool, tmp_path: Path, column: pa.Array, engine: str, used: str
) -> None:
    table = pa.table({"x": column})
    kwargs = {"path": str(tmp_path / "t"), "engine": engine}
    result = await spark_pool.run("engines", WRITE, table, timeout=120, kwargs=kwargs)
    assert result["engine"] == used and result["rows"] == 1


async def test_arrow_refuses_a_batch_it_would_write_otherwise(
    spark_pool: ThreadedPool, tmp_path: Path
) -> None:
    table = pa.table({"x": pa.array([1], pa.uint32())})
    kwargs = {"path": str(tmp_path / "t"), "engine": "arrow"}
    with pytest.raises(
        Exception, match=r"write.engine=arrow cannot write this batch: column x is uint32"
    ):
        await spark_pool.run("engines", WRITE, table, timeout=120, kwargs=kwargs)
    assert not (tmp_path / "t").exists()
