"""A Protobuf message as a Connect schema and a reader of its messages, by the rules of
Confluent's ``ProtobufData`` (``toConnectSchema``, ``toConnectData``); what each type becomes is
in ``protobuf.py``'s docstring."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from daemon.connectors.converters import connectschema
from daemon.connectors.converters.registry import protofiles
from daemon.connectors.converters.registry.avro import SchemaRefused
from daemon.errors import ConversionError

_WRAPPERS = {
    "google.protobuf.DoubleValue": ("double", None),
    "google.protobuf.FloatValue": ("float", None),
    "google.protobuf.Int64Value": ("int64", None),
    "google.protobuf.UInt64Value": ("int64", 64),
    "google.protobuf.Int32Value": ("int32", None),
    "google.protobuf.UInt32Value": ("int64", None),
    "google.protobuf.BoolValue": ("boolean", None),
    "google.protobuf.StringValue": ("string", None),
    "google.protobuf.BytesValue": ("bytes", None),
}
_SIGNED32 = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32)
_INT64 = {
    FieldDescriptor.TYPE_UINT32: None,
    FieldDescriptor.TYPE_FIXED32: None,
    FieldDescriptor.TYPE_INT64: None,
    FieldDescriptor.TYPE_SINT64: None,
    FieldDescriptor.TYPE_SFIXED64: None,
    FieldDescriptor.TYPE_UINT64: 64,
    FieldDescriptor.TYPE_FIXED64: 64,
}
_PLAIN = {
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_BOOL: "boolean",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
}
_UNION = "io.confluent.connect.protobuf.Union."
_EPOCH = datetime.date(1970, 1, 1).toordinal()

Read = Callable[[Any], Any]


@dataclass(frozen=True)
class ProtobufOptions:
    """Confluent's ``ProtobufDataConfig`` settings that shape what a reader gives Connect."""

    int_for_enums: bool = False
    optional_for_nullables: bool = False
    optional_for_proto2: bool = True
    wrapper_for_nullables: bool = False
    wrapper_for_raw_primitives: bool = True
    generate_struct_for_nulls: bool = False
    generate_index_for_unions: bool = True
    flatten_unions: bool = False


def _wrap(bits: int | None) -> Read | None:
    if bits is None:
        return None
    return lambda v: connectschema._wrap(v, bits)


class StructRead:
    """A message → the struct's Python value (a dict); ``getters`` reads one field each, so a
    batch can also be read a column at a time (``protobuf.ProtobufType.decode``)."""

    __slots__ = ("getters",)

    def __init__(self, getters: tuple[tuple[str, Read], ...]) -> None:
        self.getters = getters

    def __call__(self, m: Any) -> dict[str, Any]:
        return {name: get(m) for name, get in self.getters}


