"""Connect's JSON schemas (``JsonConverter`` with ``schemas.enable=true``): the envelope's
``schema`` types the columns, and each ``payload`` is read as Connect's ``JsonConverter`` reads
it (``asConnectSchema`` and ``convertToConnect`` in connect-json), checked against Connect's own
class (``tests/integration/conformance/test_connect_json_schemas.py``).

Column types:

===========================================  ==========================  ===================
Connect schema                               column (Arrow)              Spark
===========================================  ==========================  ===================
``int8``, ``int16``, ``int32``, ``int64``    int8 … int64                tinyint … bigint
``float``, ``double``                        float32, float64            float, double
``boolean``, ``string``, ``bytes``           bool, string, binary        boolean, string, binary
``array``, ``map``, ``struct``               list, map, struct           array, map, struct
``org.apache.kafka.connect.data.Decimal``    decimal128(p, scale)        decimal(p, scale)
``org.apache.kafka.connect.data.Date``       date32                      date
``org.apache.kafka.connect.data.Time``       int32 (ms of the day)       int
``org.apache.kafka.connect.data.Timestamp``  timestamp[ms, UTC]          timestamp
===========================================  ==========================  ===================

A Decimal's precision is its ``connect.decimal.precision`` parameter when the schema has one,
else 38 (Spark's widest); a value with more digits, or more decimal places than the scale, is
errant (Connect hands the sink such a value, and a sink that writes the Decimal fails then).

Values, as Connect reads them (Jackson's rules): a number read as an integer type is cut to it
(``(byte) intValue()``: a double truncated, a long's low bits), a non-number is 0 (``false``
for a boolean); a non-text for a string or bytes is null; an array of a non-array is empty; a
null (or absent) value takes the schema's ``default`` when ``replace.null.with.default`` is
true (the default), else null if ``optional``, else the record is errant (``Invalid null value
for required INT32 field``). Floats are parsed exactly (Connect reads them as BigDecimal).
``decimal.format`` only shapes what a converter writes, so a sink's reading ignores it, in
Connect as here.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from daemon.errors import ConversionError

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_CONNECT_TYPE = {
    "boolean": "BOOLEAN",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float": "FLOAT32",
    "double": "FLOAT64",
    "bytes": "BYTES",
    "string": "STRING",
    "array": "ARRAY",
    "map": "MAP",
    "struct": "STRUCT",
}


def loads(text: str) -> Any:
    """JSON as Connect's JsonConverter parses it: numbers with a fraction or an exponent are
    exact decimals (``USE_BIG_DECIMAL_FOR_FLOATS``); NaN and Infinity are refused."""
    return json.loads(text, parse_float=decimal.Decimal, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def node_type(v: Any) -> str:
    """Jackson's ``JsonNodeType`` name of a parsed value (what Connect's messages say)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int | float | decimal.Decimal):
        return "NUMBER"
    if isinstance(v, str):
        return "STRING"
    return "ARRAY" if isinstance(v, list) else "OBJECT"


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | decimal.Decimal) and not isinstance(v, bool)


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _java_long(v: Any) -> int:
    """Jackson's ``longValue()``: an integer's low 64 bits; a decimal truncated toward zero and
    then cut (``BigDecimal.longValue``); 0 for a non-number."""
    if not _is_number(v):
        return 0
    return _wrap(int(v), 64)


def _java_int(v: Any) -> int:
    """Jackson's ``intValue()``: the low 32 bits, as ``_java_long``."""
    return _wrap(_java_long(v), 32) if _is_number(v) else 0


@dataclass(frozen=True)
class Typed:
    """One Connect schema: the column type, and ``read`` (a parsed JSON value → what
    ``pa.array(raw)`` takes; ``ConversionError`` with Connect's message)."""

    arrow: pa.DataType
    raw: pa.DataType
    read: Callable[[Any], Any]
    optional: bool
    kind: str  # Connect's type name, as its messages write it: INT32, STRUCT, ...


