"""JsonSchemaConverter without a registry process: JSON Schemas as Confluent's JsonSchemaData
maps them to Connect schemas (``registry/jsonschema.py``), payloads read into typed columns, and
the schemas that have no column types refused, their records errant."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pyarrow as pa
import pytest

from daemon.connectors.converters import make_converter
from daemon.connectors.converters.registry import JsonSchemaConverter, SchemaRefused
from daemon.connectors.converters.registry.client import Schema
from daemon.connectors.converters.registry.jsonschema import to_connect

URL = "http://127.0.0.1:1"
D = "org.apache.kafka.connect.data."

ORDER: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "qty": {"type": "integer", "connect.type": "int16"},
        "price": {
            "type": "number",
            "title": D + "Decimal",
            "connect.type": "bytes",
            "connect.parameters": {"scale": "2"},
        },
        "at": {"type": "integer", "title": D + "Timestamp"},
        "day": {"type": "integer", "title": D + "Date", "connect.type": "int32"},
        "name": {"type": "string"},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "kind": {"enum": ["a", "b"]},
        "ok": {"type": ["boolean", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {
            "type": "object",
            "connect.type": "map",
            "additionalProperties": {"type": "number"},
        },
        "shop": {"$ref": "#/definitions/Shop"},
    },
    "required": ["id", "name"],
    "definitions": {
        "Shop": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def wire(schema_id: int, value: Any) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + json.dumps(value).encode()


def converter(schemas: dict[int, Any], **options: str) -> JsonSchemaConverter:
    conv = make_converter("jsonschema", {"schema.registry.url": URL, **options}, is_key=False)
    assert isinstance(conv, JsonSchemaConverter) and conv.client is not None
    for sid, schema in schemas.items():
        conv.client.schemas[sid] = Schema(sid, "JSON", json.dumps(schema))
    return conv


def test_a_json_schema_becomes_typed_columns() -> None:
    conv = converter({1: ORDER})
    value = {
        "id": 7,
        "qty": 3,
        "price": 12.5,
        "at": 1_700_000_000_123,
        "day": 19_000,
        "name": "n",
        "note": None,
        "kind": "b",
        "ok": True,
        "tags": ["x"],
        "attrs": {"w": 1.5},
        "shop": {"city": "c"},
    }
    out = conv.convert([wire(1, value), wire(1, {"id": 8, "name": "m"}), None])
    assert not out.errors
    types = {k: str(v.type) for k, v in out.columns.items()}
    assert types == {
        "id": "int64",
        "qty": "int16",
        "price": "decimal128(38, 2)",
        "at": "timestamp[ms, tz=UTC]",
        "day": "date32[day]",
        "name": "string",
        "note": "string",
        "kind": "string",
        "ok": "bool",
        "tags": "list<item: string>",
        "attrs": "map<string, double>",
        "shop": "struct<city: string>",
    }
    row = {k: v[0].as_py() for k, v in out.columns.items()}
    assert row["price"] == decimal.Decimal("12.50") and row["day"] == datetime.date(2022, 1, 8)
    assert row["attrs"] == [("w", 1.5)] and row["shop"] == {"city": "c"}
    # Absent properties are null, even required-by-schema ones (Confluent reads them so).
    assert [c[1].as_py() for c in out.columns.values()][:3] == [8, None, None]
    assert out.tombstones is not None and out.tombstones.to_pylist() == [False, False, True]


def test_optional_for_non_required_properties() -> None:
    plain = to_connect(ORDER)
    assert not any(f.get("optional") for f in plain["fields"] if f["field"] == "qty")
    loose = to_connect(ORDER, optional_non_required=True)
    optional = {f["field"] for f in loose["fields"] if f.get("optional")}
    assert "qty" in optional and "id" not in optional and "name" not in optional


def test_connect_index_orders_the_fields() -> None:
    schema = {
        "type": "object",
        "properties": {
            "b": {"type": "string", "connect.index": 1},
            "a": {"type": "string", "connect.index": 0},
        },
    }
    assert [f["field"] for f in to_connect(schema)["fields"]] == ["a", "b"]


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({}, "an empty schema"),
        ({"type": ["null"]}, "null alone"),
        ({"allOf": [{"type": "string"}, {"minLength": 1}]}, "allOf of these schemas"),
        ({"$ref": "#"}, "refers to itself"),
        ({"$ref": "other.json"}, "references to other schemas"),
        ({"type": "array"}, "did not specify the items type"),
    ],
)
def test_schemas_without_column_types_are_refused(schema: Any, why: str) -> None:
    with pytest.raises(SchemaRefused, match=why):
        to_connect(schema)
    out = converter({3: schema}).convert([wire(3, "x")])
    assert list(out.errors) == [0] and "schema id 3" in str(out.errors[0])


def test_payloads_that_do_not_fit_are_errant() -> None:
    conv = converter({1: ORDER})
    out = conv.convert(
        [
            wire(1, {"id": 1, "name": "ok"}),
            b"\x00\x00\x00\x00\x01{not json",
            wire(1, {"id": 2, "name": None}),  # an explicit null in a required field
            wire(1, {"id": 3, "name": "x", "day": "2024-01-01"}),
            wire(1, [1, 2]),
        ]
    )
    assert sorted(out.errors) == [1, 2, 3, 4]
    assert "the JSON payload cannot be read" in str(out.errors[1])
    assert "Invalid null value for required STRING field" in str(out.errors[2])
    assert "Invalid type for Date" in str(out.errors[3])
    assert "Structs should be encoded as JSON objects" in str(out.errors[4])
    assert out.columns["id"].to_pylist() == [1, None, None, None, None]


def test_an_avro_schema_id_in_a_json_schema_converter_is_errant() -> None:
    conv = converter({})
    assert conv.client is not None
    conv.client.schemas[5] = Schema(5, "AVRO", '"string"')
    out = conv.convert([wire(5, "x")])
    assert "is registered as AVRO; this converter reads JSON" in str(out.errors[0])
    assert out.columns["value"].type == pa.null()


UNION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "v": {
            "oneOf": [
                {"type": "null"},
                {"type": "integer"},
                {"type": "string"},
                {"type": "array", "items": {"type": "integer"}},
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {
                    "type": "object",
                    "properties": {
                        "b": {"type": "string"},
                        "c": {"type": "object", "properties": {"d": {"type": "boolean"}}},
                    },
                },
            ]
        },
        "n": {"type": ["number", "boolean"]},
    },
}


def test_a_union_is_confluents_struct_of_alternatives() -> None:
    connect = to_connect(UNION)
    v = connect["fields"][1]
    assert v["name"] == "io.confluent.connect.json.OneOf" and v["optional"] is True
    assert [f["field"] for f in v["fields"]] == [
        f"io.confluent.connect.json.OneOf.field.{i}" for i in range(5)
    ]
    assert all(f["optional"] for f in v["fields"])
    n = connect["fields"][2]
    assert [f["type"] for f in n["fields"]] == ["double", "boolean"] and "optional" not in n
    generalized = to_connect(UNION, generalized=True)["fields"][1]
    assert generalized["fields"][0]["field"] == "connect_union_field_0"


def test_a_union_value_sets_the_alternative_confluent_chooses() -> None:
    conv = converter({7: UNION})
    values = [
        {"id": 1, "v": 5, "n": 1.5},
        {"id": 2, "v": "five", "n": True},
        {"id": 3, "v": [1, 2], "n": 2},
        {"id": 4, "v": {"a": 1}, "n": 0},
        {"id": 5, "v": {"b": "x", "c": {"d": True}}, "n": 0},
        {"id": 6, "v": {"a": 1, "c": {"d": False}}, "n": 0},  # 1 shared vs 1 + 1 nested
        {"id": 7, "v": None, "n": 0},
        {"id": 8, "v": True, "n": 0},  # no alternative takes a boolean
    ]
    out = conv.convert([wire(7, value) for value in values])
    assert list(out.errors) == [7]
    assert "Did not find matching oneof field for data" in str(out.errors[7])
    p = "io.confluent.connect.json.OneOf.field."
    rows = out.columns["v"].to_pylist()

    def chosen(row: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if row is None else {k[len(p) :]: x for k, x in row.items() if x is not None}

    assert [chosen(r) for r in rows] == [
        {"0": 5},
        {"1": "five"},
        {"2": [1, 2]},
        {"3": {"a": 1}},
        {"4": {"b": "x", "c": {"d": True}}},
        {"4": {"b": None, "c": {"d": False}}},
        None,
        None,
    ]
    numbers = out.columns["n"].to_pylist()[:3]
    assert numbers == [
        {"io.confluent.connect.json.OneOf.field.0": 1.5,
         "io.confluent.connect.json.OneOf.field.1": None},
        {"io.confluent.connect.json.OneOf.field.0": None,
         "io.confluent.connect.json.OneOf.field.1": True},
        {"io.confluent.connect.json.OneOf.field.0": 2.0,
         "io.confluent.connect.json.OneOf.field.1": None},
    ]  # fmt: skip


def test_all_of_as_confluent_reads_it() -> None:
    base = {
        "definitions": {
            "Base": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}},
                "required": ["id"],
            }
        },
        "allOf": [
            {"$ref": "#/definitions/Base"},
            {
                "type": "object",
                "properties": {"kind": {"type": "integer"}, "extra": {"type": "boolean"}},
            },
        ],
    }
    merged = to_connect(base)
    assert [(f["field"], f["type"]) for f in merged["fields"]] == [
        ("id", "int64"),
        ("kind", "int64"),  # the later property replaces the earlier, in its place
        ("extra", "boolean"),
    ]
    optional = to_connect(base, optional_non_required=True)["fields"]
    assert [f.get("optional", False) for f in optional] == [False, True, True]
    narrowed = {
        '{"allOf": [{"type": "string"}, {"enum": ["a", "b"]}]}': "string",
        '{"allOf": [{"const": 3}, {"type": "integer", "connect.type": "int16"}]}': "int16",
        '{"allOf": [{"type": "string", "format": "date"}, {"type": "number"}]}': "double",
        '{"allOf": [{"type": "string", "format": "email"}, {"maxLength": 9}]}': "string",
        '{"allOf": [{"oneOf": [{"type": "null"}, {"type": "boolean"}]}, {"title": "x"}]}':
            "boolean",
    }  # fmt: skip
    for text, kind in narrowed.items():
        assert to_connect(json.loads(text))["type"] == kind, text
    conv = converter({8: base})
    out = conv.convert([wire(8, {"id": 1, "kind": 7, "extra": True}), wire(8, {"id": 2})])
    assert not out.errors
    assert out.columns["kind"].to_pylist() == [7, None]
    assert out.columns["extra"].to_pylist() == [True, None]