class SchemaBuilder:
    """Builds one message's Connect schema and reader (``protobuf.ProtobufType``): ``top``.
    ``syntax`` caches each file's syntax (``proto2``, ``proto3``, ``editions``) by name."""

    def __init__(self, options: ProtobufOptions, syntax: dict[str, str]) -> None:
        self.options = options
        self.syntax = syntax
        self.stack: list[str] = []

    def top(self, desc: Descriptor) -> tuple[dict[str, Any], Read]:
        if desc.full_name in _WRAPPERS and self.options.wrapper_for_raw_primitives:
            return _unwrapped(desc.full_name, optional=False)
        return self.struct(desc)

    def struct(self, desc: Descriptor) -> tuple[dict[str, Any], Read]:
        if desc.full_name in self.stack:
            raise SchemaRefused(
                f"message {desc.full_name} contains itself: a recursive type has no column type"
            )
        self.stack.append(desc.full_name)
        synthetic, options = _field_options(desc)
        fields: list[dict[str, Any]] = []
        getters: list[tuple[str, Read]] = []
        real = [
            o for o in desc.oneofs if not (len(o.fields) == 1 and o.fields[0].name in synthetic)
        ]
        for oneof in real:
            if self.options.flatten_unions:
                for member in oneof.fields:
                    doc, conv = self.value(member, options[member.name])
                    fields.append({**doc, "optional": True, "field": member.name})
                    getters.append((member.name, _present(member.name, conv)))
            else:
                doc, get = self.union(oneof, options)
                name = oneof.name + (
                    f"_{oneof.index}" if self.options.generate_index_for_unions else ""
                )
                fields.append({**doc, "field": name})
                getters.append((name, get))
        in_real = {f.name for o in real for f in o.fields}
        proto2 = self._syntax(desc) == "proto2"
        for f in desc.fields:
            if f.name in in_real:
                continue
            doc, conv = self.value(f, options[f.name])
            keyword = f.name in synthetic or (
                proto2 and not f.is_repeated and not f.is_required and f.containing_oneof is None
            )
            doc["optional"] = self._optional(f, doc, keyword)
            message = f.type == FieldDescriptor.TYPE_MESSAGE and not _repeated(f)
            has_presence = f.name in synthetic or (self.options.optional_for_proto2 and keyword)
            if has_presence if not message else not self.options.generate_struct_for_nulls:
                getters.append((f.name, _present(f.name, conv)))
            else:
                getters.append((f.name, _always(f.name, conv)))
            fields.append({**doc, "field": f.name})
        self.stack.pop()
        if not fields:
            raise SchemaRefused(
                f"message {desc.full_name} has no fields: an empty struct has no column type"
            )
        return {"type": "struct", "name": desc.name, "fields": fields}, StructRead(tuple(getters))

    def union(self, oneof: Any, options: dict[str, bytes]) -> tuple[dict[str, Any], Read]:
        members: list[dict[str, Any]] = []
        convs: dict[str, Read | None] = {}
        for member in oneof.fields:
            doc, conv = self.value(member, options[member.name])
            members.append({**doc, "optional": True, "field": member.name})
            convs[member.name] = conv
        names = tuple(convs)
        which = oneof.name

        def read(m: Any) -> dict[str, Any] | None:
            chosen = m.WhichOneof(which)
            if chosen is None:
                return None
            out: dict[str, Any] = dict.fromkeys(names)
            conv = convs[chosen]
            v = getattr(m, chosen)
            out[chosen] = v if conv is None else conv(v)
            return out

        doc = {"type": "struct", "name": _UNION + oneof.name, "optional": True, "fields": members}
        return doc, read

    def value(self, f: FieldDescriptor, options: bytes) -> tuple[dict[str, Any], Read | None]:
        """A field's Connect schema and how its present value (what the message object gives,
        a container for repeated fields) becomes the column's (None: as it is)."""
        if f.type == FieldDescriptor.TYPE_GROUP:
            raise SchemaRefused(f"field {f.full_name} is a proto2 group, which is not read here")
        if _repeated(f) and _is_map(f):
            entry = f.message_type
            kdoc, kconv = self.value(entry.fields_by_name["key"], b"")
            vdoc, vconv = self.value(
                entry.fields_by_name["value"], _field_options(entry)[1]["value"]
            )
            doc = {"type": "map", "keys": kdoc, "values": vdoc, "optional": True}
            if kconv is None and vconv is None:
                return doc, lambda v: list(v.items())
            k = kconv or _same
            w = vconv or _same
            return doc, lambda v: [(k(a), w(b)) for a, b in v.items()]
        doc, conv = self.single(f, options)
        if not _repeated(f):
            return doc, conv
        array = {"type": "array", "items": {**doc, "optional": True}, "optional": True}
        if conv is None:
            return array, list
        return array, lambda v: [conv(x) for x in v]

    def single(self, f: FieldDescriptor, options: bytes) -> tuple[dict[str, Any], Read | None]:
        t = f.type
        if t in _SIGNED32:
            kind = protofiles.meta_params(options).get("connect.type") if options else None
            if kind in ("int8", "int16"):
                return {"type": kind}, _wrap(8 if kind == "int8" else 16)
            return {"type": "int32"}, None
        if t in _INT64:
            return {"type": "int64"}, _wrap(_INT64[t])
        if t in _PLAIN:
            return {"type": _PLAIN[t]}, None
        if t == FieldDescriptor.TYPE_ENUM:
            return self.enum(f)
        return self.message_field(f, options)

    def enum(self, f: FieldDescriptor) -> tuple[dict[str, Any], Read | None]:
        enum = f.enum_type
        if self.options.int_for_enums:
            return {"type": "int32", "optional": True}, None
        names = {v.number: v.name for v in enum.values}
        unknown = f"UNKNOWN_ENUM_VALUE_{enum.name}_"
        return {"type": "string", "optional": True}, lambda v: names.get(v) or f"{unknown}{v}"

    def message_field(self, f: FieldDescriptor, options: bytes) -> tuple[dict[str, Any], Read]:
        sub = f.message_type
        name = sub.full_name
        if name == "confluent.type.Decimal":
            params = protofiles.meta_params(options) if options else {}
            parameters = {"scale": params.get("scale", "0")}
            if "precision" in params:
                parameters["connect.decimal.precision"] = params["precision"]
            doc = {
                "type": "bytes",
                "name": connectschema.DECIMAL,
                "parameters": parameters,
                "optional": True,
            }
            try:
                fit = connectschema.typed_schema(doc, connectschema.Rules()).read
            except ConversionError as e:
                raise SchemaRefused(f"field {f.full_name}: {e}") from e
            return doc, lambda m: fit(_decimal(m))
        if name == "google.type.Date":
            return {"type": "int32", "name": connectschema.DATE, "optional": True}, _date
        if name == "google.type.TimeOfDay":
            return {"type": "int32", "name": connectschema.TIME, "optional": True}, _time
        if name == "google.protobuf.Timestamp":
            return {"type": "int64", "name": connectschema.TIMESTAMP, "optional": True}, _millis
        if name == "confluent.type.Variant":
            raise SchemaRefused(f"field {f.full_name} is a confluent.type.Variant: no column type")
        if name in _WRAPPERS and self.options.wrapper_for_nullables:
            return _unwrapped(name, optional=True)
        doc, read = self.struct(sub)
        return {**doc, "optional": True}, read

    def _optional(self, f: FieldDescriptor, doc: dict[str, Any], keyword: bool) -> bool:
        if doc.get("optional") or _repeated(f):
            return True
        if self.options.optional_for_nullables:
            return keyword
        return not self.options.wrapper_for_nullables

    def _syntax(self, desc: Descriptor) -> str:
        name = desc.file.name
        known = self.syntax.get(name)
        if known is None:
            proto = descriptor_pb2.FileDescriptorProto()
            desc.file.CopyToProto(proto)
            known = self.syntax[name] = proto.syntax or "proto2"
        return known


