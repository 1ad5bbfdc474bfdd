"""Avro schemas as Arrow types, and Avro record bodies decoded into Arrow arrays.

The Arrow type of each Avro type (``AvroType.of``) is the column type the tables get, and what
Spark reads it as (``docs/connectors.md`` has the table):

================================  ==============================  ===========================
Avro                              Arrow                           Spark
================================  ==============================  ===========================
boolean, int, long                bool, int32, int64              boolean, int, bigint
float, double                     float32, float64                float, double
string, enum, uuid (on string)    string                          string
bytes, fixed                      binary                          binary
record                            struct                          struct
array, map                        list, map<string, …>            array, map
[null, T]                         T (nullable)                    T
[A, B, …] (a general union)       struct<A, B, …>, one set        struct
decimal (bytes or fixed)          decimal128(precision, scale)    decimal(p, s), p ≤ 38
date                              date32                          date
time-millis, time-micros          int32 (ms), int64 (µs)          int, bigint (of the day)
timestamp-millis / -micros        timestamp ms / µs, UTC          timestamp
local-timestamp-millis / -micros  timestamp ms / µs (no zone)     timestamp_ntz
================================  ==============================  ===========================

A general union's struct has one field per branch, named as Confluent's AvroConverter names
them (the primitive's name, or the named type's simple name; the full name with
``enhanced.avro.schema.support=true``, ``connect_union_field_<i>`` with
``generalized.sum.type.support=true``), exactly one of them set. Unknown
logical types are read as their underlying type (the Avro specification's rule). A recursive
record, a decimal wider than 38 digits (Spark's limit) or an invalid schema makes every record
written with that schema errant, with the reason (``SchemaRefused``).

Decoding: a schema of records, primitives, enums, fixed, ``[null, T]`` unions and the
logical types above is read column by column over the whole batch (``columnar.py``, numpy: no
Python step per record). Other schemas (arrays, maps, general unions), and any batch the column
reader finds unexpected bytes in, are read by fastavro (Cython) record by record, with the
logical types Arrow can take from integers left as integers; ``pyarrow.array`` builds the column
in one call and a cast gives the logical types (date, timestamps). Both give the same arrays
(``tests/unit/connectors/test_avro_columnar.py``).
"""

from __future__ import annotations

import copy
import decimal
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from daemon.connectors.converters.layout import column_of
from daemon.connectors.converters.registry import columnar
from daemon.errors import ConversionError

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
#: Logical types read from their integers by fastavro's caller, not by fastavro (the key is
#: (logical type, underlying type)): their Arrow type, cast from the underlying one.
_CAST_LOGICAL: dict[tuple[str, str], pa.DataType] = {
    ("date", "int"): pa.date32(),
    ("time-millis", "int"): pa.int32(),
    ("time-micros", "long"): pa.int64(),
    ("timestamp-millis", "long"): pa.timestamp("ms", tz="UTC"),
    ("timestamp-micros", "long"): pa.timestamp("us", tz="UTC"),
    ("local-timestamp-millis", "long"): pa.timestamp("ms"),
    ("local-timestamp-micros", "long"): pa.timestamp("us"),
    ("uuid", "string"): pa.string(),
}
#: Spark's widest decimal.
MAX_PRECISION = 38


class SchemaRefused(ConversionError):
    """A schema whose records cannot become columns (the message says why)."""


@dataclass(frozen=True)
class Mapped:
    """One Avro type as Arrow: ``arrow`` the column type; ``raw`` what ``pa.array`` builds
    from fastavro's values (cast to ``arrow`` after); ``fix`` turns a value into what ``raw``
    takes (general unions only; ``None``: the value as it is)."""

    arrow: pa.DataType
    raw: pa.DataType
    fix: Callable[[Any], Any] | None = None


