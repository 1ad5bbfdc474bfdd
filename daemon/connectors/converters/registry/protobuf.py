"""Protobuf through a Schema Registry (Confluent's ``ProtobufConverter``): a registered schema's
message as a Connect schema, by the rules of Confluent's ``ProtobufData.toConnectSchema``, and
payloads read into it as its ``toConnectData`` reads them. Messages are parsed by Google's
``protobuf`` runtime (upb, in C); the schema's files come from ``protofiles.py``.

The wire format after the schema id: the message indexes (a zigzag varint count, then that many
indexes; a single 0 byte for the file's first message) pick the message in the schema's file,
then the message's bytes. One schema id is read as one message type: the first the connector
meets; a record of another message of the same schema is errant (one column layout).

A message becomes a struct, its fields in Confluent's order: each real ``oneof`` first, as an
optional struct named ``<oneof>_<index>`` (``generate.index.for.unions``, default true; without
it ``<oneof>``) holding its members, only the set one not null (``flatten.unions=true``: the
members as fields of their own), then the other fields as declared. Fields:

====================================================  ========================================
Protobuf                                              Connect (column: ``connectschema.py``)
====================================================  ========================================
``int32``, ``sint32``, ``sfixed32``                   int32 (int8/int16 by ``connect.type``)
``uint32``, ``fixed32``, all 64-bit integers          int64 (``uint64`` above 2^63 wraps, as
                                                      in Java)
``float``, ``double``, ``bool``, ``string``, ``bytes``  float32, float64, boolean, string, bytes
``enum``                                              string, the value's name (an unknown
                                                      number: ``UNKNOWN_ENUM_VALUE_<Enum>_<n>``,
                                                      as Java names it); int32 with
                                                      ``int.for.enums=true``
``repeated T``                                        array of T; ``map<K, V>``: map
a message                                             struct (null when absent;
                                                      ``generate.struct.for.nulls=true``: its
                                                      defaults)
``google.protobuf.Timestamp``                         Timestamp (ms; ``Timestamps.toMillis``)
``google.type.Date``, ``google.type.TimeOfDay``       Date, Time
``confluent.type.Decimal``                            Decimal, scale and precision from the
                                                      field's ``(confluent.field_meta).params``
wrappers (``google.protobuf.Int32Value``, ...)        a struct of ``value``; the optional value
                                                      itself with ``wrapper.for.nullables=true``;
                                                      a registered schema that is a wrapper:
                                                      its value (``wrapper.for.raw.primitives``)
====================================================  ========================================

A scalar field without presence has its value (its default when unset); one with presence
(``optional`` in proto3, and in proto2 under ``optional.for.proto2``, Confluent's default) is
null when unset. A Date is read on the proleptic Gregorian calendar (Arrow's and Spark's; Java's
Calendar switches to the Julian one before 1582-10-15).

Refused (the schema's records are errant, saying why): a message that contains itself, one with
no fields, ``confluent.type.Variant``, proto2 groups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.message import DecodeError

from daemon.connectors.converters import connectschema
from daemon.connectors.converters.layout import column_of
from daemon.connectors.converters.registry import protofiles
from daemon.connectors.converters.registry.avro import SchemaRefused
from daemon.connectors.converters.registry.columnar import Spans
from daemon.connectors.converters.registry.protoschema import (
    ProtobufOptions,
    Read,
    SchemaBuilder,
    StructRead,
)
from daemon.errors import ConversionError

__all__ = ["Message", "ProtobufOptions", "ProtobufType"]

#: Records parsed and read at a time.
CHUNK = 512


@dataclass
class Message:
    """One message type of a schema, compiled: its Connect schema, column types and reader."""

    name: str
    doc: dict[str, Any]
    typed: connectschema.Typed
    parse: Callable[[Any], Any]  # bytes → the message object
    read: Read  # the message object → the column's Python value


@dataclass
class ProtobufType:
    """One registered Protobuf schema, ready to read the payloads written with it."""

    pool: Any
    file: descriptor_pb2.FileDescriptorProto
    options: ProtobufOptions
    syntax: dict[str, str]  # file name → its syntax
    _messages: dict[tuple[int, ...], Message | SchemaRefused] = field(default_factory=dict)
    _path: tuple[int, ...] | None = None  # the message type this connector reads

    @classmethod
    def of(
        cls,
        text: str,
        references: Sequence[tuple[str, str]] = (),
        options: ProtobufOptions | None = None,
    ) -> ProtobufType:
        pool, main = protofiles.file_set(text, references)
        if not main.message_type:
            raise SchemaRefused("the schema defines no message")
        return cls(pool, main, options or ProtobufOptions(), {})

    def message(self, path: tuple[int, ...]) -> Message:
        """The message the wire format's indexes ``path`` pick; ``SchemaRefused``."""
        found = self._messages.get(path)
        if found is None:
            try:
                found = self._compile(path)
            except SchemaRefused as e:
                found = e
            self._messages[path] = found
        if isinstance(found, SchemaRefused):
            raise found
        return found

    def _compile(self, path: tuple[int, ...]) -> Message:
        types = self.file.message_type
        names: list[str] = [self.file.package] if self.file.package else []
        for depth, i in enumerate(path):
            if not 0 <= i < len(types):
                raise SchemaRefused(
                    f"message indexes {list(path)} point past the schema's messages "
                    f"(level {depth} has {len(types)})"
                )
            names.append(types[i].name)
            types = types[i].nested_type
        full = ".".join(names)
        desc = self.pool.FindMessageTypeByName(full)
        doc, read = SchemaBuilder(self.options, self.syntax).top(desc)
        try:
            typed = connectschema.typed_schema(doc, connectschema.Rules())
        except ConversionError as e:
            raise SchemaRefused(f"message {full}: {e}") from e
        parse = message_factory.GetMessageClass(desc).FromString
        return Message(full, doc, typed, parse, read)

    def decode(self, bodies: Sequence[bytes] | Spans) -> tuple[pa.Array, dict[int, Exception]]:
        """Each payload (message indexes, then the message) read into the column type of the
        connector's message; the ones that cannot be are null and in the errors, by index.
        ``CHUNK`` records at a time: parsing costs twice as much per message with 5,000 of
        them alive as with 500 (measured: bench/avro_decode_bench.py)."""
        if isinstance(bodies, Spans):
            bodies = bodies.bodies()
        if len(bodies) <= CHUNK:
            return self._decode(bodies)
        errors: dict[int, Exception] = {}
        parts: list[pa.Array] = []
        for start in range(0, len(bodies), CHUNK):
            part, bad = self._decode(bodies[start : start + CHUNK])
            errors.update((start + j, e) for j, e in bad.items())
            parts.append(part)
        types = {p.type for p in parts if not pa.types.is_null(p.type)}
        if len(types) == 1:
            [kind] = types
            parts = [p if p.type == kind else pa.nulls(len(p), kind) for p in parts]
        elif not types:
            return pa.nulls(len(bodies)), errors
        return pa.concat_arrays(parts), errors

    def _decode(self, bodies: Sequence[bytes]) -> tuple[pa.Array, dict[int, Exception]]:
        errors: dict[int, Exception] = {}
        parsed: list[Any] = [None] * len(bodies)
        chosen: Message | None = None
        for i, body in enumerate(bodies):
            try:
                path, at = _indexes(body)
                if self._path is None:
                    self.message(path)  # refused: this record is errant, the next may choose
                    self._path = path
                if path != self._path:
                    raise ConversionError(
                        f"the record is message {self._name(path)} but this connector reads "
                        f"message {self._name(self._path)} of the schema: one message type per "
                        "schema id"
                    )
                chosen = self.message(path)
                parsed[i] = chosen.parse(memoryview(body)[at:])
            except DecodeError as e:
                errors[i] = ConversionError(f"the Protobuf payload cannot be read: {e}")
            except (ConversionError, SchemaRefused) as e:
                errors[i] = e
        if chosen is None:
            if self._path is None:
                return pa.nulls(len(bodies)), errors
            chosen = self.message(self._path)
        t = chosen.typed
        if isinstance(chosen.read, StructRead):
            return self._struct(chosen.read, parsed, t, errors), errors
        values = _read_all(chosen.read, parsed, errors)
        return column_of(values, t.raw, t.arrow, errors, what="Protobuf value"), errors

    @staticmethod
    def _struct(
        read: StructRead,
        parsed: list[Any],
        t: connectschema.Typed,
        errors: dict[int, Exception],
    ) -> pa.Array:
        """A struct column built a field at a time (no dict per record); rows errant in any
        field null."""
        raw: list[Any] = []
        for (_, get), f in zip(read.getters, t.raw, strict=True):
            values = _read_all(get, parsed, errors)
            raw.append((f, values))
        arrays = [
            column_of(values, f.type, f.type, errors, what=f"Protobuf field {f.name!r}")
            for f, values in raw
        ]
        mask = pa.array([m is None or i in errors for i, m in enumerate(parsed)], pa.bool_())
        column = pa.StructArray.from_arrays(arrays, fields=list(t.raw), mask=mask)
        return column.cast(t.arrow) if column.type != t.arrow else column

    def _name(self, path: tuple[int, ...]) -> str:
        try:
            return self.message(path).name
        except SchemaRefused:
            return f"at indexes {list(path)}"


