"""ProtobufConverter without a registry process: registered schemas in both of the forms
registries answer (``.proto`` text, base64 descriptors) with their references, messages read
into typed columns by Confluent's ``ProtobufData`` rules and its settings, and the schemas and
payloads that cannot become columns refused or errant."""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

import pyarrow as pa
import pytest
from support.registry import proto_classes

from daemon.connectors.converters import converter_problems, make_converter
from daemon.connectors.converters.registry import ProtobufConverter, SchemaRefused
from daemon.connectors.converters.registry.client import Schema
from daemon.connectors.converters.registry.protobuf import ProtobufType
from daemon.connectors.converters.registry.protofiles import compile_texts
from daemon.errors import ConfigError

URL = "http://127.0.0.1:1"

COMMON = """
syntax = "proto3";
package common;
message Money {
  string currency = 1;
  int64 units = 2;
}
"""
ORDER = """
syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/type/timeofday.proto";
message Order {
  int64 id = 1;
  common.Money total = 2;
  google.protobuf.Timestamp at = 3;
  google.type.TimeOfDay open = 4;
  google.protobuf.Int32Value stock = 5;
  oneof ship {
    string address = 6;
    bool pickup = 7;
  }
  State state = 8;
  map<int32, Line> lines = 9;
  message Line {
    string sku = 1;
    fixed32 n = 2;
  }
}
enum State {
  NEW = 0;
  PAID = 1;
}
"""


def wire(schema_id: int, message: Any, indexes: bytes = b"\x00") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + indexes + message.SerializeToString()


def b64(text: str, name: str) -> str:
    return base64.b64encode(
        compile_texts({name: text}, targets=[name])[name].SerializeToString()
    ).decode()


def converter(schemas: dict[int, Schema], **options: str) -> ProtobufConverter:
    conv = make_converter("protobuf", {"schema.registry.url": URL, **options}, is_key=False)
    assert isinstance(conv, ProtobufConverter) and conv.client is not None
    conv.client.schemas.update(schemas)
    return conv


def order_classes() -> dict[str, Any]:
    return proto_classes(ORDER, "order.proto", {"common.proto": COMMON})


def _order(classes: dict[str, Any], i: int) -> Any:
    m = classes["shop.Order"](id=i)
    m.total.currency, m.total.units = "EUR", i * 10
    m.at.seconds, m.at.nanos = 1_700_000_000, 999_999_999
    m.open.hours, m.open.minutes = 9, 30
    if i % 2:
        m.stock.value = i
        m.pickup = True
    else:
        m.address = f"street {i}"
    m.state = i % 2
    m.lines[i].sku, m.lines[i].n = f"s{i}", 2**32 - 1
    return m


@pytest.mark.parametrize("form", ["text", "descriptor"])
def test_a_message_and_its_references_become_typed_columns(form: str) -> None:
    if form == "text":
        schema = Schema(1, "PROTOBUF", ORDER, (("common.proto", COMMON),))
    else:
        common = b64(COMMON, "common.proto")
        order = base64.b64encode(
            compile_texts({"common.proto": COMMON, "o.proto": ORDER}, targets=["o.proto"])[
                "o.proto"
            ].SerializeToString()
        ).decode()
        schema = Schema(1, "PROTOBUF", order, (("common.proto", common),))
    classes = order_classes()
    out = converter({1: schema}).convert([wire(1, _order(classes, 1)), wire(1, _order(classes, 2))])
    assert not out.errors
    types = {k: str(v.type) for k, v in out.columns.items()}
    assert types == {
        "ship_0": "struct<address: string, pickup: bool>",
        "id": "int64",
        "total": "struct<currency: string, units: int64>",
        "at": "timestamp[ms, tz=UTC]",
        "open": "int32",
        "stock": "struct<value: int32>",
        "state": "string",
        "lines": "map<int32, struct<sku: string, n: int64>>",
    }
    rows = pa.table(out.columns).to_pylist()
    assert rows[0]["at"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 999000, datetime.UTC)
    assert rows[0]["open"] == (9 * 60 + 30) * 60_000
    assert rows[0]["ship_0"] == {"address": None, "pickup": True}
    assert rows[1]["ship_0"] == {"address": "street 2", "pickup": None}
    assert (rows[0]["stock"], rows[1]["stock"]) == ({"value": 1}, None)
    assert (rows[0]["state"], rows[1]["state"]) == ("PAID", "NEW")
    assert rows[0]["lines"] == [(1, {"sku": "s1", "n": 2**32 - 1})]
    assert rows[1]["total"] == {"currency": "EUR", "units": 20}