def _unwrapped(name: str, *, optional: bool) -> tuple[dict[str, Any], Read]:
    """A wrapper message (``google.protobuf.Int32Value``, ...) read as its ``value``."""
    kind, bits = _WRAPPERS[name]
    doc: dict[str, Any] = {"type": kind, "optional": True} if optional else {"type": kind}
    conv = _wrap(bits)
    if conv is None:
        return doc, lambda m: m.value
    return doc, lambda m: conv(m.value)


def _repeated(f: FieldDescriptor) -> bool:
    return bool(f.is_repeated)


def _is_map(f: FieldDescriptor) -> bool:
    """Confluent's test for a map field (``isMapDescriptor``)."""
    entry = f.message_type
    if entry is None or not entry.name.endswith("Entry") or len(entry.fields) != 2:
        return False
    key, value = entry.fields
    return (
        key.name == "key" and value.name == "value" and not _repeated(key) and not _repeated(value)
    )


def _field_options(desc: Descriptor) -> tuple[set[str], dict[str, bytes]]:
    """A message's fields that are proto3 ``optional``, and each field's serialized options
    (where Confluent's ``field_meta`` is)."""
    proto = descriptor_pb2.DescriptorProto()
    desc.CopyToProto(proto)
    synthetic = {f.name for f in proto.field if f.proto3_optional}
    return synthetic, {f.name: f.options.SerializeToString() for f in proto.field}


def _same(v: Any) -> Any:
    return v


def _present(name: str, conv: Read | None) -> Read:
    if conv is None:
        return lambda m: getattr(m, name) if m.HasField(name) else None
    return lambda m: conv(getattr(m, name)) if m.HasField(name) else None


def _always(name: str, conv: Read | None) -> Read:
    if conv is None:
        return lambda m: getattr(m, name)
    return lambda m: conv(getattr(m, name))


def _decimal(m: Any) -> decimal.Decimal:
    if not m.value:
        raise ConversionError("a confluent.type.Decimal without a value (Zero length BigInteger)")
    unscaled = int.from_bytes(m.value, "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-m.scale)


def _date(m: Any) -> int:
    try:
        return datetime.date(m.year, m.month, m.day).toordinal() - _EPOCH
    except ValueError as e:
        raise ConversionError(
            f"google.type.Date {m.year}-{m.month}-{m.day} is not a valid date: {e}"
        ) from None


def _time(m: Any) -> int:
    if not (0 <= m.hours < 24 and 0 <= m.minutes < 60 and 0 <= m.seconds < 60):
        raise ConversionError(
            f"google.type.TimeOfDay {m.hours}:{m.minutes}:{m.seconds} is not a valid time"
        )
    if not 0 <= m.nanos < 1_000_000_000:
        raise ConversionError(f"google.type.TimeOfDay nanos {m.nanos} is not valid")
    return int((m.hours * 3600 + m.minutes * 60 + m.seconds) * 1000 + m.nanos // 1_000_000)


#: ``Timestamps.checkValid``'s range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799


def _millis(m: Any) -> int:
    seconds, nanos = int(m.seconds), int(m.nanos)
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS and 0 <= nanos < 1_000_000_000):
        raise ConversionError(
            f"Timestamp is not valid. See proto definition for valid values. Seconds "
            f"({seconds}) must be in range [-62,135,596,800, +253,402,300,799]. Nanos ({nanos}) "
            "must be in range [0, +999,999,999]."
        )
    return seconds * 1000 + nanos // 1_000_000