@dataclass(frozen=True)
class Rules:
    """How nulls are read. Connect's JsonConverter: a null or absent value takes the default
    when ``replace`` (``replace.null.with.default``), else null if optional, else the record is
    errant. Confluent's JSON Schema reading (``absent_is_null``): an absent property is null
    even in a required field, an explicit null takes the default, and a required struct field
    left null is no error."""

    replace: bool = True
    absent_is_null: bool = False


#: Marks a struct schema as Confluent's JSON Schema union (``registry/jsonschema.py``): read
#: by choosing an alternative, not field by field. Never in a Connect envelope's schema.
UNION = "connectd.union"

#: A struct's property that the JSON object does not have (Jackson's ``get`` gives Java null).
_ABSENT = object()


def schema_of(doc: Any, replace_null_with_default: bool = True) -> Typed | None:
    """The ``Typed`` of an envelope's ``schema`` (None for a null schema: the payload is then
    read without one); ``ConversionError`` with Connect's message for an invalid one."""
    if doc is None:
        return None
    return typed_schema(doc, Rules(replace_null_with_default))


def typed_schema(doc: Any, rules: Rules) -> Typed:
    """The ``Typed`` of a Connect schema (the envelope's form) read with ``rules``;
    ``ConversionError`` with Connect's message for an invalid one."""
    return _schema(doc, rules)


def _schema(doc: Any, rules: Rules) -> Typed:
    if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
        raise ConversionError("Schema must contain 'type' field")
    kind = doc["type"]
    optional = doc.get("optional") is True
    name = doc.get("name") if isinstance(doc.get("name"), str) else None
    params = doc.get("parameters")
    if isinstance(params, dict) and any(not isinstance(v, str) for v in params.values()):
        raise ConversionError("Schema parameters must have string values.")
    params = params if isinstance(params, dict) else {}
    arrow: pa.DataType
    raw: pa.DataType
    if kind in _PRIMITIVES:
        arrow = raw = _PRIMITIVES[kind]
        value = _primitive(kind)
        if name == DECIMAL:
            arrow, raw, value = _decimal(params)
        elif name == DATE:
            arrow, raw, value = pa.date32(), pa.int32(), _logical_int("Date", 32)
        elif name == TIME:
            arrow, raw, value = pa.int32(), pa.int32(), _logical_int("Time", 32)
        elif name == TIMESTAMP:
            arrow, raw, value = pa.timestamp("ms", tz="UTC"), pa.int64(), _timestamp
    elif kind == "array":
        items = doc.get("items")
        if items is None:
            raise ConversionError("Array schema did not specify the element type")
        inner = _schema(items, rules)
        arrow, raw = pa.list_(inner.arrow), pa.list_(inner.raw)
        value = _array(inner)
    elif kind == "map":
        if "keys" not in doc:
            raise ConversionError("Map schema did not specify the key type")
        if "values" not in doc:
            raise ConversionError("Map schema did not specify the value type")
        keys, values = _schema(doc["keys"], rules), _schema(doc["values"], rules)
        arrow = pa.map_(keys.arrow, values.arrow)
        raw = pa.map_(keys.raw, values.raw)
        value = _map(keys, values)
    elif kind == "struct":
        fields = doc.get("fields")
        if not isinstance(fields, list):
            raise ConversionError('Struct schema\'s "fields" argument is not an array.')
        typed: list[tuple[str, Typed]] = []
        for f in fields:
            fname = f.get("field") if isinstance(f, dict) else None
            if not isinstance(fname, str):
                raise ConversionError("Struct schema's field name not specified properly")
            if any(fname == n for n, _ in typed):
                raise ConversionError(
                    f"Cannot create field because of field name duplication {fname}"
                )
            typed.append((fname, _schema(f, rules)))
        arrow = pa.struct([pa.field(n, t.arrow) for n, t in typed])
        raw = pa.struct([pa.field(n, t.raw) for n, t in typed])
        if doc.get(UNION) is True:
            value = _union([(n, t, f) for (n, t), f in zip(typed, fields, strict=True)])
        else:
            value = _struct(typed, rules)
    else:
        raise ConversionError(f"Unknown schema type: {kind}")
    base = Typed(arrow, raw, value, optional, _CONNECT_TYPE[kind])
    default = None
    if "default" in doc and doc["default"] is not None:
        default = _nullable(base, None, rules)(doc["default"])
    return Typed(arrow, raw, _nullable(base, default, rules), optional, base.kind)


