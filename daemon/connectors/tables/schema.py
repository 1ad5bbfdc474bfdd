"""A batch's columns against a table's schema, in the daemon, before ``put``: which records a
table sink must refuse (``SinkTask.reject``), checked with vectorised ``pyarrow.compute``.

A table's schema is ``[[column, Spark type]]`` (Spark's simple type strings: ``bigint``,
``string``, ``array<string>`` ...; ``""``: a column of any type, such as a Hive-style
partition column whose values are directory names), as the format's handle keeps it (from its
jobs, or from the data files). A batch column is compared through the Spark type its Arrow type
becomes when Spark reads the batch. A column whose Arrow type has no known Spark name here is
not judged: a commit job that checks with Spark's own types refuses the whole batch then.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.tables.sparktypes import difference, merged_columns
from daemon.errors import RecordRejected

#: ``[[column, Spark type]]``; a type ``""`` takes any type.
Schema = Sequence[Sequence[str]]

_SIMPLE: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "binary",
    pa.large_binary(): "binary",
    pa.date32(): "date",
}


def spark_type(t: pa.DataType) -> str | None:
    """The Spark simple type string Spark reads ``t`` as, or None if not known here."""
    if t in _SIMPLE:
        return _SIMPLE[t]
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = spark_type(t.value_type)
        return None if inner is None else f"array<{inner}>"
    if pa.types.is_map(t):
        k, v = spark_type(t.key_type), spark_type(t.item_type)
        return None if k is None or v is None else f"map<{k},{v}>"
    if pa.types.is_struct(t):
        parts = []
        for i in range(t.num_fields):
            f = t.field(i)
            inner = spark_type(f.type)
            if inner is None:
                return None
            parts.append(f"{f.name}:{inner}")
        return f"struct<{','.join(parts)}>"
    return None


def refused_rows(
    table: pa.Table,
    schema: Schema,
    *,
    new_columns: bool,
    rows: pa.Array | None = None,
) -> dict[int, BaseException]:
    """Rows of ``table`` (among ``rows``, a boolean mask; all if None) that a table with
    ``schema`` cannot take: a non-null value in a column of another type, or, unless
    ``new_columns``, in a column the table lacks or a struct column with fields the table's
    lacks (``sparktypes``). By row index, with the reason."""
    columns = {str(c): str(t) for c, t in schema}
    refused: dict[int, BaseException] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        have = spark_type(column.type)
        want = columns.get(name)
        if want is None:
            if new_columns or column.null_count == len(column):
                continue
            why = f"field {name} is not a column of the table and schema.evolution=false"
        elif have is None or want in (have, "") or column.null_count == len(column):
            continue
        else:
            diff = difference(name, have, want)
            if diff.other is not None:
                path, was, is_ = diff.other
                why = (
                    f"field {path} is {was} here but the table's column is {is_} (a column's"
                    " type never changes; a struct may only gain fields)"
                )
            elif diff.new and not new_columns:
                why = f"field {diff.new[0]} is not a column of the table and schema.evolution=false"
            else:
                continue
        mask = pc.is_valid(column)
        if rows is not None:
            mask = pc.and_(mask, rows)
        for i in pc.indices_nonzero(mask).to_pylist():
            refused.setdefault(int(i), RecordRejected(why))
    return refused


def fitted(table: pa.Table, schema: Schema | None) -> pa.Table:
    """``table`` without columns that hold only nulls and that the table's schema would
    refuse (another type, or no such column): left after ``reject`` took their records out,
    they would fail the commit; the commit fills the table's columns a batch lacks with nulls."""
    columns = {str(c): str(t) for c, t in schema or ()}

    def refused(name: str, column: pa.ChunkedArray) -> bool:
        if pa.types.is_null(column.type):  # Spark's void type: no table format stores it
            return True
        want = columns.get(name)
        if want is None:
            return schema is not None
        # Another type, or a struct with other fields: its nulls are the table's own.
        return want != "" and spark_type(column.type) not in (None, want)

    drop = [
        name
        for name, column in zip(table.column_names, table.columns, strict=True)
        if column.null_count == len(column) and refused(name, column)
    ]
    return table.drop_columns(drop) if drop else table


def merged(schema: Schema | None, table: pa.Table) -> list[list[str]]:
    """``schema`` with the columns of ``table`` (just committed) it lacks, by their Spark
    types (``""`` where unknown here), and the fields its struct columns gained."""
    return merged_columns(
        schema or (),
        (
            (name, spark_type(column.type) or "")
            for name, column in zip(table.column_names, table.columns, strict=True)
            if not pa.types.is_null(column.type)
        ),
    )
