"""Connect's field transforms on a batch: ``InsertField``, ``ReplaceField``, ``MaskField`` and
``Cast``, each as ``$Key`` or ``$Value``, with Connect's semantics for schemaless values (what
``JsonConverter`` with ``schemas.enable=false`` and ``StringConverter`` give a Connect sink).

A side (the key or the value) comes in one of two forms:

- **columns**: the value's fields projected into columns (``JsonConverter`` ``mode=infer`` or
  ``fields``): a field is a column, a tombstone a row of ``batch.tombstones``. The transforms
  work column by column: InsertField adds a column from the coordinates, ReplaceField drops and
  renames columns, MaskField writes its constant over a column. A null field and an absent one
  are the same here (a row has every column): the difference Connect's maps keep between them
  is the one thing this form cannot carry.
- **text**: the whole key or value in one column, JSON text (``JsonConverter``'s default
  ``mode=text``: a ``Map`` for an object) or a plain string or bytes (never a ``Map``). The
  transforms read each applied row's JSON and write it back (a Python step per record), or, for
  a plain column, refuse the rows Connect refuses (a ``Map`` is required) or cast the column.

A row a transform refuses (Connect's ``DataException``, e.g. a ``String`` value where a ``Map``
is required) is returned in the errors with Connect's message; the caller takes it out of the
batch and applies ``errors.tolerance`` to it.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.connectors.converters.jsonconverter import json_text
from daemon.connectors.records import RecordBatch, value_column_names
from daemon.connectors.transforms import java
from daemon.connectors.transforms.java import TransformError

#: Arrow types of Cast's targets.
CAST_ARROW = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
}


@dataclass(frozen=True)
class Row:
    """What a transform may read of a record besides its key or value."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None


Errors = dict[int, str]