def _nullable(t: Typed, default: Any, rules: Rules) -> Callable[[Any], Any]:
    read, optional, kind = t.read, t.optional, t.kind
    replace, absent_is_null = rules.replace, rules.absent_is_null

    def value(v: Any) -> Any:
        absent = v is _ABSENT
        if absent or v is None:
            if default is not None and replace:
                return default
            if optional or (absent and absent_is_null):
                return None
            raise ConversionError(f"Invalid null value for required {kind} field")
        return read(v)

    return value


def _primitive(kind: str) -> Callable[[Any], Any]:
    if kind == "boolean":
        return lambda v: v if isinstance(v, bool) else False
    if kind in ("int8", "int16", "int32"):
        bits = {"int8": 8, "int16": 16, "int32": 32}[kind]
        return lambda v: _wrap(_java_int(v), bits)
    if kind == "int64":
        return _java_long
    if kind == "float":
        return lambda v: _float32(v) if _is_number(v) else 0.0
    if kind == "double":
        return lambda v: float(v) if _is_number(v) else 0.0
    if kind == "string":
        return lambda v: v if isinstance(v, str) else None
    return _bytes


def _float32(v: Any) -> float:
    """Java's ``floatValue()`` of a number: rounded once to the nearest float32 (from a decimal
    through its exact value)."""
    try:
        f = float(v)
        return float(struct.unpack("f", struct.pack("f", f))[0])
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def _bytes(v: Any) -> bytes | None:
    if not isinstance(v, str):
        return None
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ConversionError(f"Invalid bytes field: {e}") from e


def _decimal(params: dict[str, str]) -> tuple[pa.DataType, pa.DataType, Callable[[Any], Any]]:
    if "scale" not in params:
        # Connect fails each value then (a null parameters map): a column needs the scale.
        raise ConversionError("Invalid bytes for Decimal field: the schema has no scale parameter")
    try:
        scale = int(params["scale"])
        precision = int(params.get("connect.decimal.precision", "38"))
    except ValueError as e:
        raise ConversionError(f"Invalid Decimal schema: {e}") from e
    if not 0 <= scale <= precision <= 38:
        raise ConversionError(
            f"Decimal with scale {scale} and precision {precision}: a column takes a precision "
            "of 1 to 38 (Spark's limit) and a scale of 0 to the precision"
        )
    t = pa.decimal128(precision, scale)
    quantum = decimal.Decimal(1).scaleb(-scale)
    limit = decimal.Decimal(10) ** (precision - scale)

    def value(v: Any) -> decimal.Decimal:
        if _is_number(v):
            d = decimal.Decimal(v) if not isinstance(v, float) else decimal.Decimal(repr(v))
        elif isinstance(v, str):
            raw = _bytes(v) or b""
            d = decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
        else:
            raise ConversionError(
                "Invalid type for Decimal, underlying representation should be numeric or "
                f"bytes but was {node_type(v)}"
            )
        fitted = d.quantize(quantum, context=decimal.Context(prec=80))
        if fitted != d or abs(fitted) >= limit:
            raise ConversionError(
                f"Decimal {d} does not fit decimal({precision}, {scale}) (its column)"
            )
        return fitted

    return t, t, value


