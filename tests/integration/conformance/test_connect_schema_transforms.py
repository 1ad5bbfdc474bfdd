"""Connect's transforms on values and keys with a schema, against Kafka Connect 4.1's own classes
(issue 30).

The same records, each key and value a JSON envelope (``{"schema": ..., "payload": ...}``), go
through Connect's transforms (``Harness.java``: Connect's ``JsonConverter`` with
``schemas.enable=true`` reads them into a ``Struct`` or a typed value with its schema, as a sink
worker reads them) and through connectd's chain (the same converter setting: a struct's fields
typed columns, a key one typed column). Connect's result is written back with its schema; each
record must come out the same: dropped, refused (Connect's ``DataException``, with its message),
or kept with the same fields, the same types (each column's Arrow type against the field's
Connect schema) and the same values.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from support.connect_jars import chain_of, connect_libs, harness_records, raw_batch, run_harness
from support.connect_jars import one_transform as one

from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.records import RecordBatch
from daemon.connectors.transforms import apply
from daemon.connectors.transforms.java import float32

pytestmark = pytest.mark.integration

_T = "org.apache.kafka.connect.data."


def _f(field: str, kind: str, optional: bool = True, **more: Any) -> dict[str, Any]:
    return {"field": field, "type": kind, "optional": optional, **more}


ADDR = {
    "type": "struct",
    "optional": True,
    "fields": [
        _f("city", "string"),
        _f("zip", "int32"),
        _f("geo", "struct", fields=[_f("lat", "double"), _f("lon", "double")]),
    ],
}
VALUE = {
    "type": "struct",
    "name": "shop.Order",
    "optional": False,
    "fields": [
        _f("id", "int32", optional=False),
        _f("name", "string"),
        _f("price", "double"),
        _f("qty", "int64"),
        _f("small", "int8"),
        _f("mid", "int16"),
        _f("ratio", "float"),
        _f("ok", "boolean"),
        _f("count", "string"),
        _f("blob", "bytes"),
        _f("tags", "array", items={"type": "string", "optional": True}),
        _f("attrs", "map", keys={"type": "string"}, values={"type": "int32", "optional": True}),
        {**ADDR, "field": "addr"},
        _f("at", "int64", name=_T + "Timestamp"),
        _f("day", "int32", name=_T + "Date"),
        _f("stamp", "int64"),
        _f("when", "string"),
    ],
}
KEY = {"type": "struct", "optional": True, "fields": [_f("k", "int32")]}


def _blob(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


PAYLOADS = [
    {
        "id": 1,
        "name": "ann",
        "price": 2.5,
        "qty": 7,
        "small": -3,
        "mid": 300,
        "ratio": 0.25,
        "ok": True,
        "count": "12",
        "blob": _blob("ab"),
        "tags": ["a", None],
        "attrs": {"x": 1, "y": None},
        "addr": {"city": "x", "zip": 9, "geo": {"lat": 1.5, "lon": -2.0}},
        "at": 1_700_000_000_123,
        "day": 19_000,
        "stamp": 1_700_000_000_456,
        "when": "2024-03-05 14:07:09.123",
    },
    {
        "id": -7,
        "name": None,
        "price": None,
        "qty": None,
        "small": None,
        "mid": None,
        "ratio": None,
        "ok": None,
        "count": None,
        "blob": None,
        "tags": None,
        "attrs": None,
        "addr": None,
        "at": None,
        "day": None,
        "stamp": None,
        "when": None,
    },
    {
        "id": 300,
        "name": "c\u00e9",
        "price": 1e10,
        "qty": 2**40 + 5,
        "small": 127,
        "mid": -32768,
        "ratio": 1.5e-7,
        "ok": False,
        "count": "x1",
        "blob": "",
        "tags": [],
        "attrs": {},
        "addr": {"city": None, "zip": None, "geo": None},
        "at": 0,
        "day": -1,
        "stamp": -86_400_001,
        "when": "not a date",
    },
]


def _envelope(schema: dict[str, Any], payload: Any) -> str:
    return json.dumps({"schema": schema, "payload": payload})


def records() -> list[dict[str, Any]]:
    keys: list[str | None] = [
        _envelope(KEY, {"k": 1}),
        _envelope(KEY, {"k": 2}),
        _envelope(KEY, {"k": None}),
    ]
    out = []
    for i, payload in enumerate(PAYLOADS):
        out.append((keys[i], _envelope(VALUE, payload)))
    out.append((_envelope(KEY, {"k": 4}), None))  # a tombstone: no schema, Connect's null
    return harness_records(out)


def chains() -> Iterator[tuple[str, dict[str, str]]]:
    yield (
        "insert-all",
        one(
            "InsertField$Value",
            topic_field="t",
            partition_field="p!",
            offset_field="o?",
            timestamp_field="ts",
            static_field="s",
            static_value="v",
        ),
    )
    yield "insert-key", one("InsertField$Key", topic_field="t", offset_field="o")
    yield "replace-exclude", one("ReplaceField$Value", exclude="name,ok,nope")
    yield "replace-include", one("ReplaceField$Value", include="id,name,addr,nope")
    yield "replace-renames", one("ReplaceField$Value", renames="id:ident,name:who")
    yield "mask", one("MaskField$Value", fields="name,id,price,qty,small,ok,ratio,tags,attrs")
    yield "mask-struct", one("MaskField$Value", fields="addr")
    yield "mask-logical", one("MaskField$Value", fields="at,day")
    yield "mask-text", one("MaskField$Value", fields="name", replacement="***")
    yield "mask-number", one("MaskField$Value", fields="id,price,small", replacement="42")
    yield "mask-key", one("MaskField$Key", fields="k")
    for target in ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string"):
        yield f"cast-{target}", one("Cast$Value", spec=f"id:{target},price:{target},ok:{target}")
        yield f"cast-count-{target}", one("Cast$Value", spec=f"count:{target}")
    yield "cast-narrow", one("Cast$Value", spec="qty:int8,mid:int8,ratio:int16")
    yield "cast-struct", one("Cast$Value", spec="addr:string")
    yield "cast-logical", one("Cast$Value", spec="at:string")
    yield "cast-bytes", one("Cast$Value", spec="blob:string")
    yield "cast-key", one("Cast$Key", spec="k:string")
    yield "extract-top", one("ExtractField$Value", field="id")
    yield "extract-struct", one("ExtractField$Value", field="addr")
    yield "extract-absent", one("ExtractField$Value", field="nope")
    yield (
        "extract-v2-path",
        one("ExtractField$Value", field="addr.geo.lat", field_syntax_version="V2"),
    )
    yield "extract-key", one("ExtractField$Key", field="k")
    yield "hoist", one("HoistField$Value", field="wrapped")
    yield "hoist-key", one("HoistField$Key", field="wrapped")
    yield "flatten", one("Flatten$Value")
    yield "flatten-delimiter", one("Flatten$Value", delimiter="_")
    yield "flatten-key", one("Flatten$Key")
    yield "value-to-key", one("ValueToKey", fields="id,name,addr")
    yield "value-to-key-absent", one("ValueToKey", fields="id,nope")
    stamp = "TimestampConverter$Value"
    iso = "yyyy-MM-dd HH:mm:ss.SSS"
    for target in ("string", "unix", "Date", "Time", "Timestamp"):
        yield f"ts-logical-to-{target}", one(stamp, field="at", target_type=target, format=iso)
        yield f"ts-long-to-{target}", one(stamp, field="stamp", target_type=target, format=iso)
        yield f"ts-string-to-{target}", one(stamp, field="when", target_type=target, format=iso)
    yield "ts-date-to-string", one(stamp, field="day", target_type="string", format=iso)
    yield (
        "header-from",
        one(
            "HeaderFrom$Value", fields="id,name,at,addr,tags", headers="a,b,c,d,e", operation="copy"
        ),
    )
    yield (
        "header-from-move",
        one("HeaderFrom$Value", fields="price,qty", headers="p,q", operation="move"),
    )
    yield "header-from-key", one("HeaderFrom$Key", fields="k", headers="hk", operation="copy")
    yield (
        "ts-date-to-Timestamp",
        one("TimestampConverter$Value", field="day", target_type="Timestamp"),
    )
    yield "set-schema", one("SetSchemaMetadata$Value", schema_name="shop.Renamed")
    yield "set-schema-version", one("SetSchemaMetadata$Value", schema_version="3")
    yield "set-schema-key", one("SetSchemaMetadata$Key", schema_name="shop.Key")
    yield (
        "chain",
        {
            "transforms": "i,m,c,f",
            "transforms.i.type": "InsertField$Value",
            "transforms.i.offset.field": "o",
            "transforms.m.type": "MaskField$Value",
            "transforms.m.fields": "name",
            "transforms.c.type": "Cast$Value",
            "transforms.c.spec": "price:float32",
            "transforms.f.type": "Flatten$Value",
        },
    )


CHAINS = dict(chains())
RECORDS = records()


# ---- connectd's output, written as JsonConverter writes a value with its schema ----

_ARROW = {
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "bytes",
    pa.large_binary(): "bytes",
}


def arrow_kind(t: pa.DataType) -> Any:
    """An Arrow type as the Connect schema type it stands for (see ``connect_kind``)."""
    if t in _ARROW:
        return _ARROW[t]
    if pa.types.is_timestamp(t):
        return "Timestamp"
    if pa.types.is_date32(t):
        return "Date"
    if pa.types.is_time(t):
        return "Time"
    if pa.types.is_decimal(t):
        return "Decimal"
    if pa.types.is_struct(t):
        return ("struct", tuple((f.name, arrow_kind(f.type)) for f in t))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("array", arrow_kind(t.value_type))
    if pa.types.is_map(t):
        return ("map", arrow_kind(t.key_type), arrow_kind(t.item_type))
    return str(t)


def connect_kind(schema: dict[str, Any] | None) -> Any:
    """A Connect schema (JsonConverter's form) as a comparable shape: a logical type by its
    name."""
    if schema is None:
        return None
    name = schema.get("name", "")
    if name.startswith(_T):
        return name.removeprefix(_T)
    kind = schema["type"]
    if kind == "struct":
        return ("struct", tuple((f["field"], connect_kind(f)) for f in schema["fields"]))
    if kind == "array":
        return ("array", connect_kind(schema["items"]))
    if kind == "map":
        return ("map", connect_kind(schema["keys"]), connect_kind(schema["values"]))
    return kind


def payload(value: Any, kind: Any) -> Any:
    """A Python value of connectd's (of the shape ``kind``) as JsonConverter writes the
    Connect value."""
    if value is None:
        return None
    if isinstance(kind, tuple) and kind[0] == "struct":
        shapes = dict(kind[1])
        return {k: payload(v, shapes.get(k)) for k, v in value.items()}
    if isinstance(kind, tuple) and kind[0] == "map":
        return {k: payload(v, kind[2]) for k, v in value}
    if isinstance(kind, tuple) and kind[0] == "array":
        return [payload(v, kind[1]) for v in value]
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + (
            value.microsecond // 1000
        )
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        unscaled = int(value.scaleb(-value.as_tuple().exponent))
        n = max(1, (unscaled.bit_length() + 8) // 8)
        return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()
    if isinstance(value, dict):  # JSON text's map: no shape
        return {k: payload(v, None) for k, v in value.items()}
    if isinstance(value, list):
        return [payload(v, None) for v in value]
    return value


def _side(batch: RecordBatch, side: str) -> tuple[Any, list[Any]]:
    """A side's shape (None: schemaless, JSON text) and its values, row by row."""
    t = batch.table
    if side == "value" and batch.value_columns is not None:
        fields = tuple(
            (name, arrow_kind(t.schema.field(col).type))
            for name, col in batch.value_columns.items()
        )
        return ("struct", fields), batch.value_objects()
    column = side
    values = [r.key if side == "key" else r.value for r in batch.records()]
    if column in batch.json_columns:
        return None, values
    return arrow_kind(t.schema.field(column).type), values


def connectd_output(
    config: dict[str, str],
    records: list[dict[str, Any]] = RECORDS,
    converter: str = "json",
    options: dict[str, str] | None = None,
) -> list[dict[str, Any] | None]:
    raw = raw_batch(records)
    options = {"schemas.enable": "true"} if options is None else options
    converted = convert_poll(
        raw,
        make_converter(converter, options, is_key=True),
        make_converter(converter, options, is_key=False),
    )
    assert not converted.bad, converted.bad
    done = apply(chain_of(config), converted.batch)
    batch = done.batch
    refused = {f.offset: f.message for f in done.failures}
    key_kind, keys = _side(batch, "key")
    value_kind, values = _side(batch, "value")
    kept = list(batch.records())
    rows = {r.offset: i for i, r in enumerate(kept)}
    tombstones = batch.tombstones.to_pylist() if batch.tombstones is not None else None
    out: list[dict[str, Any] | None] = []
    for r in records:
        if r["offset"] in refused:
            out.append({"error": "DataException: " + refused[r["offset"]]})
            continue
        i = rows.get(r["offset"])
        if i is None:
            out.append(None)
            continue
        key, value = keys[i], values[i]
        dead = value is None or (tombstones is not None and tombstones[i])
        out.append(
            {
                "key": None
                if key is None
                else {"kind": key_kind, "payload": payload(key, key_kind)},
                "value": (
                    None if dead else {"kind": value_kind, "payload": payload(value, value_kind)}
                ),
                "headers": [[k, None if v is None else v.decode()] for k, v in kept[i].headers],
            }
        )
    return out


def connect_output(result: dict[str, Any] | None) -> dict[str, Any] | None:
    if result is None or "error" in result:
        return result

    def side(envelope: Any) -> Any:
        if envelope is None or envelope.get("payload") is None:
            return None
        return {"kind": connect_kind(envelope["schema"]), "payload": envelope["payload"]}

    return {
        "key": side(result["key"]),
        "value": side(result["value"]),
        "headers": result["headers"],
    }


@pytest.fixture(scope="module")
def connect() -> dict[str, list[dict[str, Any] | None]]:
    results = run_harness(connect_libs(), [(c, RECORDS) for c in CHAINS.values()], "json-schemas")
    return dict(zip(CHAINS, results, strict=True))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or float32(a) == float32(b) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def _diff(a: Any, b: Any, path: str = "") -> str:
    """Where ``a`` and ``b`` first differ (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} against {sorted(b)}"
        return next((d for k in a if (d := _diff(a[k], b[k], f"{path}.{k}"))), "")
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{path}: {a!r} against {b!r}"
        return next(
            (
                d
                for i, (x, y) in enumerate(zip(a, b, strict=True))
                if (d := _diff(x, y, f"{path}[{i}]"))
            ),
            "",
        )
    return "" if _same(a, b) else f"{path}: {a!r} against {b!r}"


def _documented(expected: Any, have: Any, record: dict[str, Any], case: str) -> tuple[Any, Any]:
    """The two documented differences, taken out before comparing:

    - a refusal is compared by its message: connectd's failures are Connect's
      ``DataException`` (its dead-letter headers say so), where Connect's ExtractField throws
      an ``IllegalArgumentException`` for a field its schema lacks;
    - a tombstone has no schema, so Connect's HoistField makes it a schemaless map; connectd's
      column is typed by the batch's other values and holds the same value;
    - SetSchemaMetadata on a null string, bytes or number (``StringConverter`` gives a null its
      string schema): Connect refuses it, as it refuses every such value (it lists the fields
      of a schema that has none); connectd passes a null through."""
    if isinstance(expected, dict) and isinstance(have, dict) and "error" in expected.keys() & have:
        return expected["error"].split(": ", 1)[1], have["error"].split(": ", 1)[1]
    null_side = record["key" if case.endswith("-Key") else "value"] is None
    refused_null = null_side and "Cannot list fields on non-struct type" in str(expected)
    if refused_null and isinstance(have, dict) and "error" not in have:
        return expected, expected  # the null SetSchemaMetadata passes (above)
    if record["value"] is None and isinstance(expected, dict) and isinstance(have, dict):
        want, got = expected.get("value"), have.get("value")
        if want and got and want["kind"] is None:
            have = {**have, "value": {"kind": None, "payload": got["payload"]}}
    return expected, have


def _absent_as_null(expected: Any, have: Any) -> Any:
    """``have`` without the value fields Connect's record lacks where connectd's row holds
    null in them: a value in columns keeps a column for every field, so a field a transform
    removed from some rows only is null there (the columns form's one difference)."""
    if not (isinstance(expected, dict) and isinstance(have, dict)):
        return have
    want, got = expected.get("value"), have.get("value")
    if not (want and got and isinstance(want["kind"], tuple) and isinstance(got["kind"], tuple)):
        return have
    if want["kind"][0] != "struct" or got["kind"][0] != "struct":
        return have
    names = {name for name, _ in want["kind"][1]}
    extra = {n for n, _ in got["kind"][1] if n not in names and got["payload"].get(n) is None}
    kind = ("struct", tuple((n, k) for n, k in got["kind"][1] if n not in extra))
    body = {n: v for n, v in got["payload"].items() if n not in extra}
    return {**have, "value": {"kind": kind, "payload": body}}


def _compare(
    case: str,
    connect: list[dict[str, Any] | None],
    got: list[dict[str, Any] | None],
    records: list[dict[str, Any]],
) -> None:
    """Record by record, Connect's result against connectd's, the documented differences
    taken out first."""
    for want, have, record in zip(connect, got, records, strict=True):
        expected = connect_output(want)
        expected, have = _documented(expected, _absent_as_null(expected, have), record, case)
        assert _same(expected, have), (
            f"{case} on offset {record['offset']} (Connect against connectd):"
            f" {_diff(expected, have)}"
        )


@pytest.mark.parametrize("case", list(CHAINS))
def test_the_transform_does_to_each_record_with_a_schema_what_connect_does(
    connect: dict[str, list[dict[str, Any] | None]], case: str
) -> None:
    _compare(case, connect[case], connectd_output(CHAINS[case]), RECORDS)


# ---- StringConverter: a string with Connect's optional string schema ----

STRINGS = harness_records(
    [
        ("k1", "abc"),
        ("k2", "12"),
        ("k3", "2024-03-05 14:07:09.123"),
        (None, ""),
        ("k5", None),
        ("k6", "-7"),
    ]
)


def string_chains() -> Iterator[tuple[str, dict[str, str]]]:
    for side in ("Value", "Key"):
        yield f"insert-{side}", one(f"InsertField${side}", topic_field="t")
        yield f"replace-{side}", one(f"ReplaceField${side}", exclude="x")
        yield f"mask-{side}", one(f"MaskField${side}", fields="x")
        yield f"cast-{side}", one(f"Cast${side}", spec="int32")
        yield f"cast-field-{side}", one(f"Cast${side}", spec="x:int32")
        yield f"extract-{side}", one(f"ExtractField${side}", field="x")
        yield f"hoist-{side}", one(f"HoistField${side}", field="wrapped")
        yield f"flatten-{side}", one(f"Flatten${side}")
        yield f"set-schema-{side}", one(f"SetSchemaMetadata${side}", schema_name="n")
        yield (
            f"header-from-{side}",
            one(f"HeaderFrom${side}", fields="x", headers="h", operation="copy"),
        )
    yield "value-to-key", one("ValueToKey", fields="x")
    yield (
        "ts-string-to-unix",
        one("TimestampConverter$Value", target_type="unix", format="yyyy-MM-dd HH:mm:ss.SSS"),
    )


STRING_CHAINS = dict(string_chains())


@pytest.fixture(scope="module")
def connect_strings() -> dict[str, list[dict[str, Any] | None]]:
    results = run_harness(
        connect_libs(), [(c, STRINGS) for c in STRING_CHAINS.values()], "string-converter"
    )
    return dict(zip(STRING_CHAINS, results, strict=True))


@pytest.mark.parametrize("case", list(STRING_CHAINS))
def test_the_transform_does_to_a_string_converter_record_what_connect_does(
    connect_strings: dict[str, list[dict[str, Any] | None]], case: str
) -> None:
    _compare(
        case,
        connect_strings[case],
        connectd_output(STRING_CHAINS[case], STRINGS, "string", {}),
        STRINGS,
    )