def apply(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """``batch`` with ``spec`` applied to the rows of ``where``, and the rows it refused (by
    index, with Connect's message; still in the returned batch)."""
    side = tf.side(spec.cls)
    if in_columns(spec, batch):
        fields = read_fields(batch)
        errors = apply_to_fields(spec, batch, fields, where)
        return write_fields(batch, fields), errors
    return _text(spec, batch, where, side)


def plain_with_schema(batch: RecordBatch, side: str) -> bool:
    """A key or value held whole (one column, no JSON text) with a Connect schema: a string,
    bytes or number from ``StringConverter``, ``ByteArrayConverter`` or a number converter."""
    whole_side = side == "key" or batch.value_columns is None
    return whole_side and side in batch.schemas and side not in batch.json_columns


def in_columns(spec: tf.TransformSpec, batch: RecordBatch) -> bool:
    """Whether ``spec`` works on ``batch``'s value columns (a ``$Value`` transform, a value
    in columns)."""
    return tf.side(spec.cls) == "value" and batch.value_columns is not None


# ---- one record at a time: the reference, and the text form's path ----


def record_function(spec: tf.TransformSpec) -> Callable[[Any, Row], Any]:
    """What ``spec`` does to one schemaless key or value (Connect's ``applySchemaless``)."""
    base = spec.cls.rsplit("$", 1)[0]
    c = spec.config
    if base == tf.INSERT_FIELD:
        fields = _insertions(c)

        def insert(value: Any, row: Row) -> Any:
            if value is None:
                return None
            out = dict(java.require_map(value, "field insertion"))
            for name, what in fields.items():
                got = _inserted(what, row, c)
                if got is not None:
                    out[name] = got
            return out

        return insert
    if base == tf.REPLACE_FIELD:
        keep, renamed = _replacement(c)

        def replace_fields(value: Any, row: Row) -> Any:
            if value is None:
                return None
            value = java.require_map(value, "field replacement")
            return {renamed.get(k, k): v for k, v in value.items() if keep(k)}

        return replace_fields
    if base == tf.MASK_FIELD:
        masked, replacement = tf.names(c["fields"]), c.get("replacement")

        def mask(value: Any, row: Row) -> Any:
            value = java.require_map(value, "mask fields")
            out = dict(value)
            for f in masked:
                out[f] = java.mask(value.get(f), replacement)
            return out

        return mask
    if base == tf.CAST:
        casts, whole = _casts(c)

        def cast(value: Any, row: Row) -> Any:
            if value is None:
                return None
            if whole is not None:
                return java.cast(value, whole)
            value = java.require_map(value, "cast types")
            out = dict(value)
            for f, target in casts.items():
                out[f] = java.cast(value.get(f), target)
            return out

        return cast
    raise ValueError(f"{spec.cls} is not a field transform")


def _insertions(c: Mapping[str, str]) -> dict[str, str]:
    """Field name (optionality suffix stripped) → what goes in it."""
    out = {}
    for what in ("topic", "partition", "offset", "timestamp", "static"):
        name = c.get(f"{what}.field")
        if name:
            out[name[:-1] if name.endswith(("?", "!")) else name] = what
    return out


def _inserted(what: str, row: Row, c: Mapping[str, str]) -> Any:
    if what == "static":
        return c.get("static.value")
    return {"topic": row.topic, "partition": row.partition, "offset": row.offset}.get(
        what, row.timestamp
    )


def _replacement(c: Mapping[str, str]) -> tuple[Callable[[str], bool], dict[str, str]]:
    exclude, include = set(tf.names(c.get("exclude", ""))), set(tf.names(c.get("include", "")))
    renames = dict(m.split(":") for m in tf.names(c.get("renames", "")))
    return (lambda k: k not in exclude and (not include or k in include)), renames


def _casts(c: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    casts: dict[str, str] = {}
    for item in tf.names(c["spec"]):
        field, sep, target = item.rpartition(":")
        if not sep:
            return {}, target.strip().lower()
        casts[field.strip()] = target.strip().lower()
    return casts, None


def rows_of(batch: RecordBatch) -> list[Row]:
    t = batch.table
    stamps = pc.cast(t.column("kafka_timestamp"), pa.int64()).to_pylist()
    return [
        Row(topic, partition, offset, stamp)
        for topic, partition, offset, stamp in zip(
            batch.topics().to_pylist(),
            t.column("kafka_partition").to_pylist(),
            t.column("kafka_offset").to_pylist(),
            stamps,
            strict=True,
        )
    ]


def dumps(value: Any) -> str:
    """JSON text as the converter writes it (compact, UTF-8 kept)."""
    return json_text(value)


def _text(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray, side: str
) -> tuple[RecordBatch, Errors]:
    whole = _casts(spec.config)[1] if spec.cls.rsplit("$", 1)[0] == tf.CAST else None
    return text_apply(batch, where, side, record_function(spec), whole)


def text_apply(
    batch: RecordBatch,
    where: pa.BooleanArray,
    side: str,
    fn: Callable[[Any, Row], Any],
    whole: str | None = None,
) -> tuple[RecordBatch, Errors]:
    """The text form: each applied row's key or value through ``fn``. The column stays JSON
    text if it was; a plain one becomes JSON text once ``fn`` changed a row (it made a map),
    or the ``whole`` Cast's type when every value in it was cast."""
    table = batch.table
    column = table.column(side).combine_chunks()
    is_json = side in batch.json_columns
    with_schema = plain_with_schema(batch, side)
    rows = rows_of(batch)
    old = column.to_pylist()
    applied = where.to_pylist()
    out: list[Any] = list(old)
    errors: Errors = {}
    changed = False
    for i, on in enumerate(applied):
        if not on:
            continue
        value = old[i]
        if is_json and value is not None:
            value = json.loads(value)
        try:
            out[i] = fn(value, rows[i])
        except TransformError as e:
            errors[i] = java.with_schema(str(e)) if with_schema else str(e)
            continue
        changed = changed or out[i] is not old[i]
        if is_json and out[i] is not None:
            out[i] = dumps(out[i])
    if is_json:
        return set_column(batch, side, pa.array(out, pa.string()), json=True), errors
    if whole is not None and all(on or v is None for on, v in zip(applied, old, strict=True)):
        typed = [None if i in errors else v for i, v in enumerate(out)]
        return set_column(batch, side, pa.array(typed, CAST_ARROW[whole]), json=False), errors
    if not changed:  # a plain value is no map: the transform refused it or left it as it was
        return batch, errors
    # Changed values beside unchanged ones in one column: JSON text keeps each one's type.
    texts = [None if v is None or i in errors else dumps(plain(v)) for i, v in enumerate(out)]
    return set_column(batch, side, pa.array(texts, pa.string()), json=True), errors


def plain(value: Any) -> Any:
    """A key or value as JSON can hold it (bytes: their Base64 text, as Cast writes them)."""
    return java.cast(value, "string") if isinstance(value, bytes) else value


def set_column(batch: RecordBatch, name: str, column: pa.Array, *, json: bool) -> RecordBatch:
    table = batch.table
    index = table.schema.get_field_index(name)
    table = table.set_column(index, name, column)
    columns = set(batch.json_columns) - {name} | ({name} if json else set())
    return replace(batch, table=table, json_columns=frozenset(columns))


# ---- the columns form ----


@dataclass
class Fields:
    """The value's fields as columns, in order, and which hold JSON text; ``read`` keeps what
    was read, so ``write_fields`` replaces only the columns a transform changed."""

    arrays: dict[str, pa.Array]
    json: set[str]
    read: dict[str, pa.Array] = field(default_factory=dict)


def _array(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def read_fields(batch: RecordBatch) -> Fields:
    assert batch.value_columns is not None
    table = batch.table
    arrays = {f: _array(table.column(c)) for f, c in batch.value_columns.items()}
    json_fields = {f for f, c in batch.value_columns.items() if c in batch.json_columns}
    return Fields(arrays, json_fields, dict(arrays))


def write_fields(batch: RecordBatch, fields: Fields) -> RecordBatch:
    """``batch`` with its value columns replaced by ``fields`` (named as ``JsonConverter``
    names them: a reserved name becomes ``value_<name>``), before ``headers``."""
    assert batch.value_columns is not None
    table = batch.table
    was = {f for f, c in batch.value_columns.items() if c in batch.json_columns}
    if list(fields.arrays) == list(batch.value_columns) and fields.json == was:
        # The same fields: only the columns a transform changed are set.
        for f, array in fields.arrays.items():
            if array is not fields.read.get(f):
                column = batch.value_columns[f]
                table = table.set_column(table.schema.get_field_index(column), column, array)
        return batch if table is batch.table else replace(batch, table=table)
    # One new table: the other columns as they were (their fields kept), the value's fields
    # before ``headers``.
    gone = set(batch.value_columns.values())
    kept = [
        (field, column)
        for field, column in zip(table.schema, table.columns, strict=True)
        if field.name not in gone
    ]
    names = value_column_names(fields.arrays, [field.name for field, _ in kept])
    at = next(i for i, (field, _) in enumerate(kept) if field.name == "headers")
    added = [(pa.field(names[f], a.type), a) for f, a in fields.arrays.items()]
    columns = kept[:at] + added + kept[at:]
    table = pa.Table.from_arrays(
        [column for _, column in columns], schema=pa.schema([field for field, _ in columns])
    )
    others = set(batch.json_columns) - gone
    json_columns = others | {names[f] for f in fields.json if f in names}
    return replace(batch, table=table, value_columns=names, json_columns=frozenset(json_columns))


def live_rows(batch: RecordBatch, where: pa.BooleanArray) -> pa.BooleanArray:
    """Applied rows whose value is not a tombstone."""
    if batch.tombstones is None:
        return where
    return pc.and_(where, pc.invert(pc.fill_null(batch.tombstones, False)))


def merge(old: pa.Array | None, new: pa.Array, rows: pa.BooleanArray) -> pa.Array | None:
    """``new`` where ``rows``, ``old`` elsewhere (``None``: the types cannot share a column)."""
    if pc.all(rows).as_py():
        return new
    if old is None:
        return pc.if_else(rows, new, pa.nulls(len(new), new.type))
    if old.type != new.type:
        if not pc.any(pc.and_(pc.invert(rows), old.is_valid())).as_py():
            return pc.if_else(rows, new, pa.nulls(len(new), new.type))
        try:
            new = new.cast(old.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return pc.if_else(rows, new, old)


def apply_to_fields(
    spec: tf.TransformSpec, batch: RecordBatch, fields: Fields, where: pa.BooleanArray
) -> Errors:
    """``spec`` on ``fields``, the value columns of ``batch`` as read (and maybe changed by
    the stages before, not yet written: the chain writes once after consecutive field
    transforms); the rows it refused."""
    base = spec.cls.rsplit("$", 1)[0]
    live = live_rows(batch, where)
    errors: Errors = {}
    if base == tf.INSERT_FIELD:
        _insert_columns(spec.config, batch, fields, live, errors)
    elif base == tf.REPLACE_FIELD:
        _replace_columns(spec.config, fields, live, errors, dead=_dead(batch))
    elif base == tf.MASK_FIELD:
        if batch.tombstones is not None:
            dead = pc.and_(where, pc.fill_null(batch.tombstones, False))
            for i in pc.indices_nonzero(dead).to_pylist():
                errors[i] = java.map_refusal(None, "mask fields")
        _mask_columns(spec.config, fields, live, errors)
    elif base == tf.CAST:
        _cast_columns(spec.config, fields, live, errors, typed="value" in batch.schemas)
    else:
        raise ValueError(f"{spec.cls} is not a field transform")
    return errors


def _put(
    fields: Fields, name: str, array: pa.Array, rows: pa.BooleanArray, errors: Errors, why: str
) -> None:
    merged = merge(fields.arrays.get(name), array, rows)
    if merged is None:
        for i in pc.indices_nonzero(rows).to_pylist():
            errors.setdefault(i, why)
        return
    fields.arrays[name] = merged
    fields.json.discard(name)


def _insert_columns(
    c: Mapping[str, str], batch: RecordBatch, fields: Fields, live: pa.BooleanArray, errors: Errors
) -> None:
    t, n = batch.table, batch.table.num_rows
    for name, what in _insertions(c).items():
        if what == "static":
            array = pa.array([c.get("static.value")] * n, pa.string())
        elif what == "timestamp" and "value" in batch.schemas:
            array = t.column("kafka_timestamp").combine_chunks()  # Connect's Timestamp
        elif what == "timestamp":
            array = pc.cast(t.column("kafka_timestamp").combine_chunks(), pa.int64())
        elif what == "topic":
            array = batch.topics()  # a router before this stage changed it
        else:
            array = t.column(f"kafka_{what}").combine_chunks()
        why = f"InsertField: field {name!r} has another type in this table's column"
        _put(fields, name, array, live, errors, why)


def _dead(batch: RecordBatch) -> pa.BooleanArray | None:
    """The tombstones of a value in columns (None: there are none)."""
    return None if batch.tombstones is None else pc.fill_null(batch.tombstones, False)


def _replace_columns(
    c: Mapping[str, str],
    fields: Fields,
    live: pa.BooleanArray,
    errors: Errors,
    *,
    dead: pa.BooleanArray | None = None,
) -> None:
    keep, renames = _replacement(c)
    every = pc.all(live).as_py()
    # On every row with a value (a tombstone has no fields): each kept field where it was,
    # under its new name (Connect's field order).
    if pc.all(live if dead is None else pc.or_(live, dead)).as_py():
        kept = [(renames.get(f, f), f) for f in fields.arrays if keep(f)]
        if len({target for target, _ in kept}) == len(kept):
            fields.arrays = {target: fields.arrays[f] for target, f in kept}
            fields.json = {target for target, f in kept if f in fields.json}
            return
    before = dict(fields.arrays)
    moved: dict[str, pa.Array] = {}
    for f, array in before.items():
        target = renames.get(f, f) if keep(f) else None
        if target == f:
            continue
        if target is not None:
            moved[target] = pc.if_else(live, array, pa.nulls(len(array), array.type))
            if f in fields.json:
                fields.json.add(target)
        if every:
            del fields.arrays[f]
            fields.json.discard(f)
        else:
            fields.arrays[f] = pc.if_else(live, pa.nulls(len(array), array.type), array)
    for target, array in moved.items():
        json_text = target in fields.json
        old = fields.arrays.get(target)
        merged = array if old is None else merge(old, array, live)
        if merged is None:
            for i in pc.indices_nonzero(live).to_pylist():
                errors.setdefault(i, f"ReplaceField: field {target!r} has another type here")
            continue
        fields.arrays[target] = merged
        if json_text:
            fields.json.add(target)


def _mask_columns(
    c: Mapping[str, str], fields: Fields, live: pa.BooleanArray, errors: Errors
) -> None:
    replacement = c.get("replacement")
    for f in tf.names(c["fields"]):
        array = fields.arrays.get(f)
        if array is None:
            continue  # Connect puts null there: a null and an absent field are one here
        rows = pc.and_(live, array.is_valid())
        if f in fields.json:  # a nested map or list: only its empty value masks it
            values = array.to_pylist()
            out = list(values)
            for i in pc.indices_nonzero(rows).to_pylist():
                try:
                    out[i] = json.dumps(java.mask(json.loads(values[i]), replacement))
                except TransformError as e:
                    errors[i] = str(e)
            fields.arrays[f] = pa.array(out, pa.string())
            continue
        try:
            masked = _masked_scalar(array.type, replacement)
        except TransformError as e:
            for i in pc.indices_nonzero(rows).to_pylist():
                errors[i] = str(e)
            continue
        fields.arrays[f] = pc.if_else(rows, masked, array)


#: The Java class a typed column's values have in Connect (where MaskField names it), by
#: Arrow's type test.
_JAVA_CLASSES = (
    (pa.types.is_struct, "org.apache.kafka.connect.data.Struct"),
    (pa.types.is_map, "java.util.HashMap"),
    (pa.types.is_list, "java.util.ArrayList"),
    (pa.types.is_large_list, "java.util.ArrayList"),
    (pa.types.is_temporal, "java.util.Date"),
    (pa.types.is_decimal, "java.math.BigDecimal"),
    (pa.types.is_binary, "[B"),
    (pa.types.is_large_binary, "[B"),
)


def _java_class(kind: pa.DataType) -> str:
    return next((name for test, name in _JAVA_CLASSES if test(kind)), str(kind))


def _masked_scalar(kind: pa.DataType, replacement: str | None) -> pa.Scalar:
    """What MaskField writes over a column of ``kind`` (Connect's per-class empty value, or
    ``replacement`` converted to the field's class)."""
    lists = pa.types.is_map(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)
    dates = pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_time(kind)
    if (lists or dates) and replacement is not None:  # MaskField has no function for these
        raise TransformError(
            f"Cannot mask value of type class {_java_class(kind)} with custom replacement."
        )
    if lists:
        return pa.scalar([], kind)
    if dates:
        raw = pa.int64() if pa.types.is_timestamp(kind) else pa.int32()
        return pa.scalar(0, raw).cast(kind)  # new Date(0)
    if pa.types.is_decimal(kind):
        if replacement is None:
            return pa.scalar(0, pa.int64()).cast(kind)  # BigDecimal.ZERO
        try:
            return pa.scalar(decimal.Decimal(replacement.strip()), kind)
        except (decimal.InvalidOperation, pa.ArrowInvalid):
            raise TransformError(
                f"Unable to convert {replacement} (class java.lang.String) to number"
            ) from None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        sample: Any = ""
    elif pa.types.is_boolean(kind):
        sample = False
    elif pa.types.is_integer(kind):
        sample = 0
    elif pa.types.is_floating(kind):
        sample = 0.0
    else:
        raise TransformError(f"Cannot mask value of type: class {_java_class(kind)}")
    return pa.scalar(java.mask(sample, replacement), kind)


def _cast_each(
    array: pa.Array, rows: pa.BooleanArray, target: str, is_json: bool, errors: Errors
) -> pa.Array:
    """Cast value by value (Java's rules, ``java.cast``): the reference path."""
    values = array.to_pylist()
    out: list[Any] = [None] * len(values)
    for i in pc.indices_nonzero(rows).to_pylist():
        value = json.loads(values[i]) if is_json else values[i]
        try:
            out[i] = java.cast(value, target)
        except TransformError as e:
            errors[i] = str(e)
    return pa.array(out, CAST_ARROW[target])


_PLAIN_INTEGER = r"^[+-]?[0-9]{1,18}$"  # fits in int64 whatever the digits
_PLAIN_DECIMAL = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


def cast_column(values: pa.Array, target: str) -> pa.Array | None:
    """Cast's ``castValueToType`` on a column of non-null values, column-wise, where Arrow's
    kernels do what Java does (None: not here, or some value needs the reference path, which
    also finds the values Cast refuses)."""
    kind, want = values.type, CAST_ARROW[target]
    integer, floating = pa.types.is_integer(kind), pa.types.is_floating(kind)
    if target == "string":
        if integer or pa.types.is_string(kind):
            return values.cast(pa.string())
        if pa.types.is_boolean(kind):
            return pc.if_else(values, "true", "false")
        return None  # a double prints as Java's Double.toString: value by value
    if target == "boolean":
        if pa.types.is_boolean(kind):
            return values
        if integer:
            return pc.not_equal(values, 0)
        if floating:  # Java: (long) value != 0, NaN is 0
            return pc.not_equal(
                pc.trunc(pc.fill_null(pc.if_else(pc.is_nan(values), 0.0, values), 0.0)), 0.0
            )
        if pa.types.is_string(kind):
            return pc.equal(pc.utf8_lower(values), "true")
        return None
    if pa.types.is_boolean(kind):
        return values.cast(pa.int8()).cast(want)
    if pa.types.is_string(kind):
        pattern = _PLAIN_INTEGER if target.startswith("int") else _PLAIN_DECIMAL
        if not pc.all(pc.match_substring_regex(values, pattern)).as_py():
            return None
        parsed = pc.replace_substring_regex(values, r"^\+", "").cast(
            pa.int64() if target.startswith("int") else pa.float64()
        )
        if (
            target.startswith("int")
            and not pc.all(pc.equal(parsed.cast(want, safe=False).cast(pa.int64()), parsed)).as_py()
        ):
            return None  # out of the type's range: Cast refuses those, value by value
        return parsed.cast(want, safe=False)
    if integer:
        return values.cast(want, safe=False)  # narrowing drops the high bits, as Java's does
    if floating and target in ("float32", "float64"):
        return values.cast(want, safe=False)
    if floating:  # Java: NaN is 0, the rest saturates to int (long for int64), then narrows
        bits = 64 if target == "int64" else 32
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        finite = pc.if_else(pc.is_nan(values), 0.0, values)
        over, under = pc.greater_equal(finite, float(high)), pc.less_equal(finite, float(low))
        whole = pc.trunc(pc.if_else(over, 0.0, pc.if_else(under, 0.0, finite))).cast(pa.int64())
        whole = pc.if_else(over, high, pc.if_else(under, low, whole))
        return whole.cast(want, safe=False)
    return None


def _cast_refused(kind: str) -> str:
    return (
        f"Cast transformation does not support casting from {kind}; supported types"
        f" are [{', '.join(java.CAST_INPUTS)}]"
    )


#: Connect's schema type of a typed column Cast cannot read (by Arrow's type test).
_UNCASTABLE = (
    (pa.types.is_struct, "STRUCT"),
    (pa.types.is_map, "MAP"),
    (pa.types.is_list, "ARRAY"),
    (pa.types.is_large_list, "ARRAY"),
)


def logical_plain(array: pa.Array, target: str) -> pa.Array:
    """A Date, Time or Timestamp column as Cast reads it for ``target``: to a string as
    ``Values.dateFormatFor`` prints the ``java.util.Date`` (UTC; a time of day before the first
    day's end, a date at a day's start, else a timestamp), to another type as its number (days,
    milliseconds of the day, epoch milliseconds: ``encodeLogicalType``)."""
    kind = array.type
    if pa.types.is_date(kind):
        days = array.cast(pa.int32())
        if target != "string":
            return days
        millis = pc.multiply(days.cast(pa.int64()), java.DAY_MS)
    elif pa.types.is_time(kind):
        millis = array.cast(pa.time32("ms")).cast(pa.int32())
        if target != "string":
            return millis
        millis = millis.cast(pa.int64())
    else:
        millis = array.cast(pa.timestamp("ms")).cast(pa.int64())
        if target != "string":
            return millis
    stamps = millis.cast(pa.timestamp("ms"))
    day = java.DAY_MS
    time_of_day = pc.strftime(stamps, "%H:%M:%S")  # with its milliseconds, for a ms unit
    return pc.if_else(
        pc.less(millis, day),
        pc.binary_join_element_wise(time_of_day, "Z", ""),
        pc.if_else(
            pc.equal(pc.subtract(millis, pc.multiply(pc.divide(millis, day), day)), 0),
            pc.strftime(stamps, "%Y-%m-%d"),
            pc.binary_join_element_wise(pc.strftime(stamps, "%Y-%m-%dT"), time_of_day, "Z", ""),
        ),
    )


def _cast_columns(
    c: Mapping[str, str], fields: Fields, live: pa.BooleanArray, errors: Errors, *, typed: bool
) -> None:
    casts, whole = _casts(c)
    if whole is not None:  # the value is a Map (a Struct with a schema): Cast takes neither
        for i in pc.indices_nonzero(live).to_pylist():
            errors[i] = _cast_refused("STRUCT" if typed else "MAP")
        return
    for f, target in casts.items():
        array = fields.arrays.get(f)
        if array is None:
            continue
        is_json = f in fields.json
        rows = pc.and_(live, array.is_valid())
        refused = next((kind for test, kind in _UNCASTABLE if test(array.type)), None)
        if refused is not None:
            for i in pc.indices_nonzero(rows).to_pylist():
                errors.setdefault(i, _cast_refused(refused))
            # The rows left hold null there; Connect gives their field the cast's type.
            nulls = merge(array, pa.nulls(len(array), CAST_ARROW[target]), live)
            if nulls is not None:
                fields.arrays[f] = nulls
            continue
        if pa.types.is_temporal(array.type):
            array = logical_plain(array, target)
        every = not is_json and pc.all(rows).as_py()
        cast = None if is_json else cast_column(array if every else array.filter(rows), target)
        if cast is not None and every:
            new = cast
        elif cast is not None:  # every value cast column-wise: put back where they were
            blank = pa.nulls(len(array), CAST_ARROW[target])
            new = pc.replace_with_mask(blank, rows, cast)
        else:
            new = _cast_each(array, rows, target, is_json, errors)
        why = f"Cast: field {f!r} cast to {target} beside values of another type in its column"
        fields.json.discard(f)
        merged = merge(None if is_json else array, new, rows)
        if merged is None or (is_json and not pc.all(pc.or_(rows, array.is_null())).as_py()):
            for i in pc.indices_nonzero(rows).to_pylist():
                errors.setdefault(i, why)
            if is_json:
                fields.json.add(f)
            continue
        fields.arrays[f] = merged