def test_confluents_settings_shape_the_columns() -> None:
    schema = Schema(1, "PROTOBUF", ORDER, (("common.proto", COMMON),))
    classes = order_classes()
    out = converter(
        {1: schema},
        **{
            "int.for.enums": "true",
            "wrapper.for.nullables": "true",
            "flatten.unions": "true",
            "generate.struct.for.nulls": "true",
        },
    ).convert([wire(1, _order(classes, 1)), wire(1, classes["shop.Order"]())])
    types = {k: str(v.type) for k, v in out.columns.items()}
    assert types["state"] == "int32" and types["stock"] == "int32"
    assert "ship_0" not in types and types["address"] == "string" and types["pickup"] == "bool"
    rows = pa.table(out.columns).to_pylist()
    assert (rows[0]["state"], rows[0]["stock"], rows[0]["pickup"]) == (1, 1, True)
    # An empty message: its message fields are structs of defaults, not null; but its
    # Timestamp of defaults is the epoch and its oneof members null.
    assert rows[1]["total"] == {"currency": "", "units": 0}
    assert rows[1]["at"] == datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    assert rows[1]["address"] is None
    unindexed = converter({1: schema}, **{"generate.index.for.unions": "false"})
    assert "ship" in unindexed.convert([wire(1, _order(classes, 1))]).columns


def test_a_registered_wrapper_is_its_value() -> None:
    text = 'syntax = "proto3";\nimport "google/protobuf/wrappers.proto";\n'
    pool_text = text + "message Holder { google.protobuf.StringValue v = 1; }"
    classes = proto_classes(pool_text)
    value = classes["Holder"]().v.__class__(value="hello")
    # The schema is the wrapper's own file: message index 7 of wrappers.proto is StringValue.
    wkt = Schema(2, "PROTOBUF", b64_file("google/protobuf/wrappers.proto"))
    out = converter({2: wkt}).convert([wire(2, value, b"\x02\x0e")])
    assert not out.errors and out.columns["value"].to_pylist() == ["hello"]
    off = converter({2: wkt}, **{"wrapper.for.raw.primitives": "false"})
    # a struct of one field, "value": a column per field, renamed off the reserved "value"
    columns = off.convert([wire(2, value, b"\x02\x0e")]).columns
    assert {k: v.to_pylist() for k, v in columns.items()} == {"value_value": ["hello"]}


def b64_file(name: str) -> str:
    return base64.b64encode(compile_texts({}, targets=[name])[name].SerializeToString()).decode()


def test_proto2_presence_and_defaults() -> None:
    text = """
    syntax = "proto2";
    message P {
      optional int32 a = 1 [default = 5];
      required string b = 2;
      optional string c = 3;
    }
    """
    P = proto_classes(text)["P"]
    schema = {1: Schema(1, "PROTOBUF", text)}
    rows = converter(schema).convert([wire(1, P(b="x"))]).columns
    assert (rows["a"][0].as_py(), rows["b"][0].as_py(), rows["c"][0].as_py()) == (None, "x", None)
    # optional.for.proto2=false: an unset optional scalar has its default, as in Java
    plain = converter(schema, **{"optional.for.proto2": "false"}).convert([wire(1, P(b="x"))])
    assert plain.columns["a"][0].as_py() == 5 and plain.columns["c"][0].as_py() == ""


def test_message_indexes_pick_nested_messages() -> None:
    text = 'syntax = "proto3";\nmessage A { int32 x = 1; message B { string y = 1; } }'
    classes = proto_classes(text)
    conv = converter({1: Schema(1, "PROTOBUF", text)})
    # [0, 0]: A's first nested message, B
    out = conv.convert([wire(1, classes["A.B"](y="b"), b"\x04\x00\x00")])
    assert not out.errors and out.columns["y"].to_pylist() == ["b"]
    past = conv.convert([wire(1, classes["A"](x=1), b"\x02\x08")])
    assert "one message type per schema id" in str(past.errors[0])
    fresh = converter({1: Schema(1, "PROTOBUF", text)}).convert(
        [wire(1, classes["A"](), b"\x02\x08")]
    )
    assert "point past the schema's messages" in str(fresh.errors[0])


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('syntax = "proto3"; message R { R next = 1; }', "contains itself"),
        ('syntax = "proto3"; message E {}', "has no fields"),
        ('syntax = "proto3"; import "acme/x.proto"; message M { int32 a = 1; }', "acme/x.proto"),
        ('syntax = "proto3"; message M { int32 a = 1 }', "not a valid .proto schema"),
        ('syntax = "proto3"; enum Only { A = 0; }', "defines no message"),
    ],
)
def test_schemas_without_column_types_are_refused(text: str, why: str) -> None:
    with pytest.raises(SchemaRefused, match=why):
        ProtobufType.of(text).message((0,))
    out = converter({3: Schema(3, "PROTOBUF", text)}).convert([b"\x00\x00\x00\x00\x03\x00"])
    assert list(out.errors) == [0]
    assert "schema id 3" in str(out.errors[0]) and why in str(out.errors[0])


