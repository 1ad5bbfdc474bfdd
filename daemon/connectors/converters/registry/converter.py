"""Confluent's Schema Registry converters, for a whole poll at a time: ``AvroConverter``,
``ProtobufConverter``, ``JsonSchemaConverter``.

Each record is in Confluent's wire format: byte 0 (the magic byte), the schema id (4 bytes,
big-endian), then the payload written with that schema. A poll's records are laid end to end
in one buffer (``columnar.Spans``), their magic bytes and schema ids read from it at once, and
each schema id's group is decoded in one pass (``avro.AvroType.decode``). The schemas come from
the registry (``client.py``): an id not cached yet makes ``convert`` raise ``SchemasNeeded``,
the pipeline fetches it on the event loop and converts again.

Columns: ``layout.TypedLayout`` (a record value gets a column per field, anything else one
column; a column's type is kept across schema versions, cast without loss or errant).

Errant records (CONVERTER stage, left to ``errors.tolerance``): a value without the magic byte
or shorter than the header (Confluent's ``Unknown magic byte!``), a schema id the registry does
not know, a payload that cannot be read, a schema that cannot become columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa

from daemon.connectors.converters.base import (
    Converted,
    Converter,
    flag_option,
    unused_options,
)
from daemon.connectors.converters.layout import Group, TypedLayout
from daemon.connectors.converters.registry.avro import AvroType, SchemaRefused
from daemon.connectors.converters.registry.client import (
    RegistryClient,
    RegistrySettings,
    SchemasNeeded,
    known_options,
    unknown_options,
)
from daemon.connectors.converters.registry.columnar import Spans
from daemon.connectors.converters.registry.jsonschema import JsonSchemaType
from daemon.connectors.converters.registry.protobuf import ProtobufOptions, ProtobufType
from daemon.errors import ConversionError

#: Confluent's wire format: the magic byte, then a 4-byte schema id.
MAGIC = 0
HEADER = 5


class Decoder(Protocol):
    """A registered schema, compiled: reads the payloads written with it."""

    def decode(self, bodies: Spans) -> tuple[pa.Array, dict[int, Exception]]: ...


class RegistryConverter(Converter):
    """A Schema Registry converter: the wire format, the registry and the column layout; a
    subclass knows its schema type (``compile``)."""

    schema_type: ClassVar[str]
    #: The subclass's own settings (beside the registry client's and Confluent's others).
    own_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        super().__init__()
        self.client: RegistryClient | None = None
        self._types: dict[int, Any] = {}  # schema id → compiled type, or its SchemaRefused
        self.layout = TypedLayout("value")

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        settings = RegistrySettings.parse(options, f"{self.side}.converter.")
        self.unused = unused_options(
            unknown_options(options, self.own_options), known_options(self.own_options)
        )
        self.client = RegistryClient(settings)
        self.layout = TypedLayout(self.side)

    def compile(self, text: str, references: Sequence[tuple[str, str]]) -> Decoder:
        raise NotImplementedError

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        assert self.client is not None, "configure() first"
        n = len(data)
        errors: dict[int, Exception] = {}
        # The wire format, for the whole poll at once: one buffer, each record's magic byte and
        # schema id gathered from it (no Python step per record but the join).
        present = np.array([i for i, v in enumerate(data) if v is not None], np.int64)
        spans = Spans.of([data[i] or b"" for i in present.tolist()])
        buf, starts = spans.buf, spans.starts
        framed = (spans.ends - starts >= HEADER) & (buf[starts] == MAGIC)
        for i in present[~framed].tolist():
            errors[i] = ConversionError(
                f"Unknown magic byte! ({self.side} is not in the Schema Registry's wire "
                "format: byte 0, a 4-byte schema id, the payload)"
            )
        ids = np.zeros(len(present), np.int64)
        for k in range(1, HEADER):
            ids = (ids << 8) | buf[starts + k]
        groups = {int(sid): np.flatnonzero(framed & (ids == sid)) for sid in np.unique(ids[framed])}
        client = self.client
        missing = [
            s
            for s in groups
            if s not in self._types and client.cached(s) is None and s not in client.unknown
        ]
        if missing:
            raise SchemasNeeded(client, missing, keep=groups)
        decoded: list[Group] = []
        for sid, local in groups.items():
            rows = present[local].tolist()
            compiled = self._compiled(sid)
            if isinstance(compiled, Exception):
                for i in rows:
                    errors[i] = compiled
                continue
            array, bad = compiled.decode(spans.subset(local, HEADER))
            for j, e in bad.items():
                # a message of the schema that cannot become columns (protobuf.py)
                refused = isinstance(e, SchemaRefused)
                errors[rows[j]] = SchemaRefused(f"schema id {sid}: {e}") if refused else e
            decoded.append(Group(f"schema id {sid}", rows, array))
        # The compiled schemas are kept as many as the client's cache, the oldest leaving
        # first, but none this poll used.
        excess = len(self._types) - client.settings.cache_size
        for sid in list(self._types):
            if excess <= 0:
                break
            if sid not in groups:
                del self._types[sid]
                excess -= 1
        tombstones = pa.array([v is None for v in data], pa.bool_())
        return self.layout.converted(
            n, decoded, errors, tombstones if self.side == "value" else None
        )

    def _compiled(self, sid: int) -> Decoder | Exception:
        assert self.client is not None
        if sid in self._types:
            found: Decoder | Exception = self._types[sid]
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
                    f"schema id {sid} is registered as {schema.schema_type}; this converter reads "
                    f"{self.schema_type}"
                )
            compiled: Decoder | Exception = self.compile(schema.text, schema.references)
        except SchemaRefused as e:
            compiled = SchemaRefused(f"schema id {sid}: {e}")
        self._types[sid] = compiled
        return compiled


class AvroConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.avro.AvroConverter`` (see the module docstring and
    ``avro.py`` for the column types)."""

    connect_name = "io.confluent.connect.avro.AvroConverter"
    schema_type = "AVRO"
    own_options = ("enhanced.avro.schema.support", "generalized.sum.type.support")
    naming = "simple"  # a general union's field names (avro._branch_name)

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        prefix = f"{self.side}.converter."
        if flag_option(options, "generalized.sum.type.support", False, prefix):
            self.naming = "generalized"
        elif flag_option(options, "enhanced.avro.schema.support", False, prefix):
            self.naming = "full"
        else:
            self.naming = "simple"

    def compile(self, text: str, references: Sequence[tuple[str, str]]) -> AvroType:
        return AvroType.of(text, references, self.naming)


class JsonSchemaConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.json.JsonSchemaConverter``: JSON payloads whose JSON
    Schema, from the registry, gives the column types (``jsonschema.py``). Options
    ``use.optional.for.nonrequired`` (default ``false``, as Confluent's) and
    ``generalized.sum.type.support`` (a union's field names)."""

    connect_name = "io.confluent.connect.json.JsonSchemaConverter"
    schema_type = "JSON"
    own_options = ("use.optional.for.nonrequired", "generalized.sum.type.support")
    optional_non_required = False
    generalized = False  # a union's field names: connect_union_field_<i>

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        prefix = f"{self.side}.converter."
        self.optional_non_required = flag_option(
            options, "use.optional.for.nonrequired", False, prefix
        )
        self.generalized = flag_option(options, "generalized.sum.type.support", False, prefix)

    def compile(self, text: str, references: Sequence[tuple[str, str]]) -> JsonSchemaType:
        return JsonSchemaType.of(
            text,
            references,
            optional_non_required=self.optional_non_required,
            generalized=self.generalized,
        )


class ProtobufConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.protobuf.ProtobufConverter``: Protobuf payloads (after
    the message indexes) read into the registered message's columns (``protobuf.py``), with
    Confluent's ``ProtobufDataConfig`` settings that shape them."""

    connect_name = "io.confluent.connect.protobuf.ProtobufConverter"
    schema_type = "PROTOBUF"
    #: Confluent's settings and defaults (``ProtobufDataConfig``), as ``ProtobufOptions`` fields.
    flags: ClassVar[dict[str, bool]] = {
        "int.for.enums": False,
        "optional.for.nullables": False,
        "optional.for.proto2": True,
        "wrapper.for.nullables": False,
        "wrapper.for.raw.primitives": True,
        "generate.struct.for.nulls": False,
        "generate.index.for.unions": True,
        "flatten.unions": False,
    }
    #: ``generalized.sum.type.support`` changes only Connect's schema names here.
    own_options = (*flags, "generalized.sum.type.support")
    options = ProtobufOptions()

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        prefix = f"{self.side}.converter."
        self.options = ProtobufOptions(
            **{
                key.replace(".", "_"): flag_option(options, key, default, prefix)
                for key, default in self.flags.items()
            }
        )

    def compile(self, text: str, references: Sequence[tuple[str, str]]) -> ProtobufType:
        return ProtobufType.of(text, references, self.options)