class _Walker:
    """Maps one schema (and the named types it may use) to Arrow, and rewrites it for the
    reader (logical types in ``_CAST_LOGICAL`` removed). ``naming``: how a general union's
    branches are named (``_branch_name``)."""

    def __init__(self, naming: str = "simple") -> None:
        self.naming = naming
        self.named: dict[str, Mapped | None] = {}  # None: being defined (a recursion)

    def walk(self, schema: Any, namespace: str) -> tuple[Mapped, Any]:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                t = _PRIMITIVES[schema]
                return Mapped(t, t), schema
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            for name in (full, schema):
                if name in self.named:
                    found = self.named[name]
                    if found is None:
                        raise SchemaRefused(
                            f"record {name} contains itself: a recursive type has no column type"
                        )
                    return found, schema
            raise SchemaRefused(f"unknown type {schema!r}")
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, dict) or "type" not in schema:
            raise SchemaRefused(f"not an Avro schema: {json.dumps(schema)[:200]}")
        kind = schema["type"]
        logical = schema.get("logicalType")
        if isinstance(kind, str) and kind in _PRIMITIVES:
            if logical == "decimal" and kind == "bytes":
                return self._decimal(schema), schema
            cast = _CAST_LOGICAL.get((str(logical), kind))
            if cast is not None:
                stripped = {k: v for k, v in schema.items() if k != "logicalType"}
                return Mapped(cast, _PRIMITIVES[kind]), stripped
            t = _PRIMITIVES[kind]
            return Mapped(t, t), schema
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(schema, namespace)
        if kind == "array":
            inner, items = self.walk(schema.get("items"), namespace)
            fix = None if inner.fix is None else _each(inner.fix)
            return (
                Mapped(pa.list_(inner.arrow), pa.list_(inner.raw), fix),
                {**schema, "items": items},
            )
        if kind == "map":
            inner, values = self.walk(schema.get("values"), namespace)
            fix = None if inner.fix is None else _each_value(inner.fix)
            return (
                Mapped(pa.map_(pa.string(), inner.arrow), pa.map_(pa.string(), inner.raw), fix),
                {**schema, "values": values},
            )
        # {"type": {...}} or {"type": "SomeName"}: the inner schema with these attributes.
        return self.walk(kind, namespace)

    def _named(self, schema: dict[str, Any], namespace: str) -> tuple[Mapped, Any]:
        name = str(schema.get("name", ""))
        space = str(schema.get("namespace", namespace) or "")
        full = name if "." in name or not space else f"{space}.{name}"
        if "." in name:
            space = name.rsplit(".", 1)[0]
        kind = schema["type"]
        if kind == "enum":
            mapped = Mapped(pa.string(), pa.string())
            self.named[full] = self.named[name] = mapped
            return mapped, schema
        if kind == "fixed":
            if schema.get("logicalType") == "decimal":
                mapped = self._decimal(schema)
            else:
                mapped = Mapped(pa.binary(), pa.binary())
            self.named[full] = self.named[name] = mapped
            return mapped, schema
        self.named[full] = None  # being defined: a use inside it is a recursion
        fields, raw_fields, fixes, out = [], [], {}, []
        for f in schema.get("fields", []):
            inner, rewritten = self.walk(f.get("type"), space)
            fname = str(f["name"])
            fields.append(pa.field(fname, inner.arrow))
            raw_fields.append(pa.field(fname, inner.raw))
            if inner.fix is not None:
                fixes[fname] = inner.fix
            out.append({**f, "type": rewritten})
        fix = _fields(fixes) if fixes else None
        mapped = Mapped(pa.struct(fields), pa.struct(raw_fields), fix)
        self.named[full] = self.named[name] = mapped
        return mapped, {**schema, "fields": out}

    def _decimal(self, schema: dict[str, Any]) -> Mapped:
        precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
        if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= precision:
            raise SchemaRefused(
                f"decimal({precision}, {scale}): a column takes a precision of 1 to "
                f"{MAX_PRECISION} (Spark's limit) and a scale of 0 to the precision"
            )
        t = pa.decimal128(precision, scale)
        return Mapped(t, t)

    def _union(self, branches: list[Any], namespace: str) -> tuple[Mapped, Any]:
        mapped, rewritten = [], []
        for b in branches:
            m, r = self.walk(b, namespace)
            mapped.append((b, m))
            rewritten.append(r)
        others = [(b, m) for b, m in mapped if b != "null"]
        if not others:
            return Mapped(pa.null(), pa.null()), rewritten
        if len(others) == 1:
            return others[0][1], rewritten
        names = [
            _branch_name(b, namespace, self.naming, i)
            for i, b in enumerate(branches)
            if b != "null"
        ]
        if len(set(names)) != len(names):
            raise SchemaRefused("Multiple union schemas map to the Connect union field name")
        arrow = pa.struct([pa.field(n, m.arrow) for n, (_, m) in zip(names, others, strict=True)])
        raw = pa.struct([pa.field(n, m.raw) for n, (_, m) in zip(names, others, strict=True)])
        simple = [_branch_name(b, namespace, "simple", 0) for b, _ in others]
        return Mapped(arrow, raw, _union_fix(names, simple, others)), rewritten


