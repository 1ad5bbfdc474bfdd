"""Which records a table sink refuses before ``put``, by the table's schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

from daemon.connectors.tables.schema import fitted, refused_rows, spark_type
from daemon.errors import RecordRejected

SCHEMA = [["kafka_offset", "bigint"], ["id", "bigint"], ["name", "string"]]


@pytest.mark.parametrize(
    ("arrow", "spark"),
    [
        (pa.int64(), "bigint"),
        (pa.int32(), "int"),
        (pa.string(), "string"),
        (pa.float64(), "double"),
        (pa.timestamp("ms", tz="UTC"), "timestamp"),
        (pa.timestamp("us"), "timestamp_ntz"),
        (pa.list_(pa.string()), "array<string>"),
        (
            pa.struct([("key", pa.string()), ("value", pa.binary())]),
            "struct<key:string,value:binary>",
        ),
        (pa.map_(pa.string(), pa.int64()), "map<string,bigint>"),
        (pa.decimal128(10, 2), "decimal(10,2)"),
        (pa.null(), None),
    ],
)
def test_arrow_types_as_spark_names_them(arrow: pa.DataType, spark: str | None) -> None:
    assert spark_type(arrow) == spark


def test_a_field_of_another_type_is_refused_where_it_has_a_value() -> None:
    table = pa.table({"kafka_offset": [0, 1, 2], "id": ["a", None, "c"], "name": ["x", "y", "z"]})
    refused = refused_rows(table, SCHEMA, new_columns=True)
    assert sorted(refused) == [0, 2]
    assert isinstance(refused[0], RecordRejected)
    assert "field id is string here but the table's column is bigint" in str(refused[0])


def test_a_new_field_is_refused_only_without_schema_evolution() -> None:
    table = pa.table({"kafka_offset": [0, 1], "id": [1, 2], "extra": [None, True]})
    assert refused_rows(table, SCHEMA, new_columns=True) == {}
    refused = refused_rows(table, SCHEMA, new_columns=False)
    assert list(refused) == [1]
    assert "field extra is not a column of the table and schema.evolution=false" in str(refused[1])


def test_only_rows_of_the_mask_are_judged() -> None:
    table = pa.table({"kafka_offset": [0, 1], "id": ["a", "b"]})
    assert list(refused_rows(table, SCHEMA, new_columns=True, rows=pa.array([False, True]))) == [1]


def test_fitted_drops_what_the_table_would_refuse_once_it_holds_only_nulls() -> None:
    table = pa.table(
        {
            "kafka_offset": [0, 1],
            "id": pa.array([None, None], pa.string()),  # its values were refused
            "extra": pa.array([None, None], pa.int64()),  # no such column
            "nothing": pa.array([None, None], pa.null()),
            "name": pa.array([None, None], pa.string()),  # the right type: kept
        }
    )
    assert fitted(table, SCHEMA).column_names == ["kafka_offset", "name"]
    # Before the table exists only Spark's void type must go.
    assert fitted(table, None).column_names == ["kafka_offset", "id", "extra", "name"]