def _logical_int(name: str, bits: int) -> Callable[[Any], int]:
    def value(v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not -(2**31) <= v < 2**31:
            raise ConversionError(
                f"Invalid type for {name}, underlying representation should be integer but "
                f"was {node_type(v)}"
            )
        return v

    return value


def _timestamp(v: Any) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ConversionError(
            "Invalid type for Timestamp, underlying representation should be integral but was "
            f"{node_type(v)}"
        )
    return _wrap(v, 64)


def _array(inner: Typed) -> Callable[[Any], Any]:
    read = inner.read
    return lambda v: [read(x) for x in v] if isinstance(v, list) else []


def _map(keys: Typed, values: Typed) -> Callable[[Any], Any]:
    rk, rv = keys.read, values.read
    text_keys = keys.kind == "STRING"

    def value(v: Any) -> Any:
        if text_keys:
            if not isinstance(v, dict):
                raise ConversionError(
                    "Maps with string fields should be encoded as JSON objects, but found "
                    + node_type(v)
                )
            return [(k, rv(x)) for k, x in v.items()]
        if not isinstance(v, list):
            raise ConversionError(
                "Maps with non-string fields should be encoded as JSON array of tuples, but "
                "found " + node_type(v)
            )
        out = {}
        for entry in v:
            if not isinstance(entry, list):
                raise ConversionError(
                    f"Found invalid map entry instead of array tuple: {node_type(entry)}"
                )
            if len(entry) != 2:
                raise ConversionError(
                    f"Found invalid map entry, expected length 2 but found :{len(entry)}"
                )
            out[rk(entry[0])] = rv(entry[1])
        return list(out.items())

    return value


def _union(fields: list[tuple[str, Typed, dict[str, Any]]]) -> Callable[[Any], Any]:
    """Confluent's union struct read from a JSON value (``JsonSchemaData.toConnectData``): the
    first alternative the value is an instance of; else, for an object, the struct alternative
    sharing the most property names with it (nested structs counted too)."""
    names = [name for name, _, _ in fields]

    def value(v: Any) -> Any:
        best: tuple[str, Typed] | None = None
        most = 0
        for name, t, doc in fields:
            if _instance_of(t.kind, v):
                return {**dict.fromkeys(names), name: t.read(v)}
            shared = _shared_properties(doc, v)
            if shared > most:
                best, most = (name, t), shared
        if best is None:
            raise ConversionError("Did not find matching oneof field for data")
        return {**dict.fromkeys(names), best[0]: best[1].read(v)}

    return value


def _instance_of(kind: str, v: Any) -> bool:
    """``JsonSchemaData.isInstanceOfSchemaTypeForSimpleSchema`` (a struct: never)."""
    if kind in ("INT8", "INT16", "INT32", "INT64"):
        return isinstance(v, int) and not isinstance(v, bool)
    if kind in ("FLOAT32", "FLOAT64"):
        return _is_number(v)
    if kind == "BOOLEAN":
        return isinstance(v, bool)
    if kind == "STRING":
        return isinstance(v, str)
    if kind == "BYTES":
        return isinstance(v, decimal.Decimal)  # a binary node never comes from JSON text
    if kind == "ARRAY":
        return isinstance(v, list)
    if kind == "MAP":
        return isinstance(v, dict | list)
    return False


def _shared_properties(doc: dict[str, Any], v: Any) -> int:
    """``JsonSchemaData.matchStructSchema``: the struct's fields the object has, plus the same
    count for each of those that is a struct itself."""
    if doc.get("type") != "struct" or not isinstance(v, dict):
        return 0
    children = {f["field"]: f for f in doc.get("fields") or () if isinstance(f, dict)}
    shared = [name for name in children if name in v]
    return len(shared) + sum(_shared_properties(children[n], v[n]) for n in shared)


def _struct(fields: list[tuple[str, Typed]], rules: Rules) -> Callable[[Any], Any]:
    strict = not rules.absent_is_null

    def value(v: Any) -> Any:
        if not isinstance(v, dict):
            raise ConversionError(
                f"Structs should be encoded as JSON objects, but found {node_type(v)}"
            )
        out = {}
        for name, t in fields:
            got = t.read(v.get(name, _ABSENT))
            if got is None and not t.optional and strict:
                raise ConversionError(
                    f'Invalid value: null used for required field: "{name}", schema type: {t.kind}'
                )
            out[name] = got
        return out

    return value
