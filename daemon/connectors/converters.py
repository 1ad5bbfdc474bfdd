"""Kafka Connect's String, JSON and ByteArray converters, for a whole poll at a time.

``BatchConverter.convert(raw)`` turns one poll's raw records (``RawBatch``) into a
``RecordBatch`` (an Arrow table, see ``records.py``) plus the records that could not be
converted (``BadRecord``), so the runtime can apply ``errors.tolerance`` / the dead-letter queue
without failing the batch.

Converters are chosen with Connect's class names (``value.converter=
org.apache.kafka.connect.json.JsonConverter``), their simple names, short names (``json``,
``string``, ``bytearray``) or a Python path (``package.module:Class``); their options come from
the ``key.converter.*`` / ``value.converter.*`` keys, prefix stripped.

Speed: ``ByteArrayConverter`` and ``StringConverter`` (UTF-8) build Arrow arrays straight from
the lists of bytes, with no Python work per record unless a record is bad. JSON has to be
parsed; see ``JsonConverter`` for its fast path. Conversion is CPU work: the runtime runs it off
the event loop.

A converter instance belongs to one task and converts one batch at a time (not thread-safe):
``JsonConverter`` remembers the value columns it has seen so the table's schema stays stable.
"""

from __future__ import annotations

import codecs
import enum
import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from typing import Any, Literal, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from daemon.connectors.records import (
    RESERVED_COLUMNS,
    BadRecord,
    OffsetRange,
    RawBatch,
    RecordBatch,
    record_spans,
)
from daemon.errors import ConfigError, ConversionError

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
Side = Literal["key", "value"]


@dataclass
class Converted:
    """One side (keys or values) of a batch, converted: columns as long as the batch.

    Rows in ``errors`` hold nulls; ``BatchConverter`` drops them from the table.
    """

    columns: dict[str, pa.Array]
    errors: dict[int, Exception] = field(default_factory=dict)
    json_columns: frozenset[str] = frozenset()
    value_columns: dict[str, str] | None = None
    tombstones: pa.Array | None = None


@dataclass(frozen=True, slots=True)
class ConversionResult:
    """The good records as a batch, and the bad ones (not in ``batch.table``)."""

    batch: RecordBatch
    bad: list[BadRecord]


class Converter(ABC):
    """Converts one side (keys or values) of a batch of raw records into Arrow columns."""

    #: Connect's class name, used in messages and by ``list_converters()``.
    connect_name: str = ""

    def __init__(self) -> None:
        self.side: Side = "value"

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        """Apply the options (``<side>.converter.`` stripped). Raise ``ConfigError`` if invalid."""
        self.side = "key" if is_key else "value"

    @abstractmethod
    def convert(self, data: Sequence[bytes | None]) -> Converted:
        """Convert a batch's keys or values. Never raises for a bad record: reports it."""


class ByteArrayConverter(Converter):
    """Keeps the bytes as they are: a ``binary`` column."""

    connect_name = "org.apache.kafka.connect.converters.ByteArrayConverter"

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        return Converted({self.side: pa.array(data, pa.binary())})


class StringConverter(Converter):
    """Decodes text into a ``string`` column. Option ``encoding`` (default UTF-8)."""

    connect_name = "org.apache.kafka.connect.storage.StringConverter"

    def __init__(self) -> None:
        super().__init__()
        self.encoding = "utf-8"

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        name = options.get("encoding", options.get("converter.encoding", "UTF-8"))
        try:
            self.encoding = codecs.lookup(name).name
        except LookupError:
            raise ConfigError(
                f"{self.side}.converter.encoding: unknown encoding {name!r}; "
                "use a standard name such as UTF-8 or ISO-8859-1"
            ) from None

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        column, errors = decode_text(data, self.encoding)
        return Converted({self.side: column}, errors)


def decode_text(
    data: Sequence[bytes | None], encoding: str = "utf-8"
) -> tuple[pa.Array, dict[int, Exception]]:
    """Bytes → a ``string`` array. UTF-8 is validated by Arrow in one pass over the batch; only
    when that fails (or for other encodings) are records decoded one by one."""
    if encoding == "utf-8":
        try:
            return pa.array(data, pa.binary()).cast(pa.string()), {}
        except pa.ArrowInvalid:
            pass
    texts, errors = decode_each(data, encoding)
    return string_array(texts, errors), errors


def decode_each(
    data: Sequence[bytes | None], encoding: str = "utf-8"
) -> tuple[list[str | None], dict[int, Exception]]:
    texts: list[str | None] = []
    errors: dict[int, Exception] = {}
    for i, b in enumerate(data):
        try:
            texts.append(None if b is None else bytes(b).decode(encoding))
        except UnicodeDecodeError as e:
            errors[i] = e
            texts.append(None)
    return texts, errors


