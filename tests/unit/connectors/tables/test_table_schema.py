"""Which records a table sink refuses before ``put``, by the table's schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

from daemon.connectors.tables import sparktypes
from daemon.connectors.tables.schema import fitted, merged, refused_rows, spark_type
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


NESTED = [
    ["kafka_offset", "bigint"],
    ["home", "struct<city:string,geo:struct<lat:double>>"],
    ["past", "array<struct<city:string>>"],
    ["by", "map<string,struct<n:int>>"],
]


def _nested(home: pa.DataType, past: pa.DataType, by: pa.DataType) -> pa.Table:
    return pa.table(
        {
            "kafka_offset": [0, 1],
            "home": pa.array([None, {}], home),
            "past": pa.array([None, []], past),
            "by": pa.array([None, []], by),
        }
    )


GEO = pa.struct([("lat", pa.float64())])
WIDER = _nested(
    pa.struct(
        [("city", pa.string()), ("geo", pa.struct([("lat", pa.float64()), ("z", pa.int8())]))]
    ),
    pa.list_(pa.struct([("city", pa.string()), ("zip", pa.string())])),
    pa.map_(pa.string(), pa.struct([("n", pa.int32()), ("m", pa.int32())])),
)


def test_structs_that_gain_fields_at_any_depth_need_schema_evolution() -> None:
    assert refused_rows(WIDER, NESTED, new_columns=True) == {}
    refused = refused_rows(WIDER, NESTED, new_columns=False)
    assert list(refused) == [1]  # the row whose structs have values
    assert "field home.geo.z is not a column of the table and schema.evolution=false" in str(
        refused[1]
    )
    assert merged(NESTED, WIDER) == [
        ["kafka_offset", "bigint"],
        ["home", "struct<city:string,geo:struct<lat:double,z:tinyint>>"],
        ["past", "array<struct<city:string,zip:string>>"],
        ["by", "map<string,struct<n:int,m:int>>"],
    ]


def test_structs_that_lack_fields_fit_and_a_nested_type_change_is_refused() -> None:
    narrower = _nested(
        pa.struct([("geo", pa.struct([]))]),
        pa.list_(pa.struct([])),
        pa.map_(pa.string(), pa.struct([("n", pa.int32())])),
    )
    assert refused_rows(narrower, NESTED, new_columns=False) == {}
    assert merged(NESTED, narrower) == NESTED
    changed = _nested(
        pa.struct([("geo", pa.struct([("lat", pa.string())]))]),
        pa.list_(pa.struct([])),
        pa.map_(pa.int32(), pa.struct([("n", pa.int32())])),
    )
    refused = refused_rows(changed, NESTED, new_columns=True)
    assert "field home.geo.lat is string here but the table's column is double" in str(refused[1])
    assert (
        refused_rows(changed.select(["kafka_offset", "by"]), NESTED, new_columns=True)[1]
        .args[0]
        .startswith("field by is map<int,struct<n:int>> here but the table's column is map<string,")
    )


@pytest.mark.parametrize(
    "text",
    [
        "bigint",
        "decimal(10,2)",
        "array<map<string,decimal(38,18)>>",
        "struct<a:int,b:struct<c:array<string>,d:map<string,struct<e:binary>>>>",
        "struct<>",
    ],
)
def test_spark_type_strings_read_back_as_written(text: str) -> None:
    tree = sparktypes.parse(text)
    assert tree is not None and sparktypes.render(tree) == text


@pytest.mark.parametrize(
    "text", ["", "struct<a:int", "struct<a<b:int>", "array<int>>", "struct<... 3 more fields>"]
)
def test_spark_type_strings_that_cannot_be_read_compare_whole(text: str) -> None:
    assert sparktypes.parse(text) is None
    assert sparktypes.difference("c", text or "x", "struct<a:int>").other == (
        "c",
        text or "x",
        "struct<a:int>",
    )