def _branch_name(branch: Any, namespace: str, naming: str, index: int) -> str:
    """Confluent's AvroData's field name for a union branch (``unionMemberFieldName``): the
    primitive type's name, or a named type's simple name; its full name with
    ``enhanced.avro.schema.support``; ``connect_union_field_<index>`` with
    ``generalized.sum.type.support``."""
    if naming == "generalized":
        return f"connect_union_field_{index}"
    name: str | None = None
    if isinstance(branch, str) and branch not in _PRIMITIVES:
        name = branch
    elif isinstance(branch, dict) and branch.get("type") in ("record", "error", "enum", "fixed"):
        name = str(branch.get("name", ""))
        namespace = str(branch.get("namespace", namespace) or "")
    if name is None:
        kind = (
            branch
            if isinstance(branch, str)
            else branch.get("type")
            if isinstance(branch, dict)
            else None
        )
        return str(kind.get("type") if isinstance(kind, dict) else kind)
    if naming == "full":
        return name if "." in name or not namespace else f"{namespace}.{name}"
    return name.rsplit(".", 1)[-1]


def _python_types(raw: pa.DataType) -> tuple[type, ...]:
    """The Python types fastavro reads a value of Arrow type ``raw`` as (a record is told apart
    by name instead: ``()``)."""
    if pa.types.is_boolean(raw):
        return (bool,)
    if pa.types.is_integer(raw):
        return (int,)
    if pa.types.is_floating(raw):
        return (float,)
    if pa.types.is_string(raw):
        return (str,)
    if pa.types.is_binary(raw):
        return (bytes,)
    if pa.types.is_decimal(raw):
        return (decimal.Decimal,)
    if pa.types.is_list(raw):
        return (list,)
    if pa.types.is_map(raw):
        return (dict,)
    return ()


def _union_fix(
    names: list[str], simple: list[str], branches: list[tuple[Any, Mapped]]
) -> Callable[[Any], Any]:
    """A general union's value → ``{branch: value}``. fastavro names a record's branch
    (``return_record_name``: a ``(name, value)`` pair); other values go to the first branch of
    their Python type (the writer's branch is not in the decoded value: an int in a union of
    int and long goes to int, as Connect's reader of the same bytes cannot tell either)."""
    kinds = [
        (n, _python_types(m.raw), pa.types.is_struct(m.raw), m.fix)
        for n, (_, m) in zip(names, branches, strict=True)
    ]
    by_simple = {n: sn for n, sn in zip(names, simple, strict=True)}
    records = [k for k in kinds if k[2]]
    # With one record branch fastavro returns the record as a plain dict (the override), which
    # a map branch would return too: the record's field names tell them apart.
    only = records[0] if len(records) == 1 else None
    only_fields = (
        {f.name for f in branches[names.index(only[0])][1].raw} if only is not None else set()
    )
    has_map = any(dict in py for _, py, _, _ in kinds)

    def fix(v: Any) -> Any:
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
            written = v[0].rsplit(".", 1)[-1]
            for n, _, _, f in records:
                if by_simple[n] == written:
                    return {n: f(v[1]) if f is not None else v[1]}
            return None
        if only is not None and type(v) is dict and (not has_map or set(v) == only_fields):
            n, _, _, f = only
            return {n: f(v) if f is not None else v}
        for n, py, _, f in kinds:
            if py and type(v) in py:
                return {n: f(v) if f is not None else v}
        return None

    return fix


