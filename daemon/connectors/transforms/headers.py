"""Connect's header transforms: ``DropHeaders``, ``InsertHeader`` and ``HeaderFrom``
(``$Key``/``$Value``). A header's value is bytes here, as the record carried it; a value a
transform puts in a header is written as Connect's ``SimpleHeaderConverter`` writes it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.connectors.records import RecordBatch
from daemon.connectors.transforms import java
from daemon.connectors.transforms.fields import (
    Errors,
    dumps,
    live_rows,
    plain_with_schema,
    read_fields,
    set_column,
    write_fields,
)
from daemon.connectors.transforms.java import TransformError


def insert_header(
    batch: RecordBatch, name: str, value: bytes, rows: pa.BooleanArray
) -> RecordBatch:
    """InsertHeader: a header ``name`` with ``value`` (the literal's UTF-8 bytes, what Connect's
    ``SimpleHeaderConverter`` writes for it) added last to the ``rows`` it applies to."""
    table = batch.table
    index = table.schema.get_field_index("headers")
    column = table.column(index).combine_chunks()
    added = {"key": name, "value": value}
    headers = [
        [*(h or []), added] if on else h
        for h, on in zip(column.to_pylist(), rows.to_pylist(), strict=True)
    ]
    array = pa.array(headers, column.type)
    return replace(batch, table=table.set_column(index, table.schema.field(index), array))


def drop_headers(batch: RecordBatch, names: Sequence[str], rows: pa.BooleanArray) -> RecordBatch:
    """DropHeaders: every header named one of ``names`` leaves the ``rows`` it applies to.

    On the list column's buffers: the header structs to keep are filtered out of its values,
    and each row's offset moves back by the headers dropped before it."""
    table = batch.table
    column = table.column("headers").combine_chunks()
    offsets = column.offsets
    base = offsets[0].as_py()
    values = column.values.slice(base, offsets[-1].as_py() - base)
    relative = pc.subtract(offsets, base)
    owner = pc.list_parent_indices(pa.ListArray.from_arrays(relative, values))
    gone = pc.and_(
        pc.is_in(pc.struct_field(values, [0]), value_set=pa.array(list(names), pa.string())),
        pc.take(rows, owner),
    )
    gone = pc.fill_null(gone, False)
    if not pc.any(gone).as_py():
        return batch
    dropped = pc.cumulative_sum(gone.cast(offsets.type))
    before = pa.concat_arrays([pa.array([0], offsets.type), dropped])
    headers = pa.ListArray.from_arrays(
        pc.subtract(relative, pc.take(before, relative)),
        pc.filter(values, pc.invert(gone)),
        type=column.type,
        mask=pc.is_null(column) if column.null_count else None,
    )
    index = table.schema.get_field_index("headers")
    return replace(batch, table=table.set_column(index, table.schema.field(index), headers))


def header_from(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """HeaderFrom: each of ``fields`` of the key or value becomes the header named at the same
    place in ``headers`` (a missing field: a null header), and ``move`` takes it out of the
    key or value. A key or value that is no map (a tombstone too) is refused."""
    c = spec.config
    names, headers = tf.names(c["fields"]), tf.names(c["headers"])
    operation = c["operation"]
    side = tf.side(spec.cls)
    columns = side == "value" and batch.value_columns is not None
    if columns:
        values: list[Any] = batch.value_objects()
    else:
        values = batch.table.column(side).to_pylist()
        if side in batch.json_columns:
            values = [None if v is None else json.loads(v) for v in values]
    errors: Errors = {}
    added: dict[int, list[dict[str, Any]]] = {}
    for i, on in enumerate(where.to_pylist()):
        if not on:
            continue
        try:
            value = java.require_map(values[i], f"header {operation}")
        except TransformError as e:
            errors[i] = java.with_schema(str(e)) if plain_with_schema(batch, side) else str(e)
            continue
        added[i] = [
            {"key": h, "value": java.header_bytes(value.get(f))}
            for f, h in zip(names, headers, strict=True)
        ]
        if operation == "move" and not columns:
            values[i] = {k: v for k, v in value.items() if k not in names}
    batch = _add_headers(batch, added)
    if operation != "move":
        return batch, errors
    if columns:
        fields = read_fields(batch)
        moved = live_rows(batch, where)
        every = pc.all(moved).as_py()
        for f in names:
            array = fields.arrays.get(f)
            if array is None:
                continue
            if every:
                del fields.arrays[f]
                fields.json.discard(f)
            else:
                fields.arrays[f] = pc.if_else(moved, pa.nulls(len(array), array.type), array)
        return write_fields(batch, fields), errors
    if side not in batch.json_columns:
        return batch, errors  # a plain value is no map: every applied row was refused
    texts = [None if v is None else dumps(v) for v in values]
    return set_column(batch, side, pa.array(texts, pa.string()), json=True), errors


def _add_headers(batch: RecordBatch, added: dict[int, list[dict[str, Any]]]) -> RecordBatch:
    if not added:
        return batch
    table = batch.table
    index = table.schema.get_field_index("headers")
    column = table.column(index).combine_chunks()
    rows = column.to_pylist()
    for i, extra in added.items():
        rows[i] = [*(rows[i] or []), *extra]
    array = pa.array(rows, column.type)
    return replace(batch, table=table.set_column(index, table.schema.field(index), array))