def test_values_that_do_not_fit_are_errant() -> None:
    text = """
    syntax = "proto3";
    import "google/protobuf/timestamp.proto";
    import "google/type/date.proto";
    import "confluent/meta.proto";
    import "confluent/type/decimal.proto";
    message V {
      google.protobuf.Timestamp at = 1;
      google.type.Date day = 2;
      confluent.type.Decimal price = 3 [(confluent.field_meta) = {
        params: [{key: "precision", value: "4"}, {key: "scale", value: "1"}]
      }];
      Kind kind = 4;
      enum Kind { A = 0; }
    }
    """
    V = proto_classes(text)["V"]
    conv = converter({1: Schema(1, "PROTOBUF", text)})
    ok = V()
    ok.price.value, ok.price.scale = (1234).to_bytes(2, "big"), 1
    bad_nanos = V()
    bad_nanos.at.nanos = -1
    bad_day = V()
    bad_day.day.year, bad_day.day.month, bad_day.day.day = 2024, 2, 30
    too_wide = V()
    too_wide.price.value, too_wide.price.scale = (123456).to_bytes(3, "big"), 1
    empty = V()
    empty.price.scale = 1
    out = conv.convert(
        [
            wire(1, ok),
            wire(1, bad_nanos),
            wire(1, bad_day),
            wire(1, too_wide),
            wire(1, empty),
            b"\x00\x00\x00\x00\x01\x06\x00",
            b"\x00\x00\x00\x00\x01\x00\x0a\x05ab",
            wire(1, V(kind=7)),
        ]
    )
    assert sorted(out.errors) == [1, 2, 3, 4, 5, 6]
    assert "Timestamp is not valid" in str(out.errors[1])
    assert "2024-2-30 is not a valid date" in str(out.errors[2])
    assert "does not fit decimal(4, 1)" in str(out.errors[3])
    assert "Zero length BigInteger" in str(out.errors[4])
    assert "ends inside its message indexes" in str(out.errors[5])
    assert "the Protobuf payload cannot be read" in str(out.errors[6])
    assert out.columns["price"].to_pylist()[0] == decimal.Decimal("123.4")
    assert out.columns["kind"].to_pylist()[7] == "UNKNOWN_ENUM_VALUE_Kind_7"


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"value\.converter\.int\.for\.enums"):
        converter({}, **{"int.for.enums": "yes"})
    problems = converter_problems(
        {
            "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
            "value.converter.schema.registry.url": URL,
            "value.converter.int.for.enum": "true",
            "value.converter.enhanced.protobuf.schema.support": "true",
        }
    )
    assert [p.key for p in problems] == ["value.converter.int.for.enum"], problems
    assert "int.for.enums" in str(problems[0])


def test_a_large_poll_is_read_in_chunks_with_errant_rows_in_place() -> None:
    text = 'syntax = "proto3";\nmessage A { int32 x = 1; }'
    A = proto_classes(text)["A"]
    bad = b"\x00\x00\x00\x00\x01\x00\x0a\x05ab"
    # the first chunk all errant (no column type yet), later chunks mixed
    data = [bad] * 600 + [wire(1, A(x=i)) if i % 100 else bad for i in range(600, 1300)]
    out = converter({1: Schema(1, "PROTOBUF", text)}).convert(data)
    assert sorted(out.errors) == [*range(600), *range(600, 1300, 100)]
    got = out.columns["x"].to_pylist()
    assert got[:600] == [None] * 600
    assert got[600:] == [None if i % 100 == 0 else i for i in range(600, 1300)]


def test_a_duration_is_a_struct_of_its_fields() -> None:
    """Confluent's ProtobufData has no Connect type for ``google.protobuf.Duration`` (only for
    Timestamp, Date, TimeOfDay, Decimal and the wrappers): it is the message it is."""
    text = (
        'syntax = "proto3";\nimport "google/protobuf/duration.proto";\n'
        "message Job { google.protobuf.Duration took = 1; }"
    )
    job = proto_classes(text, "job.proto")["Job"]()
    job.took.seconds, job.took.nanos = 90, 500_000_000
    out = converter({3: Schema(3, "PROTOBUF", text)}).convert([wire(3, job)])
    assert not out.errors
    assert str(out.columns["took"].type) == "struct<seconds: int64, nanos: int32>"
    assert out.columns["took"].to_pylist() == [{"seconds": 90, "nanos": 500_000_000}]