def string_array(texts: list[str | None], errors: dict[int, Exception]) -> pa.Array:
    """A ``string`` array; a text Arrow refuses (a lone surrogate) becomes its row's error."""
    try:
        return pa.array(texts, pa.string())
    except (pa.ArrowException, UnicodeError):
        for i, t in enumerate(texts):
            try:
                if t is not None:
                    t.encode("utf-8")
            except UnicodeEncodeError as e:
                errors[i] = e
                texts[i] = None
        return pa.array(texts, pa.string())


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


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


class JsonConverter(Converter):
    """Connect's ``JsonConverter``. Options (``<side>.converter.`` prefix stripped):

    - ``schemas.enable`` (default ``true``, as in Connect): each value is an envelope
      ``{"schema": ..., "payload": ...}`` and the payload is used; anything else is a bad
      record, and so is a null payload whose schema says ``"optional": false``.
    - ``mode`` = ``text`` (default) | ``fields`` | ``infer`` (see ``JsonMode``; not for keys).
      ``fields=a,b:int64,c`` lists the fields of ``fields`` mode and optionally their types
      (boolean, int64, double, string, json); giving ``fields`` implies ``mode=fields``.
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

    connect_name = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self) -> None:
        super().__init__()
        self.schemas_enable = True
        self.use_pyarrow = True
        self.mode = JsonMode.TEXT
        self._types: dict[str, str] = {}  # field -> kind; first seen wins; order = column order
        self._wanted: list[str] = []  # fields mode: the fields asked for

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        prefix = f"{self.side}.converter."
        flag = options.get("schemas.enable", "true").strip().lower()
        if flag not in ("true", "false"):
            raise ConfigError(f"{prefix}schemas.enable: {flag!r} is not true or false")
        self.schemas_enable = flag == "true"
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
        names: dict[str, str] = {}
        used = set(RESERVED_COLUMNS)
        for f in self._types:
            col = f if f not in used else f"value_{f}"
            while col in used:
                col = f"_{col}"
            used.add(col)
            names[f] = col
        return names

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        fast = None if self.schemas_enable or not self.use_pyarrow else self._fast(data)
        return fast if fast is not None else self._slow(data)

    def _fast(self, data: Sequence[bytes | None]) -> Converted | None:
        """The ``pyarrow.json`` path, or ``None`` when only the reference path can decide."""
        present = [v for v in data if v is not None]
        if not present:
            return None
        if self.mode is not JsonMode.TEXT:
            learnt = all(f in self._types for f in self._wanted) and bool(self._types)
            if not learnt or "json" in self._types.values():
                return None
        # Only objects: a bare `null` line crashes pyarrow's parser (apache/arrow#47409) and
        # other non-objects are refused by it anyway. And valid UTF-8 only: the parser does not
        # check the bytes inside strings (text mode checks them below, record by record).
        blob = pa.array(present, pa.binary())
        if not pc.all(pc.starts_with(blob, pattern="{")).as_py():
            return None
        if self.mode is not JsonMode.TEXT:
            try:
                blob.cast(pa.string())
            except pa.ArrowInvalid:
                return None
        buf = b"\n".join(present)
        if buf.count(b"\n") != len(present) - 1:
            return None  # a value spans lines: line-delimited parsing would misalign rows
        if b"NaN" in buf or b"Infinity" in buf:
            return None  # pyarrow accepts these non-JSON numbers; the reference path refuses them
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
        valid = pa.array(data, pa.binary()).is_valid()
        # Row i of the batch is row (number of non-null values before i) of `parsed`.
        where = pc.subtract(pc.cumulative_sum(valid.cast(pa.int64())), 1)
        where = pc.if_else(valid, where, pa.scalar(None, pa.int64()))
        names = self.columns
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
            texts = [None if p is None else _dumps(p) for p in payloads]
        texts = [None if i in errors else t for i, t in enumerate(texts)]
        column = string_array(texts, errors)
        return Converted({self.side: column}, errors, json_columns=frozenset({self.side}))

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
                v = _dumps(v)
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


def _builtin_converters() -> dict[str, type[Converter]]:
    table: dict[str, type[Converter]] = {}
    for cls, shorts in (
        (StringConverter, ("string",)),
        (JsonConverter, ("json",)),
        (ByteArrayConverter, ("bytearray", "bytes")),
    ):
        for name in (cls.connect_name, cls.__name__, *shorts):
            table[name.lower()] = cls
    return table


def list_converters() -> list[str]:
    """Connect class names of the built-in converters."""
    return sorted({cls.connect_name for cls in _builtin_converters().values()})


def converter_class(name: str) -> type[Converter]:
    """The converter class for a Connect class name, a short name or a ``module:Class`` path."""
    name = name.strip()
    builtin = _builtin_converters().get(name.lower())
    if builtin is not None:
        return builtin
    known = ", ".join(list_converters())
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"converter {name!r} cannot be loaded: {e}") from e
        if isinstance(obj, type) and issubclass(obj, Converter):
            return obj
        raise ConfigError(f"converter {name!r} is not a daemon.connectors.converters.Converter")
    raise ConfigError(f"converter {name!r} is not supported; use one of: {known}")


def make_converter(name: str, options: Mapping[str, str], *, is_key: bool) -> Converter:
    """A configured converter from a name and its options, as the config layer gives them
    (``daemon.config.effective_converter`` → ``(Converter.JSON, {"schemas.enable": "false"})``;
    pass the enum's value, ``"json"``)."""
    converter = converter_class(name)()
    converter.configure(options, is_key=is_key)
    return converter


def converter_from_config(
    config: Mapping[str, str], side: Side, *, default: str = "StringConverter"
) -> Converter:
    """The ``<side>.converter`` of ``config``, configured with its ``<side>.converter.*`` keys."""
    prefix = f"{side}.converter."
    options = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    return make_converter(config.get(f"{side}.converter", default), options, is_key=side == "key")


class BatchConverter:
    """A key converter and a value converter, applied to whole polls."""

    def __init__(self, key: Converter, value: Converter) -> None:
        self.key = key
        self.value = value

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> BatchConverter:
        """From Connect's ``key.converter`` / ``value.converter`` keys (worker and connector
        configs merged by the caller); each defaults to ``StringConverter``."""
        return cls(converter_from_config(config, "key"), converter_from_config(config, "value"))

    def convert(
        self, raw: RawBatch, ranges: Sequence[OffsetRange] | None = None
    ) -> ConversionResult:
        """Convert one poll. Never raises for a bad record: bad records are returned in ``bad``
        and left out of the table, while ``batch.ranges`` still covers them. ``ranges``: the
        poll's offset ranges when the caller knows them (saves a group-by over the records)."""
        keys = self.key.convert(raw.keys)
        values = self.value.convert(raw.values)
        coords = coordinate_table(raw)
        columns = {name: coords.column(name) for name in coords.column_names}
        columns.update(keys.columns)
        columns.update(values.columns)
        columns["headers"] = headers_array(raw.headers, len(raw))
        table = pa.table(columns)
        tombstones = values.tombstones
        stamp_types = None
        if raw.timestamp_types is not None:
            stamp_types = pa.array(raw.timestamp_types, pa.int8())
        failed = sorted(keys.errors.keys() | values.errors.keys())
        bad = [_bad_record(raw, i, keys.errors.get(i), values.errors.get(i)) for i in failed]
        if failed:
            drop = [False] * len(raw)
            for i in failed:
                drop[i] = True
            keep = pc.invert(pa.array(drop, pa.bool_()))
            table = table.filter(keep)
            tombstones = tombstones.filter(keep) if tombstones is not None else None
            stamp_types = stamp_types.filter(keep) if stamp_types is not None else None
        batch = RecordBatch(
            table,
            tuple(sorted(ranges))
            if ranges is not None
            else tuple(sorted(record_spans(coords).values())),
            value_columns=values.value_columns,
            json_columns=keys.json_columns | values.json_columns,
            tombstones=tombstones,
            timestamp_types=stamp_types,
        )
        return ConversionResult(batch, bad)


def _bad_record(
    raw: RawBatch, i: int, key_error: Exception | None, value_error: Exception | None
) -> BadRecord:
    stage: Side = "key" if key_error is not None else "value"
    error = key_error if key_error is not None else value_error
    assert error is not None
    cls = type(error)
    return BadRecord(
        raw.topics[i],
        raw.partitions[i],
        raw.offsets[i],
        f"{stage} conversion failed: {error}",
        f"{cls.__module__}.{cls.__qualname__}",
        stage,
        raw.keys[i],
        raw.values[i],
        tuple(raw.headers[i]) if raw.headers is not None else (),
    )


def coordinate_table(raw: RawBatch) -> pa.Table:
    """The four ``kafka_*`` columns of a raw batch."""
    stamps = pa.array(raw.timestamps, pa.int64())
    stamps = pc.if_else(pc.less(stamps, 0), pa.scalar(None, pa.int64()), stamps)
    return pa.table(
        {
            "kafka_topic": pa.array(raw.topics, pa.string()),
            "kafka_partition": pa.array(raw.partitions, pa.int32()),
            "kafka_offset": pa.array(raw.offsets, pa.int64()),
            "kafka_timestamp": stamps.cast(TIMESTAMP_TYPE),
        }
    )


def headers_array(headers: Sequence[Sequence[tuple[str, bytes | None]]] | None, n: int) -> pa.Array:
    """``list<struct<key, value>>`` built from flattened lists, not record by record."""
    if headers is None:
        headers = [()] * n
    offsets = pa.array(list(accumulate((len(h) for h in headers), initial=0)), pa.int32())
    flat = list(chain.from_iterable(headers))
    keys = pa.array([k for k, _ in flat], pa.string())
    items = pa.StructArray.from_arrays(
        [keys, pa.array([v for _, v in flat], pa.binary())], names=["key", "value"]
    )
    return pa.ListArray.from_arrays(offsets, items, type=HEADERS_TYPE)
