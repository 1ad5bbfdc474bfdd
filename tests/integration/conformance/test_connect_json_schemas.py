"""Connect's ``JsonConverter`` with ``schemas.enable=true`` against Kafka Connect 4.1's own class
(issue 31): the same envelopes read by Connect's converter (``Converters.java``, run by the JDK
from Maven Central's jars) and by connectd's, value for value and type for type — primitives with
values of the wrong JSON type (Jackson's rules: a string read as an int is 0), integers cut to
their width, nulls with and without defaults (``replace.null.with.default`` both ways), structs,
arrays, maps with string and other keys, Connect's Decimal (base64 and numeric), Date, Time and
Timestamp, and the envelopes and schemas Connect refuses."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from typing import Any

import pyarrow as pa
import pytest
from support.connect_jars import connect_libs, read_with_connect

from daemon.connectors.converters import make_converter

pytestmark = pytest.mark.integration

JSON = "org.apache.kafka.connect.json.JsonConverter"
D = "org.apache.kafka.connect.data."


def env(schema: Any, payload: Any) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}).encode()


def s(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, **more}


def dec(scale: int, **more: Any) -> dict[str, Any]:
    return s("bytes", name=D + "Decimal", parameters={"scale": str(scale)}, **more)


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


STRUCT = s(
    "struct",
    fields=[
        s("int32", field="id"),
        s("string", field="name", optional=True),
        s("struct", field="inner", optional=True, fields=[s("boolean", field="ok")]),
        s("array", field="tags", items=s("string"), optional=True),
        s("int64", field="n", optional=True, default=7),
    ],
)
CASES: list[bytes] = [
    # primitives, and values of another JSON type (Jackson's intValue/textValue/booleanValue)
    env(s("int8"), 127),
    env(s("int8"), 300),
    env(s("int16"), -40000),
    env(s("int32"), 2**31),
    env(s("int32"), 3.99),
    env(s("int32"), -3.99),
    env(s("int32"), "12"),
    env(s("int32"), True),
    env(s("int64"), 2**63 + 5),
    env(s("int64"), 1e30),
    env(s("float"), 0.1),
    env(s("float"), 16777217),
    env(s("double"), 0.1),
    env(s("double"), 123456789012345678901234567890),
    env(s("double"), "x"),
    env(s("boolean"), True),
    env(s("boolean"), 1),
    env(s("string"), "héllo"),
    env(s("string", optional=True), 5),
    env(s("string"), 5),
    env(s("bytes"), b64(b"\x00\xffab")),
    env(s("bytes"), "not base64!"),
    # nulls, optional, defaults
    env(s("int32"), None),
    env(s("int32", optional=True), None),
    env(s("int32", default=42), None),
    env(s("int32", optional=True, default=42), None),
    env(s("string", optional=True, default="d"), None),
    # structs, arrays, maps
    env(STRUCT, {"id": 1, "name": "a", "inner": {"ok": True}, "tags": ["x", "y"], "n": 3}),
    env(STRUCT, {"id": 2, "extra": "ignored"}),
    env(STRUCT, {"id": 3, "tags": "not a list"}),
    env(STRUCT, {"name": "no id"}),
    env(STRUCT, {"id": 4, "inner": {}}),
    env(STRUCT, [1, 2]),
    env(s("array", items=s("int32")), [1, "2", 3.5, None]),
    env(s("array", items=s("int32", optional=True)), [1, None]),
    env(s("map", keys=s("string"), values=s("int64")), {"b": 2, "a": 1}),
    env(s("map", keys=s("string"), values=s("int64")), [["a", 1]]),
    env(s("map", keys=s("int32"), values=s("string")), [[2, "two"], [1, "one"]]),
    env(s("map", keys=s("int32"), values=s("string")), [[1]]),
    env(s("map", keys=s("int32"), values=s("string")), [5]),
    env(s("map", keys=s("int32"), values=s("string")), {"1": "x"}),
    # logical types
    env(dec(2), b64((12345).to_bytes(2, "big", signed=True))),
    env(dec(2), b64((-1).to_bytes(1, "big", signed=True))),
    env(dec(3), 1.5),
    env(dec(0), 42),
    env(dec(2), True),
    env(s("bytes", name=D + "Decimal"), b64(b"\x01")),
    env(s("int32", name=D + "Date"), 19000),
    env(s("int32", name=D + "Date"), "2024-01-01"),
    env(s("int32", name=D + "Time"), 3_600_000),
    env(s("int64", name=D + "Timestamp"), 1_700_000_000_123),
    env(s("int64", name=D + "Timestamp"), 1.5),
    env(
        s(
            "struct",
            fields=[
                {**dec(1), "field": "price"},
                {**s("int64", name=D + "Timestamp"), "field": "at"},
            ],
        ),
        {"price": b64(b"\x00\x7b"), "at": 5},
    ),
    # envelopes and schemas Connect refuses
    b'{"payload": 1}',
    b'{"schema": {"type": "int32"}, "payload": 1, "extra": 0}',
    b"[1]",
    env({"optional": True}, 1),
    env(s("nope"), 1),
    env(s("array"), [1]),
    env(s("map", keys=s("string")), {}),
    env(s("struct", fields={"a": 1}), {}),
    env(s("struct", fields=[{"type": "int32"}]), {}),
    env(s("struct", fields=[s("int32", field="a"), s("int32", field="a")]), {"a": 1}),
    env(s("int32", parameters={"p": 1}), 1),
]
#: Cases Connect reads and connectd makes errant on purpose, with connectd's message: a Decimal
#: whose value has more decimal places than the schema's scale goes to the sink unchanged in
#: Connect, where a sink that writes a decimal of that scale fails on it; connectd's column is
#: decimal(38, scale).
DEVIATIONS = {env(dec(2), 1.234): "does not fit decimal(38, 2)"}
CASES += list(DEVIATIONS)


def _render(value: Any, t: pa.DataType) -> Any:
    """connectd's value as ``Converters.java`` renders Connect's."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: _render(value.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        pairs = [[_render(k, t.key_type), _render(v, t.item_type)] for k, v in value]
        return sorted(pairs, key=lambda p: json.dumps(p[0], separators=(",", ":")))
    if pa.types.is_list(t):
        return [_render(v, t.value_type) for v in value]
    if pa.types.is_decimal(t):
        return {"decimal": format(value, "f")}
    if pa.types.is_date(t):
        return {"date": (value - datetime.date(1970, 1, 1)).days}
    if pa.types.is_timestamp(t):
        return {"timestamp": int(value.timestamp() * 1000)}
    if pa.types.is_binary(t):
        return {"bytes": b64(value)}
    if pa.types.is_float32(t):
        return {"float": value}
    return value