def _read_all(read: Read, parsed: list[Any], errors: dict[int, Exception]) -> list[Any]:
    """``read`` of each parsed message (None where there is none); a message it cannot read
    (a Timestamp out of range, a Decimal wider than its column) errant."""
    try:
        return [None if m is None else read(m) for m in parsed]
    except (ConversionError, ValueError, OverflowError, TypeError):
        pass
    values: list[Any] = []
    for i, m in enumerate(parsed):
        try:
            values.append(None if m is None else read(m))
        except ConversionError as e:
            errors.setdefault(i, e)
            values.append(None)
        except (ValueError, OverflowError, TypeError) as e:
            errors.setdefault(i, ConversionError(f"the Protobuf value cannot be read: {e}"))
            values.append(None)
    return values


def _indexes(body: bytes) -> tuple[tuple[int, ...], int]:
    """The message indexes at the start of ``body`` and where the message starts."""
    count, at = _zigzag(body, 0)
    if count == 0:
        return (0,), at
    if not 0 < count <= 256:
        raise ConversionError(f"the payload's message index count {count} is not valid")
    path = []
    for _ in range(count):
        i, at = _zigzag(body, at)
        path.append(i)
    return tuple(path), at


def _zigzag(body: bytes, at: int) -> tuple[int, int]:
    try:
        value, at = protofiles.varint(body, at)
    except IndexError:
        raise ConversionError("the payload ends inside its message indexes") from None
    return (value >> 1) ^ -(value & 1), at
