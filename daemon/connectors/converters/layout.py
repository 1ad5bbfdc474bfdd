"""Typed arrays of one poll laid out as columns, for the converters whose records carry a
schema (Schema Registry formats, Connect's JSON envelopes): ``TypedLayout``.

A poll is converted into groups, one per schema: the rows of the batch it covers and one Arrow
array holding their values. A value whose type is a struct (a record) gets a column per field
(a field named like a reserved column, ``key``/``value``/``headers``/``kafka_*``, becomes
``value_<name>``); any other value, and every key, is one column (``key`` or ``value``). The
layout is decided by the first schema seen and kept: a later group of the other kind is errant.
A field gets its column from the first schema that has it and keeps that column's type, but
for one change: a struct gains the fields a later schema adds to it, at any depth (``widened``;
earlier records hold nulls there). A later schema whose field has another type is cast where
Arrow can do it without loss (``int32`` to ``int64``), else its records are errant, naming the
field, the schema and both types. A field a later schema lacks is null in its records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from daemon.connectors.converters.base import Converted, Side
from daemon.connectors.records import value_column_names
from daemon.errors import ConversionError


def column_of(
    values: list[Any],
    raw: pa.DataType,
    arrow: pa.DataType,
    errors: dict[int, Exception],
    *,
    what: str = "value",
    rows: Sequence[int] | None = None,
) -> pa.Array:
    """``values`` (Python values a converter read) as one array of ``raw`` cast to ``arrow``, in
    one call; when the batch does not convert as a whole, each value that does not fit ``raw``
    (a number too wide for its type) is errant (``errors``, by its row: ``rows[j]``, else ``j``)
    and null."""
    try:
        column = pa.array(values, raw)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        for j, v in enumerate(values):
            if v is None:
                continue
            try:
                pa.array([v], raw)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                row = rows[j] if rows is not None else j
                errors[row] = ConversionError(f"the {what} does not fit its column: {e}")
                values[j] = None
        column = pa.array(values, raw)
    return column.cast(arrow) if column.type != arrow else column


@dataclass(frozen=True)
class Group:
    """The rows of a batch written with one schema (``label`` names it in messages: ``schema
    id 7``) and their values, one Arrow array."""

    label: str
    rows: list[int]
    array: pa.Array


class TypedLayout:
    """One converter's column layout (see the module docstring); not thread-safe, as the
    converter that holds it."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self._record: bool | None = None
        self._columns: dict[str, pa.DataType] = {}  # field (or the side) → its column's type

    def converted(
        self,
        n: int,
        groups: list[Group],
        errors: dict[int, Exception],
        tombstones: pa.Array | None,
    ) -> Converted:
        """The columns of a batch of ``n`` rows; rows in ``errors`` (more may be added) null."""
        if self.side == "value" and self._is_record(groups, errors):
            columns = self._field_columns(n, groups, errors)
            names = value_column_names(self._columns)
            return Converted(
                {names[f]: c for f, c in columns.items()},
                errors,
                value_columns=names,
                tombstones=tombstones,
                schema=True,
            )
        return Converted(
            {self.side: self._side_column(n, groups, errors)},
            errors,
            tombstones=tombstones,
            schema=True,
        )

    def _is_record(self, groups: list[Group], errors: dict[int, Exception]) -> bool:
        """Whether values are laid out a column per field: decided by the first schema seen;
        a group of the other kind afterwards is errant."""
        for g in list(groups):
            record = pa.types.is_struct(g.array.type)
            if self._record is None:
                self._record = record
            if record != self._record:
                what = "a record" if self._record else f"not a record ({g.array.type})"
                for i in g.rows:
                    errors.setdefault(
                        i,
                        ConversionError(
                            f"{g.label}: the values so far were {what}, this one is "
                            "not: one column layout per connector"
                        ),
                    )
                groups.remove(g)
        return bool(self._record)

    def _fitted(
        self, name: str, label: str, rows: list[int], array: pa.Array, errors: dict[int, Exception]
    ) -> pa.Array | None:
        """``array`` as its column's type (the first seen for ``name``), or None with its rows'
        non-null values errant when it cannot be cast without loss."""
        want = self._columns.setdefault(name, array.type)
        if array.type == want or pa.types.is_null(array.type):
            return array if array.type == want else pa.nulls(len(array), want)
        try:
            return array.cast(want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            why = ConversionError(
                f"field {name!r} is {array.type} in {label} but its column is {want} "
                "(a column's type never changes)"
            )
            for j, valid in enumerate(array.is_valid().to_pylist()):
                if valid:
                    errors.setdefault(rows[j], why)
            return None

    def _widen(self, name: str, type_: pa.DataType) -> None:
        """``name``'s column type takes the struct fields ``type_`` adds (``widened``); a
        first sight sets it."""
        if not pa.types.is_null(type_):
            had = self._columns.get(name)
            self._columns[name] = type_ if had is None else widened(had, type_)

    def _field_columns(
        self, n: int, groups: list[Group], errors: dict[int, Exception]
    ) -> dict[str, pa.Array]:
        for g in groups:
            for f in g.array.type:
                self._widen(f.name, f.type)
        parts: dict[str, list[tuple[list[int], pa.Array]]] = {f: [] for f in self._columns}
        for g in groups:
            for f in g.array.type:
                fitted = self._fitted(f.name, g.label, g.rows, g.array.field(f.name), errors)
                if fitted is not None:
                    parts[f.name].append((g.rows, fitted))
        return {f: _scatter(n, self._columns[f], parts[f], errors) for f in self._columns}

    def _side_column(self, n: int, groups: list[Group], errors: dict[int, Exception]) -> pa.Array:
        for g in groups:
            self._widen(self.side, g.array.type)
        parts = []
        for g in groups:
            fitted = self._fitted(self.side, g.label, g.rows, g.array, errors)
            if fitted is not None:
                parts.append((g.rows, fitted))
        return _scatter(n, self._columns.get(self.side, pa.null()), parts, errors)


def widened(want: pa.DataType, have: pa.DataType) -> pa.DataType:
    """``want`` with the fields ``have`` adds to its structs, at any depth (a struct's fields,
    a list's elements, a map's values), each after the struct's own and nullable: the one
    change a column's type takes. Any other difference leaves ``want`` (the cast decides)."""
    if pa.types.is_struct(want) and pa.types.is_struct(have):
        had = {f.name: f.type for f in have}
        own = {f.name for f in want}
        fields = [f.with_type(widened(f.type, had[f.name])) if f.name in had else f for f in want]
        fields += [f.with_nullable(True) for f in have if f.name not in own]
        return pa.struct(fields)
    for is_kind, make in (
        (pa.types.is_list, pa.list_),
        (pa.types.is_large_list, pa.large_list),
    ):
        if is_kind(want) and is_kind(have):
            element = want.value_field
            return make(element.with_type(widened(element.type, have.value_type)))
    if pa.types.is_map(want) and pa.types.is_map(have) and want.key_type == have.key_type:
        item = want.item_field
        return pa.map_(want.key_field, item.with_type(widened(item.type, have.item_type)))
    return want


def _scatter(
    n: int,
    type_: pa.DataType,
    parts: list[tuple[list[int], pa.Array]],
    errors: Mapping[int, Exception],
) -> pa.Array:
    """A column of ``n`` rows: row ``rows[j]`` of each part is its ``array[j]``; other rows (and
    errant ones) null. One ``take`` over the parts joined, its indices built in numpy: no Python
    step per value."""
    if not parts:
        return pa.nulls(n, type_)
    if len(parts) == 1 and len(parts[0][0]) == n and not errors:
        return parts[0][1]  # one schema, every row (rows are ascending): the array as it is
    where = np.full(n, -1, np.int64)
    at = 0
    for rows, array in parts:
        where[np.asarray(rows, np.int64)] = np.arange(at, at + len(rows), dtype=np.int64)
        at += len(array)
    if errors:
        where[np.fromiter(errors, np.int64, len(errors))] = -1
    joined = pa.concat_arrays([a for _, a in parts])
    return joined.take(pa.array(where, pa.int64(), mask=where < 0))
