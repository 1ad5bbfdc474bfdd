"""Confluent's Schema Registry converters, for a whole poll at a time: ``AvroConverter``.

Each record is in Confluent's wire format: byte 0 (the magic byte), the schema id (4 bytes,
big-endian), then the payload written with that schema. A poll's records are grouped by schema
id and each group is decoded in one pass (``avro.AvroType.decode``). The schemas come from the
registry (``client.py``): an id not cached yet makes ``convert`` raise ``SchemasNeeded``, the
pipeline fetches it on the event loop and converts again.

Columns: a value whose schema is a record gets one column per field (a field named like a
reserved column, ``key``/``value``/``headers``/``kafka_*``, becomes ``value_<name>``), as
JsonConverter's ``fields`` mode does; any other value, and every key, is one column (``key``
or ``value``) of the schema's type. A field gets its column from the first schema that has it
and keeps that column's type: a later schema version whose field has another type is cast
where Arrow can do it without loss (``int`` → ``long``, ``float`` → ``double``), else its
records are errant, naming the field, the schema id and both types. A field a later version
drops is null in its records; a field it adds is a new column (the table takes it under
``schema.evolution=true``).

Errant records (CONVERTER stage, left to ``errors.tolerance``): a value without the magic byte
or shorter than the header (Confluent's ``Unknown magic byte!``), a schema id the registry does
not know, a payload that cannot be read, a schema that cannot become columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa

from daemon.connectors.converters.base import Converted, Converter
from daemon.connectors.converters.registry.avro import AvroType, SchemaRefused
from daemon.connectors.converters.registry.client import (
    RegistryClient,
    RegistrySettings,
    SchemasNeeded,
)
from daemon.connectors.records import value_column_names
from daemon.errors import ConversionError

#: Confluent's wire format: the magic byte, then a 4-byte schema id.
MAGIC = 0
HEADER = 5


class RegistryConverter(Converter):
    """A Schema Registry converter: the wire format, the registry and the column layout; a
    subclass knows its schema type (``compile``)."""

    schema_type: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self.client: RegistryClient | None = None
        self._types: dict[int, Any] = {}  # schema id → compiled type, or its SchemaRefused
        self._record: bool | None = None  # values are records: a column per field
        self._columns: dict[str, pa.DataType] = {}  # field (or the side) → its column's type

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        settings = RegistrySettings.parse(options, f"{self.side}.converter.")
        self.client = RegistryClient(settings)

    def compile(self, text: str, references: Sequence[tuple[str, str]]) -> AvroType:
        raise NotImplementedError

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        assert self.client is not None, "configure() first"
        n = len(data)
        errors: dict[int, Exception] = {}
        groups: dict[int, list[int]] = {}
        for i, v in enumerate(data):
            if v is None:
                continue
            if len(v) < HEADER or v[0] != MAGIC:
                errors[i] = ConversionError(
                    f"Unknown magic byte! ({self.side} is not in the Schema Registry's wire "
                    "format: byte 0, a 4-byte schema id, the payload)"
                )
                continue
            groups.setdefault(int.from_bytes(v[1:HEADER], "big"), []).append(i)
        client = self.client
        missing = [s for s in groups if client.cached(s) is None and s not in client.unknown]
        if missing:
            raise SchemasNeeded(client, missing)
        decoded: list[tuple[int, list[int], pa.Array]] = []
        for sid, rows in groups.items():
            compiled = self._compiled(sid)
            if isinstance(compiled, Exception):
                for i in rows:
                    errors[i] = compiled
                continue
            array, bad = compiled.decode([data[i][HEADER:] for i in rows])  # type: ignore[index]
            for j, e in bad.items():
                errors[rows[j]] = e
            decoded.append((sid, rows, array))
        tombstones = pa.array([v is None for v in data], pa.bool_())
        if self.side == "value" and self._is_record(decoded, errors):
            columns = self._field_columns(n, decoded, errors)
            names = value_column_names(self._columns)
            return Converted(
                {names[f]: c for f, c in columns.items()},
                errors,
                value_columns=names,
                tombstones=tombstones,
            )
        column = self._side_column(n, decoded, errors)
        return Converted(
            {self.side: column},
            errors,
            tombstones=tombstones if self.side == "value" else None,
        )

    def _compiled(self, sid: int) -> AvroType | Exception:
        assert self.client is not None
        if sid in self._types:
            found: AvroType | Exception = self._types[sid]
            return found
        if sid in self.client.unknown:
            return ConversionError(
                f"schema id {sid} is not in the Schema Registry: {self.client.unknown[sid]}"
            )
        schema = self.client.cached(sid)
        assert schema is not None
        try:
            if schema.schema_type != self.schema_type:
                raise SchemaRefused(
                    f"schema id {sid} is a {schema.schema_type} schema; this converter reads "
                    f"{self.schema_type}"
                )
            compiled: AvroType | Exception = self.compile(schema.text, schema.references)
        except SchemaRefused as e:
            compiled = SchemaRefused(f"schema id {sid}: {e}")
        self._types[sid] = compiled
        return compiled

    def _is_record(
        self, decoded: list[tuple[int, list[int], pa.Array]], errors: dict[int, Exception]
    ) -> bool:
        """Whether values are laid out a column per field: decided by the first schema seen;
        a group of the other kind afterwards is errant."""
        for sid, rows, array in list(decoded):
            record = pa.types.is_struct(array.type)
            if self._record is None:
                self._record = record
            if record != self._record:
                what = "a record" if self._record else f"not a record ({array.type})"
                for i in rows:
                    errors.setdefault(
                        i,
                        ConversionError(
                            f"schema id {sid}: the values so far were {what}, this one is "
                            "not: one column layout per connector"
                        ),
                    )
                decoded.remove((sid, rows, array))
        return bool(self._record)

    def _fitted(
        self, name: str, sid: int, rows: list[int], array: pa.Array, errors: dict[int, Exception]
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
                f"field {name!r} is {array.type} in schema id {sid} but its column is {want} "
                "(a column's type never changes)"
            )
            for j, valid in enumerate(array.is_valid().to_pylist()):
                if valid:
                    errors.setdefault(rows[j], why)
            return None

    def _field_columns(
        self, n: int, decoded: list[tuple[int, list[int], pa.Array]], errors: dict[int, Exception]
    ) -> dict[str, pa.Array]:
        for _, _, array in decoded:
            for f in array.type:
                if not pa.types.is_null(f.type):
                    self._columns.setdefault(f.name, f.type)
        parts: dict[str, list[tuple[list[int], pa.Array]]] = {f: [] for f in self._columns}
        for sid, rows, array in decoded:
            for f in array.type:
                fitted = self._fitted(f.name, sid, rows, array.field(f.name), errors)
                if fitted is not None:
                    parts[f.name].append((rows, fitted))
        return {f: _scatter(n, self._columns[f], parts[f], errors) for f in self._columns}

    def _side_column(
        self, n: int, decoded: list[tuple[int, list[int], pa.Array]], errors: dict[int, Exception]
    ) -> pa.Array:
        parts = []
        for sid, rows, array in decoded:
            fitted = self._fitted(self.side, sid, rows, array, errors)
            if fitted is not None:
                parts.append((rows, fitted))
        return _scatter(n, self._columns.get(self.side, pa.null()), parts, errors)


def _scatter(
    n: int,
    type_: pa.DataType,
    parts: list[tuple[list[int], pa.Array]],
    errors: Mapping[int, Exception],
) -> pa.Array:
    """A column of ``n`` rows: row ``rows[j]`` of each part is its ``array[j]``; other rows (and
    errant ones) null. One ``take`` over the parts joined, no Python step per value."""
    if not parts:
        return pa.nulls(n, type_)
    where: list[int | None] = [None] * n
    at = 0
    for rows, array in parts:
        for j, i in enumerate(rows):
            if i not in errors:
                where[i] = at + j
        at += len(array)
    joined = pa.concat_arrays([a for _, a in parts])
    return joined.take(pa.array(where, pa.int64()))


class AvroConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.avro.AvroConverter`` (see the module docstring and
    ``avro.py`` for the column types)."""

    connect_name = "io.confluent.connect.avro.AvroConverter"
    schema_type = "AVRO"

    def compile(self, text: str, references: Sequence[tuple[str, str]]) -> AvroType:
        return AvroType.of(text, references)