def _expected_type(schema: dict[str, Any]) -> pa.DataType:
    """The column type connectd's docs give Connect's schema."""
    name = schema.get("name")
    if name == D + "Decimal":
        params = schema["parameters"]
        return pa.decimal128(int(params.get("connect.decimal.precision", 38)), int(params["scale"]))
    if name == D + "Date":
        return pa.date32()
    if name == D + "Timestamp":
        return pa.timestamp("ms", tz="UTC")
    if name == D + "Time":
        return pa.int32()
    kind = schema["type"]
    if kind == "STRUCT":
        return pa.struct([pa.field(f["field"], _expected_type(f)) for f in schema["fields"]])
    if kind == "ARRAY":
        return pa.list_(_expected_type(schema["items"]))
    if kind == "MAP":
        return pa.map_(_expected_type(schema["keys"]), _expected_type(schema["values"]))
    return {
        "INT8": pa.int8(),
        "INT16": pa.int16(),
        "INT32": pa.int32(),
        "INT64": pa.int64(),
        "FLOAT32": pa.float32(),
        "FLOAT64": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "STRING": pa.string(),
        "BYTES": pa.binary(),
    }[kind]


def _connectd(data: bytes, options: dict[str, str], is_key: bool) -> tuple[Any, Any, str | None]:
    """(rendered value, column type, error) of one record through connectd's converter."""
    conv = make_converter("json", options, is_key=is_key)
    out = conv.convert([data])
    if 0 in out.errors:
        return None, None, str(out.errors[0])
    side = "key" if is_key else "value"
    if out.value_columns is not None:  # a struct: a column per field
        t = pa.struct([pa.field(f, out.columns[c].type) for f, c in out.value_columns.items()])
        if out.tombstones is not None and out.tombstones[0].as_py():
            return None, t, None
        row = {f: out.columns[c][0].as_py() for f, c in out.value_columns.items()}
        return _render(row, t), t, None
    column = out.columns[side]
    return _render(column[0].as_py(), column.type), column.type, None


def _as_columns(want: Any) -> Any:
    """Connect's rendering with a Time as what its column holds: the milliseconds of the day."""
    if isinstance(want, dict):
        if set(want) == {"time"}:
            return want["time"]
        return {k: _as_columns(v) for k, v in want.items()}
    if isinstance(want, list):
        return [_as_columns(v) for v in want]
    return want


def _same_decimal(want: Any, got: Any) -> bool:
    """Decimals compare by value: Connect keeps a numeric payload's own scale, connectd the
    schema's (``1.5`` and ``1.500``)."""
    if isinstance(want, dict) and isinstance(got, dict) and set(want) == set(got) == {"decimal"}:
        return decimal.Decimal(want["decimal"]) == decimal.Decimal(got["decimal"])
    if isinstance(want, dict) and isinstance(got, dict) and set(want) == set(got):
        return all(_same_decimal(want[k], got[k]) for k in want)
    return bool(want == got)


@pytest.mark.parametrize("replace", ["true", "false"])
@pytest.mark.parametrize("is_key", [False, True])
def test_json_envelopes_read_as_connect_reads_them(replace: str, is_key: bool) -> None:
    options = {"replace.null.with.default": replace}
    connect = read_with_connect(connect_libs(), [(JSON, is_key, d) for d in CASES], options)
    for data, want in zip(CASES, connect, strict=True):
        got, column_type, error = _connectd(data, options, is_key)
        if data in DEVIATIONS:
            assert "error" not in want and error is not None and DEVIATIONS[data] in error
            continue
        if "error" in want:
            assert error is not None, (data, want, got)
            # Connect's message and its cause's, run together: the message's start is Connect's.
            assert error[:19] == str(want["error"])[:19], (data, want, error)
            continue
        assert error is None, (data, want, error)
        assert _same_decimal(_as_columns(want["typed"]), got), (data, want["typed"], got)
        if want["schema"] is not None and got is not None:
            assert column_type == _expected_type(want["schema"]), (data, column_type)
