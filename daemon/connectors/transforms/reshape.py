"""Connect's transforms that change a key's or value's shape: ``ExtractField``, ``HoistField``,
``Flatten`` (each ``$Key``/``$Value``) and ``ValueToKey``, with Connect's schemaless semantics.

Column-wise where the shape allows it, for a value transformed on every row of the batch:

- ExtractField of a top-level field of a value in columns: that column becomes the value;
- HoistField of a value held whole: the column becomes the one field of a value in columns (a
  value in columns is first written as JSON text, the field's one column);
- Flatten of a value in columns: a nested map's column is read once and its leaves become
  columns (``parent.child``), each typed as the converter types a field (a number column takes
  integers and doubles as doubles; a leaf of several kinds, or a list, stays JSON text).

Otherwise (a predicate applies the transform to some rows, a nested path, a key) the value is
held whole as JSON text and each applied row goes through the record function: a value whose
shape differs from row to row cannot be columns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.connectors.records import RecordBatch, value_column_names
from daemon.connectors.transforms import java, typed
from daemon.connectors.transforms.fields import (
    Errors,
    Row,
    dumps,
    in_columns,
    plain,
    plain_with_schema,
    set_column,
    text_apply,
)
from daemon.connectors.transforms.java import TransformError

#: Transforms this module applies (by class name without ``$Key``/``$Value``).
RESHAPES = (tf.EXTRACT_FIELD, tf.HOIST_FIELD, tf.FLATTEN, tf.VALUE_TO_KEY)


def record_function(spec: tf.TransformSpec) -> Callable[[Any, Row], Any]:
    """What ``spec`` does to one schemaless key or value."""
    base, c = spec.cls.rsplit("$", 1)[0], spec.config
    if base == tf.EXTRACT_FIELD:
        path = tf.field_path(c["field"], c.get("field.syntax.version", "V1"))
        return lambda value, row: extract(value, path)
    if base == tf.HOIST_FIELD:
        field = c["field"]
        return lambda value, row: {field: value}
    if base == tf.FLATTEN:
        delimiter = c.get("delimiter", ".")

        def flat(value: Any, row: Row) -> Any:
            if value is None:
                return None
            out: dict[str, Any] = {}
            flatten(java.require_map(value, "flattening"), "", delimiter, out)
            return out

        return flat
    raise ValueError(f"{spec.cls} is not a reshaping transform")


def extract(value: Any, path: tuple[str, ...]) -> Any:
    """ExtractField on a schemaless value (``SingleFieldPath.valueFrom``)."""
    if value is None:
        return None
    current = java.require_map(value, "field extraction")
    for step in path[:-1]:
        nested = current.get(step)
        if nested is None:
            return None
        current = java.require_map(nested, "nested field access")
    return current.get(path[-1])


def flatten(value: dict[str, Any], prefix: str, delimiter: str, out: dict[str, Any]) -> None:
    """Flatten's schemaless walk: a nested map's fields become ``parent<delimiter>child``."""
    for k, v in value.items():
        name = f"{prefix}{delimiter}{k}" if prefix else k
        if isinstance(v, dict):
            flatten(v, name, delimiter, out)
        else:
            out[name] = v


def apply(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """``batch`` with ``spec`` applied to the rows of ``where``, and the rows it refused."""
    base = spec.cls.rsplit("$", 1)[0]
    if in_columns(spec, batch) and "value" in batch.schemas:
        return typed.apply(spec, batch, where)
    if base == tf.VALUE_TO_KEY:
        return _value_to_key(tf.names(spec.config["fields"]), batch, where)
    side = tf.side(spec.cls)
    every = pc.all(where).as_py()
    if side == "value" and batch.value_columns is not None:
        if every and base == tf.EXTRACT_FIELD:
            path = tf.field_path(spec.config["field"], spec.config["field.syntax.version"])
            if len(path) == 1:
                return _extract_column(batch, path[0]), {}
        if every and base == tf.FLATTEN:
            return _flatten_columns(batch, spec.config.get("delimiter", ".")), {}
        batch = whole(batch)
    if side == "value" and every and base == tf.HOIST_FIELD:
        return _hoist_column(batch, spec.config["field"]), {}
    if base == tf.EXTRACT_FIELD and plain_with_schema(batch, side):
        # A null with a schema: Connect looks the field up in a schema that has none.
        nulls = pc.and_(where, pc.is_null(batch.table.column(side)).combine_chunks())
        refused = dict.fromkeys(
            pc.indices_nonzero(nulls).to_pylist(),
            "Cannot look up fields on non-struct type",
        )
        done, errors = text_apply(
            batch, pc.and_(where, pc.invert(nulls)), side, record_function(spec)
        )
        return done, {**errors, **refused}
    return text_apply(batch, where, side, record_function(spec))


def value_maps(batch: RecordBatch) -> list[dict[str, Any] | None]:
    """Each row's value in columns as a map (None: a tombstone), null fields left out (a null
    and an absent field are one thing in columns)."""
    assert batch.value_columns is not None
    values = batch.value_objects()
    return [None if v is None else {k: x for k, x in v.items() if x is not None} for v in values]


def whole(batch: RecordBatch) -> RecordBatch:
    """``batch`` with a value in columns held whole instead, as JSON text in ``value``."""
    if batch.value_columns is None:
        return batch
    texts = [None if v is None else dumps(v) for v in value_maps(batch)]
    return _held_whole(batch, pa.array(texts, pa.string()), json=True)


def _without_value_columns(batch: RecordBatch) -> tuple[pa.Table, set[str]]:
    assert batch.value_columns is not None
    table = batch.table.drop_columns(list(batch.value_columns.values()))
    return table, set(batch.json_columns) - set(batch.value_columns.values())


def _extract_column(batch: RecordBatch, field: str) -> RecordBatch:
    """ExtractField$Value of a top-level field of a value in columns, on every row."""
    assert batch.value_columns is not None
    column = batch.value_columns.get(field)
    n = len(batch)
    if column is None:
        array: pa.Array = pa.nulls(n, pa.string())
    else:
        array = batch.table.column(column).combine_chunks()
        if batch.tombstones is not None:  # a tombstone's value stays null
            dead = pc.fill_null(batch.tombstones, False)
            array = pc.if_else(dead, pa.nulls(n, array.type), array)
    return _held_whole(batch, array, json=column is not None and column in batch.json_columns)


def _held_whole(batch: RecordBatch, value: pa.Array, *, json: bool) -> RecordBatch:
    """``batch`` with its value columns replaced by ``value``, the whole value."""
    table, json_columns = _without_value_columns(batch)
    table = table.add_column(table.schema.get_field_index("headers"), "value", value)
    return replace(
        batch,
        table=table,
        value_columns=None,
        tombstones=None,
        json_columns=frozenset(json_columns | ({"value"} if json else set())),
    )


def _hoist_column(batch: RecordBatch, field: str) -> RecordBatch:
    """HoistField$Value of a value held whole, on every row: its column becomes the one field
    of a value in columns (a null value becomes a map holding a null: no longer a tombstone)."""
    table = batch.table
    index = table.schema.get_field_index("value")
    array = table.column(index).combine_chunks()
    if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        array = pa.array([plain(v) for v in array.to_pylist()], pa.string())
        json_value = False
    else:
        json_value = "value" in batch.json_columns
    table = table.remove_column(index)
    names = value_column_names([field], table.column_names)
    table = table.add_column(table.schema.get_field_index("headers"), names[field], array)
    json_columns = set(batch.json_columns) - {"value"}
    if json_value:
        json_columns.add(names[field])
    return replace(
        batch,
        table=table,
        value_columns=names,
        tombstones=pa.array([False] * len(batch), pa.bool_()),
        json_columns=frozenset(json_columns),
    )


def _flatten_columns(batch: RecordBatch, delimiter: str) -> RecordBatch:
    """Flatten$Value of a value in columns, on every row: the leaves of each nested map's
    column become columns of their own."""
    assert batch.value_columns is not None
    nested = [f for f, c in batch.value_columns.items() if c in batch.json_columns]
    if not nested:
        return batch  # every field is a leaf already
    table = batch.table
    n = len(batch)
    dead = (
        pc.fill_null(batch.tombstones, False).to_pylist()
        if batch.tombstones is not None
        else [False] * n
    )
    leaves: dict[str, list[Any] | pa.Array] = {}
    for f, c in batch.value_columns.items():
        array = table.column(c).combine_chunks()
        if f not in nested:
            leaves[f] = array  # a leaf already: its column as it is, unless a leaf is named so
            continue
        for i, text in enumerate(array.to_pylist()):
            if text is None or dead[i]:
                continue
            value = json.loads(text)
            found: dict[str, Any] = {}
            if isinstance(value, dict):
                flatten(value, f, delimiter, found)
            else:
                found[f] = value
            for name, leaf in found.items():
                slot = leaves.get(name)
                if slot is None:
                    slot = leaves[name] = [None] * n
                elif isinstance(slot, pa.Array):
                    slot = leaves[name] = slot.to_pylist()
                slot[i] = leaf  # a later one wins, as in Connect's map
    out: dict[str, pa.Array] = {}
    json_fields = set()
    for name, values in leaves.items():
        if isinstance(values, pa.Array):
            out[name] = values
            continue
        out[name], is_json = _leaf_column(values)
        if is_json:
            json_fields.add(name)
    without, json_columns = _without_value_columns(batch)
    names = value_column_names(out, without.column_names)
    at = without.schema.get_field_index("headers")
    for name, array in out.items():
        without = without.add_column(at, names[name], array)
        at += 1
    json_columns |= {names[f] for f in json_fields}
    return replace(batch, table=without, value_columns=names, json_columns=frozenset(json_columns))


_LEAF_TYPES = {
    frozenset({"INT64"}): pa.int64(),
    frozenset({"FLOAT64"}): pa.float64(),
    frozenset({"INT64", "FLOAT64"}): pa.float64(),
    frozenset({"BOOLEAN"}): pa.bool_(),
    frozenset({"STRING"}): pa.string(),
}


def _leaf_column(values: list[Any]) -> tuple[pa.Array, bool]:
    """A flattened leaf's column: typed as the converter types a field, else JSON text."""
    kinds = frozenset(java.type_name(v) for v in values if v is not None)
    kind = _LEAF_TYPES.get(kinds)
    if kind is not None:
        return pa.array(values, kind), False
    if not kinds:
        return pa.nulls(len(values), pa.string()), False
    return pa.array([None if v is None else dumps(v) for v in values], pa.string()), True


def _value_to_key(
    fields: tuple[str, ...], batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """ValueToKey: the key of each applied row becomes a map of the value's ``fields`` (a
    missing field maps to null), as JSON text; a value that is no map is refused."""
    if batch.value_columns is not None:
        values: list[Any] = value_maps(batch)
    else:
        values = batch.table.column("value").to_pylist()
        if "value" in batch.json_columns:
            values = [None if v is None else json.loads(v) for v in values]
    keys = batch.table.column("key").to_pylist()
    key_json = "key" in batch.json_columns
    out: list[str | None] = []
    errors: Errors = {}
    for i, (on, key, value) in enumerate(zip(where.to_pylist(), keys, values, strict=True)):
        if not on:
            out.append(key if key_json or key is None else dumps(plain(key)))
            continue
        try:
            value = java.require_map(value, "copying fields from value to key")
        except TransformError as e:
            errors[i] = java.with_schema(str(e)) if plain_with_schema(batch, "value") else str(e)
            out.append(None)
            continue
        out.append(dumps({f: value.get(f) for f in fields}))
    return set_column(batch, "key", pa.array(out, pa.string()), json=True), errors
