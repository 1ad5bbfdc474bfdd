"""``ExtractField``, ``HoistField``, ``Flatten`` and ``ValueToKey`` on a value with a schema in
columns (``RecordBatch.schemas``: a typed converter made it), with Connect's rules for a
``Struct`` (``applyWithSchema``), column-wise, every column keeping its Arrow type:

- ExtractField: the field's column, through nested structs for a V2 path, becomes the value;
  a field the schema lacks is refused (``Unknown field``);
- HoistField: the value's columns become one struct column, the new value's only field;
- Flatten: each struct column's leaves become columns of their own (``parent.child``), arrays
  stay as they are, a map column is refused (Connect builds no schema for it);
- ValueToKey: the key becomes a struct of the named columns; a name the schema lacks is
  refused (``Field does not exist``).

A tombstone has no schema in Connect: it takes the schemaless rules (ExtractField and Flatten
leave it null, HoistField makes it a map holding null, ValueToKey refuses it).

A value in columns has one shape per batch, so a transform that changes its shape applies to
every record or to none: where a predicate picks some records only, those are refused (Connect
would give the records different schemas, which one table column cannot hold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.connectors.records import RecordBatch, value_column_names
from daemon.connectors.transforms import java
from daemon.connectors.transforms.fields import (
    Errors,
    live_rows,
    read_fields,
    set_column,
    write_fields,
)

_SOME = (
    "{cls}: connectd holds values with a schema in typed columns, one shape per batch; this"
    " transform changes the shape, so it applies to all of a batch's records or none, and its"
    " predicate picked some (apply it without a predicate, or route such records to another"
    " connector)"
)


def apply(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """``spec`` (a reshape) on a value with a schema in columns, on the rows of ``where``."""
    assert batch.value_columns is not None
    base = spec.cls.rsplit("$", 1)[0]
    live = live_rows(batch, where)
    if not pc.all(where).as_py():
        message = _SOME.format(cls=spec.cls)
        return batch, {i: message for i in pc.indices_nonzero(where).to_pylist()}
    if base == tf.EXTRACT_FIELD:
        path = tf.field_path(spec.config["field"], spec.config.get("field.syntax.version", "V1"))
        return _extract(batch, path, spec.config["field"], live)
    if base == tf.HOIST_FIELD:
        return _hoist(batch, spec.config["field"]), {}
    if base == tf.FLATTEN:
        return _flatten(batch, spec.config.get("delimiter", "."), live)
    if base == tf.VALUE_TO_KEY:
        return _value_to_key(batch, tf.names(spec.config["fields"]), where, live)
    raise ValueError(f"{spec.cls} is not a reshape")


Change = Callable[[tf.TransformSpec, RecordBatch, pa.BooleanArray], tuple[RecordBatch, Errors]]


def on_key(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray, change: Change
) -> tuple[RecordBatch, Errors]:
    """A ``$Key`` transform on a key with a schema: the key is set in the value's place (a
    struct's fields as value columns, anything else the whole value), ``change`` applies the
    ``$Value`` transform to it with the same rules, and what comes out is the key again (value
    columns become one struct column), typed; the value is untouched."""
    t = batch.table
    key = t.column("key").combine_chunks()
    names = list(batch.value_columns.values()) if batch.value_columns is not None else ["value"]
    base = t.drop_columns(names)
    null_key = pc.is_null(key)
    if pa.types.is_struct(key.type):
        children = {f.name: a for f, a in zip(key.type, key.flatten(), strict=True)}
        columns = value_column_names(children, base.column_names)
        for name, array in children.items():
            base = base.add_column(base.schema.get_field_index("headers"), columns[name], array)
        swapped = RecordBatch(
            base, batch.ranges, columns, frozenset(), null_key, batch.timestamp_types
        )
    else:
        base = base.add_column(base.schema.get_field_index("headers"), "value", key)
        swapped = RecordBatch(base, batch.ranges, None, frozenset(), None, batch.timestamp_types)
    swapped = replace(swapped, schemas=frozenset({"value"}))
    as_value = replace(spec, cls=spec.cls.removesuffix("$Key") + "$Value")
    done, errors = change(as_value, swapped, where)
    if done.value_columns is not None:
        dead = None if done.tombstones is None else pc.fill_null(done.tombstones, False)
        fields = read_fields(done).arrays
        new_key: pa.Array = _struct(fields, dead) if fields else key
    else:
        new_key = done.table.column("value").combine_chunks()
    table = t.set_column(t.schema.get_field_index("key"), "key", new_key)
    # HeaderFrom$Key adds headers: they are the record's, kept with the key.
    table = table.set_column(
        table.schema.get_field_index("headers"), "headers", done.table.column("headers")
    )
    held = done.value_columns.values() if done.value_columns is not None else ("value",)
    if any(c in done.json_columns for c in held):
        return batch, {**errors, **_refuse(where, _JSON_KEY.format(cls=spec.cls))}
    return replace(batch, table=table, json_columns=batch.json_columns - {"key"}), errors


_JSON_KEY = (
    "{cls}: the key would hold JSON text beside typed fields, which connectd does not mix in"
    " one key column"
)


def set_schema_metadata(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """SetSchemaMetadata: a key or value with a schema keeps its rows as they are (a table
    holds no schema name or version); one without (JsonConverter's schemaless JSON, a value
    in columns it inferred) is refused, as Connect refuses it, unless it is null. A plain
    string, bytes or number column has a schema in Connect (its converter gives one), but no
    fields, which Connect 4.1 lists to copy the schema: such a value is refused too."""
    side = tf.side(spec.cls)
    struct = batch.value_columns is not None if side == "value" else False
    if side == "key":
        struct = pa.types.is_struct(batch.table.schema.field("key").type)
    if side in batch.schemas and struct:
        return batch, {}
    if side in batch.schemas:
        rows = pc.and_(where, pc.is_valid(batch.table.column(side)).combine_chunks())
        return batch, _refuse(rows, "Cannot list fields on non-struct type")
    if side == "value" and batch.value_columns is not None:
        rows = live_rows(batch, where)
    elif side in batch.json_columns:
        rows = pc.and_(where, pc.is_valid(batch.table.column(side)).combine_chunks())
    else:
        return batch, {}
    return batch, _refuse(rows, "Schema required for [updating schema metadata]")


def _refuse(live: pa.BooleanArray, message: str) -> Errors:
    return {i: message for i in pc.indices_nonzero(live).to_pylist()}


def _columns(batch: RecordBatch) -> dict[str, pa.Array]:
    return read_fields(batch).arrays


def _extract(
    batch: RecordBatch, path: tuple[str, ...], field: str, live: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    array: pa.Array | None = _columns(batch).get(path[0])
    for step in path[1:]:
        if array is None or not pa.types.is_struct(array.type):
            array = None
            break
        index = array.type.get_field_index(step)
        array = None if index < 0 else array.flatten()[index]
    if array is None:
        return batch, _refuse(live, f"Unknown field: {field}")
    n = len(batch)
    if batch.tombstones is not None:  # a tombstone's value stays null
        array = pc.if_else(pc.fill_null(batch.tombstones, False), pa.nulls(n, array.type), array)
    return _whole(batch, array), {}


def _whole(batch: RecordBatch, value: pa.Array) -> RecordBatch:
    """``batch`` with its value columns replaced by ``value``, the whole (typed) value."""
    assert batch.value_columns is not None
    table = batch.table.drop_columns(list(batch.value_columns.values()))
    table = table.add_column(table.schema.get_field_index("headers"), "value", value)
    json_columns = set(batch.json_columns) - set(batch.value_columns.values())
    return replace(
        batch,
        table=table,
        value_columns=None,
        tombstones=None,
        json_columns=frozenset(json_columns),
    )


def _struct(columns: dict[str, pa.Array], mask: pa.Array | None) -> pa.StructArray:
    names = list(columns)
    return pa.StructArray.from_arrays(list(columns.values()), names=names, mask=mask)


def _hoist(batch: RecordBatch, field: str) -> RecordBatch:
    dead = None if batch.tombstones is None else pc.fill_null(batch.tombstones, False)
    wrapped = _struct(_columns(batch), dead)
    fields = read_fields(batch)
    fields.arrays = {field: wrapped}
    fields.json = set()
    out = write_fields(batch, fields)
    return replace(out, tombstones=pa.array([False] * len(batch), pa.bool_()))


def _flatten(
    batch: RecordBatch, delimiter: str, live: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    leaves: dict[str, pa.Array] = {}

    def walk(prefix: str, array: pa.Array) -> str | None:
        if pa.types.is_map(array.type):
            return (
                "Flatten transformation does not support MAP for record with schemas (for field"
                f" {prefix})."
            )
        if not pa.types.is_struct(array.type):
            leaves[prefix] = array
            return None
        for child, values in zip(array.type, array.flatten(), strict=True):
            problem = walk(f"{prefix}{delimiter}{child.name}", values)
            if problem is not None:
                return problem
        return None

    fields = read_fields(batch)
    for name, array in fields.arrays.items():
        problem = walk(name, array)
        if problem is not None:
            return batch, _refuse(live, problem)
    if list(leaves) == list(fields.arrays):
        return batch, {}
    fields.arrays = leaves
    return write_fields(batch, fields), {}


def _value_to_key(
    batch: RecordBatch, names: tuple[str, ...], where: pa.BooleanArray, live: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    columns = _columns(batch)
    missing = next((n for n in names if n not in columns), None)
    errors: Errors = {}
    if batch.tombstones is not None:  # no schema: Connect's schemaless refusal
        dead = pc.and_(where, pc.fill_null(batch.tombstones, False))
        errors.update(_refuse(dead, java.map_refusal(None, "copying fields from value to key")))
    if missing is not None:
        errors.update(_refuse(live, f"Field does not exist: {missing}"))
        return batch, errors
    key = _struct({n: columns[n] for n in names}, None)
    out = set_column(batch, "key", key, json=False)
    return replace(out, schemas=out.schemas | {"key"}), errors
