"""Connect's ``JsonConverter``: JSON text, or fields projected into columns."""

from __future__ import annotations

import decimal
import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from daemon.connectors.converters import connectschema
from daemon.connectors.converters.base import (
    Converted,
    Converter,
    flag_option,
    positive_option,
)
from daemon.connectors.converters.layout import Group, TypedLayout, column_of
from daemon.connectors.converters.text import decode_each, decode_text, string_array
from daemon.connectors.records import value_column_names
from daemon.errors import ConfigError, ConversionError


class JsonMode(enum.StrEnum):
    """How ``JsonConverter`` lays a value out (option ``mode``).

    ``text``: one ``string`` column holding the JSON text. ``fields``: the fields named in
    option ``fields``, one column each. ``infer``: every top-level field, one column each.
    """

    TEXT = "text"
    FIELDS = "fields"
    INFER = "infer"


#: Column kinds of projected JSON fields; ``json`` keeps a nested object or array as JSON text.
_ARROW_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int64": pa.int64(),
    "double": pa.float64(),
    "string": pa.string(),
    "json": pa.string(),
}
_TYPE_ALIASES = {
    **dict.fromkeys(("bool", "boolean"), "boolean"),
    **dict.fromkeys(("int", "integer", "long", "int64"), "int64"),
    **dict.fromkeys(("float", "double", "float64"), "double"),
    **dict.fromkeys(("str", "string"), "string"),
    "json": "json",
}
_ENVELOPE_HINT = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
    "contain additional fields; for plain JSON set schemas.enable=false"
)