def _each(fix: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else [fix(x) for x in v]


def _each_value(fix: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else {k: fix(x) for k, x in v.items()}


def _fields(fixes: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def fix(v: Any) -> Any:
        if v is None:
            return None
        out = dict(v)
        for name, f in fixes.items():
            out[name] = f(out.get(name))
        return out

    return fix


@dataclass(frozen=True)
class AvroType:
    """One registered Avro schema, ready to decode bodies written with it."""

    mapped: Mapped
    reader: Any  # fastavro's parsed schema
    record: bool  # a record: its fields become columns
    #: The column-by-column reader's plan (``columnar.py``), when the schema allows one.
    columns: columnar.Node | None = None

    @classmethod
    def of(
        cls, text: str, references: Sequence[tuple[str, str]] = (), naming: str = "simple"
    ) -> AvroType:
        """The schema ``text`` (with the referenced schemas' texts); ``SchemaRefused``.
        ``naming``: a general union's field names (``simple``, ``full``, ``generalized``)."""
        walker = _Walker(naming)
        named: dict[str, Any] = {}
        try:
            for _, ref in references:
                ref_doc = json.loads(ref)
                _, ref_rewritten = walker.walk(ref_doc, "")
                fastavro.parse_schema(ref_rewritten, named_schemas=named)
            doc = json.loads(text)
            mapped, rewritten = walker.walk(doc, "")
            reader = fastavro.parse_schema(copy.deepcopy(rewritten), named_schemas=named)
        except SchemaRefused:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SchemaRefused(f"not a valid Avro schema: {e}") from e
        except Exception as e:  # fastavro's SchemaParseException and kin
            raise SchemaRefused(f"not a valid Avro schema: {e}") from e
        fast = columnar.plan(rewritten, mapped.raw) if not references else None
        return cls(mapped, reader, pa.types.is_struct(mapped.arrow), fast)

    def decode(
        self, bodies: Sequence[bytes] | columnar.Spans
    ) -> tuple[pa.Array, dict[int, Exception]]:
        """Each body as one value of ``mapped.arrow``; the bodies that cannot be read are null
        and in the errors, by index. Column by column when the schema allows
        (``columnar.py``); record by record with fastavro otherwise, and when the batch holds
        anything the column reader does not expect (fastavro finds the records at fault)."""
        if self.columns is not None:
            spans = bodies if isinstance(bodies, columnar.Spans) else columnar.Spans.of(bodies)
            fast = columnar.decode(self.columns, spans)
            if fast is not None:
                return fast.cast(self.mapped.arrow) if fast.type != self.mapped.arrow else fast, {}
        if isinstance(bodies, columnar.Spans):
            bodies = bodies.bodies()
        values: list[Any] = []
        errors: dict[int, Exception] = {}
        reader, fix = self.reader, self.mapped.fix
        read = fastavro.schemaless_reader
        for i, body in enumerate(bodies):
            try:
                v = read(io.BytesIO(body), reader, None, True, True)
            except Exception as e:  # truncated or corrupt bodies raise many kinds
                errors[i] = ConversionError(f"the Avro payload cannot be read: {_why(e)}")
                v = None
            values.append(fix(v) if fix is not None and v is not None else v)
        m = self.mapped
        return column_of(values, m.raw, m.arrow, errors, what="Avro value"), errors


def _why(e: Exception) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