def _kind(v: Any) -> str | None:
    """The column kind of a decoded JSON value (``None`` for null)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "double"
    return "string" if isinstance(v, str) else "json"


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    """Strict JSON: NaN and Infinity are refused, as Jackson (Connect) and Arrow refuse them."""
    return json.loads(text, parse_constant=_no_constants)


def json_text(doc: Any) -> str:
    """Compact JSON text, UTF-8 kept: how a value's JSON is written back (the transforms too);
    a decimal (``connectschema.loads`` reads numbers so) with its digits as written."""
    try:
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    except TypeError:  # a decimal: written by hand below
        pass
    if isinstance(doc, dict):
        return (
            "{"
            + ",".join(
                f"{json.dumps(k, ensure_ascii=False)}:{json_text(v)}" for k, v in doc.items()
            )
            + "}"
        )
    if isinstance(doc, list):
        return "[" + ",".join(json_text(v) for v in doc) + "]"
    if isinstance(doc, bool) or doc is None:
        return json.dumps(doc)
    if isinstance(doc, int | decimal.Decimal):
        return str(doc)
    return json.dumps(doc, ensure_ascii=False)


class JsonConverter(Converter):
    """Connect's ``JsonConverter``. Options (``<side>.converter.`` prefix stripped):

    - ``schemas.enable`` (default ``true``, as in Connect): each value is an envelope
      ``{"schema": ..., "payload": ...}``; anything else is a bad record. The envelope's schema
      types the columns and its payload is read as Connect reads it (``connectschema.py``): a
      struct value gets a typed column per field, any other value (and every key) one typed
      column, Connect's Decimal, Date, Time and Timestamp decoded. ``mode=text`` keeps the
      payload as JSON text instead; ``mode=fields`` (``fields=a,b``) keeps the fields listed.
      ``replace.null.with.default`` (default ``true``): a null takes the schema's default.
      ``decimal.format`` (``BASE64``/``NUMERIC``) shapes what Connect writes, not what it reads:
      accepted, and both forms are read. ``schemas.cache.size`` (default 1000).
    - ``mode`` = ``text`` (the default without envelopes) | ``fields`` | ``infer`` (see
      ``JsonMode``; not for keys). ``fields=a,b:int64,c`` lists the fields of ``fields`` mode
      and optionally their types (boolean, int64, double, string, json; without envelopes);
      giving ``fields`` implies ``mode=fields``.
    - ``parser`` = ``auto`` (default: ``pyarrow.json`` when it can, see below) | ``python``.

    Field columns: a field gets a column from the first batch where it has a non-null value (or
    from the start if its type is given); the first type seen wins for good, and a later record
    with another type is a bad record (an integer in a ``double`` column is fine). Nested
    objects and arrays are kept as JSON text. A field named like a reserved column (``key``,
    ``value``, ``headers``, ``kafka_*``) becomes column ``value_<name>``.

    JSON must be UTF-8, with no NaN/Infinity. Speed: with ``schemas.enable=false`` and (in
    ``fields``/``infer`` mode) only flat fields of known types, the batch is joined into one
    newline-delimited buffer parsed by ``pyarrow.json`` (C++, releases the GIL; 100k flat
    records in ~0.1 s against ~0.4-0.6 s with ``json.loads``). Only batches whose every value
    starts with ``{`` go there. Any parse error, new field or type mismatch falls back to
    ``json.loads`` record by record, which finds the bad records and is the reference
    behaviour.
    """

    settings = (
        "schemas.enable",
        "schemas.cache.size",
        "decimal.format",
        "replace.null.with.default",
        "mode",
        "fields",
        "parser",
    )

    connect_name = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self) -> None:
        super().__init__()
        self.schemas_enable = True
        #: Envelopes' schemas type the columns (``schemas.enable`` and no ``mode=text``).
        self.typed = False
        self.replace_null_with_default = True
        self._schemas: dict[str, connectschema.Typed | Exception | None] = {}
        self._cache_size = 1000
        self._layout = TypedLayout("value")
        self.use_pyarrow = True
        self.mode = JsonMode.TEXT
        self._types: dict[str, str] = {}  # field -> kind; first seen wins; order = column order
        self._wanted: list[str] = []  # fields mode: the fields asked for

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        prefix = f"{self.side}.converter."
        self.schemas_enable = flag_option(options, "schemas.enable", True, prefix)
        parser = options.get("parser", "auto").strip().lower()
        if parser not in ("auto", "python"):
            raise ConfigError(f"{prefix}parser: {parser!r} is not auto or python")
        self.use_pyarrow = parser == "auto"
        fields = [f.strip() for f in options.get("fields", "").split(",") if f.strip()]
        mode = options.get("mode", "fields" if fields else "text").strip().lower()
        try:
            self.mode = JsonMode(mode)
        except ValueError:
            raise ConfigError(f"{prefix}mode: {mode!r} is not one of text, fields, infer") from None
        if self.mode is not JsonMode.TEXT and is_key:
            raise ConfigError(f"{prefix}mode: keys are converted in text mode only")
        if self.mode is JsonMode.FIELDS and not fields:
            raise ConfigError(f"{prefix}fields: mode=fields needs a list, e.g. fields=id,name")
        self.typed = self.schemas_enable and (
            ("mode" not in options and not fields) or mode != "text"
        )
        self._layout = TypedLayout(self.side)
        self.replace_null_with_default = flag_option(
            options, "replace.null.with.default", True, prefix
        )
        fmt = options.get("decimal.format", "BASE64").strip().upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigError(f"{prefix}decimal.format: {fmt!r} is not BASE64 or NUMERIC")
        self._cache_size = positive_option(options, "schemas.cache.size", 1000, prefix)
        for spec in fields:
            name, _, typ = (part.strip() for part in spec.partition(":"))
            if typ:
                if typ.lower() not in _TYPE_ALIASES:
                    raise ConfigError(
                        f"{prefix}fields: unknown type {typ!r} for {name!r}; "
                        "use boolean, int64, double, string or json"
                    )
                self._types[name] = _TYPE_ALIASES[typ.lower()]
            self._wanted.append(name)

    @property
    def columns(self) -> dict[str, str]:
        """Value fields with a column so far → column names, in column order."""
        return value_column_names(self._types)

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        if self.typed:
            return self._typed(data)
        fast = None if self.schemas_enable or not self.use_pyarrow else self._fast(data)
        return fast if fast is not None else self._slow(data)

    def _fast(self, data: Sequence[bytes | None]) -> Converted | None:
        """The ``pyarrow.json`` path, or ``None`` when only the reference path can decide."""
        if self.mode is not JsonMode.TEXT:
            learnt = all(f in self._types for f in self._wanted) and bool(self._types)
            if not learnt or "json" in self._types.values():
                return None
        values = pa.array(data, pa.binary())  # once: the text below, the nulls' places after
        nulls = values.null_count
        if nulls == len(values):
            return None
        present: Sequence[bytes] = (
            [v for v in data if v is not None] if nulls else cast("Sequence[bytes]", data)
        )
        # Only objects: a bare `null` line crashes pyarrow's parser (apache/arrow#47409) and
        # other non-objects are refused by it anyway. And valid UTF-8 only: the parser does not
        # check the bytes inside strings (text mode checks them below, record by record).
        blob = values.drop_null() if nulls else values
        if not pc.all(pc.starts_with(blob, pattern="{")).as_py():
            return None
        if self.mode is not JsonMode.TEXT:
            try:
                blob.cast(pa.string())
            except pa.ArrowInvalid:
                return None
        # The checks below hold the interpreter lock, so they scan with memchr (a one-byte
        # needle) where they can: a multi-byte `in` over a poll's 2 MB took 3.3 ms, memchr 0.03.
        body = b"".join(present)
        if b"\n" in body:
            return None  # a value spans lines: line-delimited parsing would misalign rows
        # pyarrow accepts these non-JSON numbers; the reference path refuses them. Neither can be
        # there without its capital letter; and as every value starts with `{`, none can span
        # two values of `body`.
        if (b"N" in body and b"NaN" in body) or (b"I" in body and b"Infinity" in body):
            return None
        buf = b"\n".join(present)
        options = pj.ParseOptions()
        if self.mode is not JsonMode.TEXT:
            schema = pa.schema([(f, _ARROW_TYPES[k]) for f, k in self._types.items()])
            unexpected = "ignore" if self.mode is JsonMode.FIELDS else "error"
            options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior=unexpected)
        try:
            parsed = pj.read_json(pa.BufferReader(buf), parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if parsed.num_rows != len(present):
            return None  # blank lines are skipped by the parser: rows would misalign
        if self.mode is JsonMode.TEXT:
            column, errors = decode_text(data)
            return Converted({self.side: column}, errors, json_columns=frozenset({self.side}))
        valid = values.is_valid()
        names = self.columns
        if not nulls:  # row i of the batch is row i of `parsed`
            columns = {col: parsed.column(f).combine_chunks() for f, col in names.items()}
            return Converted(columns, value_columns=names, tombstones=pc.invert(valid))
        # Row i of the batch is row (number of non-null values before i) of `parsed`.
        where = pc.subtract(pc.cumulative_sum(valid.cast(pa.int64())), 1)
        where = pc.if_else(valid, where, pa.scalar(None, pa.int64()))
        columns = {col: parsed.column(f).take(where).combine_chunks() for f, col in names.items()}
        return Converted(columns, value_columns=names, tombstones=pc.invert(valid))

    def _slow(self, data: Sequence[bytes | None]) -> Converted:
        """The reference path: ``json.loads`` record by record."""
        texts, errors = decode_each(data)
        payloads: list[Any] = [None] * len(texts)
        for i, text in enumerate(texts):
            if text is None:
                continue
            try:
                doc = _loads(text)
                payloads[i] = self._unwrap(doc) if self.schemas_enable else doc
            except (ValueError, ConversionError) as e:  # JSONDecodeError is a ValueError
                errors[i] = e
        if self.mode is not JsonMode.TEXT:
            return self._fields(payloads, errors)
        if self.schemas_enable:  # the payload's text; without envelopes, the record's own text
            texts = [None if p is None else json_text(p) for p in payloads]
        texts = [None if i in errors else t for i, t in enumerate(texts)]
        column = string_array(texts, errors)
        return Converted({self.side: column}, errors, json_columns=frozenset({self.side}))

    def _typed(self, data: Sequence[bytes | None]) -> Converted:
        """Envelopes whose schema types the columns (``connectschema.py``, ``layout.py``)."""
        texts, errors = decode_each(data)
        dead = [v is None for v in data]
        groups: dict[int, tuple[connectschema.Typed, list[int], list[Any]]] = {}
        for i, text in enumerate(texts):
            if text is None or i in errors:
                continue
            try:
                doc = connectschema.loads(text)
                if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
                    raise ConversionError(_ENVELOPE_HINT)
                typed = self._schema(doc["schema"])
                value = typed.read(doc["payload"])
            except (ValueError, ConversionError, RecursionError) as e:
                errors[i] = e
                continue
            if value is None:  # Connect hands the sink a null value
                dead[i] = True
                continue
            _, rows, values = groups.setdefault(id(typed), (typed, [], []))
            rows.append(i)
            values.append(value)
        decoded = []
        for typed, rows, values in groups.values():
            array = column_of(values, typed.raw, typed.arrow, errors, rows=rows)
            if self.mode is JsonMode.FIELDS and pa.types.is_struct(array.type):
                keep = [f for f in self._wanted if array.type.get_field_index(f) >= 0]
                array = pa.StructArray.from_arrays(
                    [array.field(f) for f in keep], names=keep, mask=array.is_null()
                )
            decoded.append(Group(_label(typed), rows, array))
        return self._layout.converted(len(data), decoded, errors, pa.array(dead, pa.bool_()))

    def header_texts(
        self, data: Sequence[bytes | None], *, lenient: bool = False
    ) -> tuple[list[str | None], dict[int, Exception]]:
        """Each header value as this converter reads it as a header (Connect's
        ``toConnectHeader``, which is ``toConnectData``), as compact JSON text: an envelope's
        payload under ``schemas.enable`` (read against its schema, as a value is), else the
        document; None for a null. Errors by index. ``lenient``: a value that is not such
        JSON (a header a transform wrote as Connect's SimpleHeaderConverter writes it) is read
        without the envelope, then as a string, never refused."""
        texts, errors = decode_each(data)
        out: list[str | None] = [None] * len(data)
        for i, text in enumerate(texts):
            if text is None or i in errors:
                continue
            try:
                doc = connectschema.loads(text)
                if self.schemas_enable:
                    if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
                        raise ConversionError(_ENVELOPE_HINT)
                    if (
                        doc["schema"] is not None
                        and self._schema(doc["schema"]).read(doc["payload"]) is None
                    ):
                        continue
                    doc = doc["payload"]
            except (ValueError, ConversionError, RecursionError) as e:
                if not lenient:
                    errors[i] = e
                    continue
                try:
                    doc = connectschema.loads(text)
                except (ValueError, RecursionError):
                    doc = text
            out[i] = None if doc is None else json_text(doc)
        if lenient:
            errors.clear()  # bytes that are not UTF-8 were refused before the transforms
        return out, errors

    def _schema(self, doc: Any) -> connectschema.Typed:
        """The ``Typed`` of an envelope's schema, cached by its JSON text."""
        key = json.dumps(doc, sort_keys=True, default=str)
        if key not in self._schemas:
            if len(self._schemas) >= self._cache_size:
                self._schemas.pop(next(iter(self._schemas)))
            try:
                self._schemas[key] = connectschema.schema_of(doc, self.replace_null_with_default)
            except ConversionError as e:
                self._schemas[key] = e
        found = self._schemas[key]
        if isinstance(found, Exception):
            raise found
        if found is None:
            raise ConversionError(
                "the envelope's schema is null: its payload has no column types (set "
                f"{self.side}.converter.mode=text to keep such payloads as JSON text)"
            )
        return found

    @staticmethod
    def _unwrap(doc: Any) -> Any:
        if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
            raise ConversionError(_ENVELOPE_HINT)
        schema, payload = doc["schema"], doc["payload"]
        if payload is None and isinstance(schema, dict) and schema.get("optional") is False:
            raise ConversionError("null payload for a schema that is not optional")
        return payload

    def _fields(self, payloads: list[Any], errors: dict[int, Exception]) -> Converted:
        n = len(payloads)
        values: dict[str, list[Any]] = {}
        for i, obj in enumerate(payloads):
            if obj is None or i in errors:
                continue
            if not isinstance(obj, dict):
                errors[i] = ConversionError(
                    f"value is a JSON {_kind(obj)}, not an object; mode={self.mode} needs objects"
                )
                continue
            row, problem = self._row(obj)
            if problem is not None:
                errors[i] = ConversionError(problem)
                continue
            for f, (kind, v) in row.items():
                self._types.setdefault(f, kind)  # only good records define the schema
                if f not in values:
                    values[f] = [None] * n
                values[f][i] = v
        names = self.columns
        columns = {
            col: self._array(values.get(f, [None] * n), self._types[f], errors)
            for f, col in names.items()
        }
        dead = [p is None and i not in errors for i, p in enumerate(payloads)]
        return Converted(
            columns,
            errors,
            json_columns=frozenset(c for f, c in names.items() if self._types[f] == "json"),
            value_columns=names,
            tombstones=pa.array(dead, pa.bool_()),
        )

    def _row(self, obj: dict[str, Any]) -> tuple[dict[str, tuple[str, Any]], str | None]:
        """One object's field values with their kinds, or the reason the record is bad."""
        row: dict[str, tuple[str, Any]] = {}
        for f in obj if self.mode is JsonMode.INFER else self._wanted:
            v: Any = obj.get(f)
            kind = _kind(v)
            if kind is None:
                continue
            known = self._types.get(f, kind)
            if known == "json":
                v = json_text(v)
            elif known != kind and not (known == "double" and kind == "int64"):
                return row, f"field {f!r} is {kind} here but {known} was seen first"
            elif kind == "int64" and not -(2**63) <= v < 2**63:
                return row, f"field {f!r}: {v} does not fit in int64"
            row[f] = (known, v)
        return row, None

    @staticmethod
    def _array(column: list[Any], kind: str, errors: dict[int, Exception]) -> pa.Array:
        if _ARROW_TYPES[kind] == pa.string():
            return string_array(column, errors)
        return pa.array(column, _ARROW_TYPES[kind])


def _label(typed: connectschema.Typed) -> str:
    return f"the envelope schema {typed.arrow}"
