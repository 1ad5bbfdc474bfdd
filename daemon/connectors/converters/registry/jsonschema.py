"""JSON Schema through a Schema Registry (Confluent's ``JsonSchemaConverter``): a registered
JSON Schema as a Connect schema (the rules of Confluent's ``JsonSchemaData.toConnectSchema``),
and JSON payloads read into it as Confluent reads them (``JsonSchemaData.toConnectData``, whose
rules for each type are Connect's JsonConverter's: ``connectschema.py`` reads both).

A JSON Schema becomes:

- ``"type": "object"`` with ``properties``: a struct, fields in ``connect.index`` order where
  the schema has it, else as declared; a field is optional when the property is not in
  ``required`` and ``use.optional.for.nonrequired=true`` (Confluent's default is ``false``: every
  field is required, and an absent property is still read as null, as Confluent reads it);
  ``"connect.type": "map"``: a map of strings to ``additionalProperties``;
- ``integer``: int64, or int8/int16/int32 by ``connect.type``; ``number``: double, or float by
  ``connect.type``; ``string``: string (``connect.type: bytes``: base64 bytes); ``boolean``;
  ``array`` of ``items`` (``connect.type: map`` with key/value items: a map); ``enum`` and
  ``const``: string;
- ``"title"`` names a Connect logical type (``org.apache.kafka.connect.data.Decimal`` with
  ``connect.parameters`` ``scale``, ``Date``, ``Time``, ``Timestamp``), whose columns are those of
  ``connectschema.py``;
- ``oneOf`` / ``anyOf`` of ``null`` and one schema, and ``"type": [T, "null"]``: ``T``, optional;
  one subschema: that one; ``$ref`` to ``#``, ``#/definitions/…`` or ``#/$defs/…``: the schema
  referred to;
- any other ``oneOf`` / ``anyOf`` (and ``"type"`` listing several types): Confluent's union
  struct, one optional field per alternative that is not ``null``, named
  ``io.confluent.connect.json.OneOf.field.<i>`` (``connect_union_field_<i>`` with
  ``generalized.sum.type.support=true``), optional if an alternative is ``null``. A value sets
  the field of the first alternative whose type it has (an integer for an integer or number,
  a number for a number or for bytes, a string, a boolean, an array, an object for a map); an
  object for struct alternatives sets the one sharing the most property names with it
  (counted through nested structs), as ``JsonSchemaData.toConnectData`` chooses.

- ``allOf`` of several: as Confluent's ``allOfToConnectSchema``: the properties of all its
  object alternatives (through ``$ref`` and nested ``allOf``; a later property of the same name
  replaces an earlier) as one struct; else a union among them; else a string or a number that
  a ``const``, an ``enum`` or a ``format`` narrows; else the schema a ``$ref`` names.

Refused (the schema's records are errant, saying why): an ``allOf`` none of those rules reads
(Confluent refuses it too), an empty schema (any value: no column type), references to other
registered schemas, a recursive ``$ref``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from daemon.connectors.converters import connectschema
from daemon.connectors.converters.connectschema import UNION
from daemon.connectors.converters.layout import column_of
from daemon.connectors.converters.registry.avro import SchemaRefused
from daemon.connectors.converters.registry.columnar import Spans
from daemon.errors import ConversionError

_INTEGER_TYPES = {"int8", "int16", "int32", "int64"}
_NUMBER_TYPES = {"float32": "float", "float64": "double", "bytes": "bytes"}
#: Confluent's rules for nulls (``connectschema.Rules``).
RULES = connectschema.Rules(replace=True, absent_is_null=True)


ONE_OF = "io.confluent.connect.json.OneOf"
GENERALIZED_FIELD = "connect_union_field_"


def to_connect(
    doc: Any, *, optional_non_required: bool = False, generalized: bool = False
) -> dict[str, Any]:
    """The Connect schema (the JsonConverter envelope's form) of a JSON Schema document;
    ``SchemaRefused`` saying why for one that has no column types. ``generalized``: a union's
    field names as ``generalized.sum.type.support=true`` gives them."""
    translator = _Translator(doc, optional_non_required, generalized)
    return translator.schema(doc, optional=False, refs=())


class _Translator:
    def __init__(self, root: Any, optional_non_required: bool, generalized: bool) -> None:
        self.root = root
        self.optional_non_required = optional_non_required
        self.generalized = generalized
        self.unions = 0

    def schema(self, doc: Any, *, optional: bool, refs: tuple[str, ...]) -> dict[str, Any]:
        if doc is True or doc == {}:
            raise SchemaRefused("an empty schema (any value) has no column type")
        if not isinstance(doc, dict):
            raise SchemaRefused(f"not a JSON Schema: {json.dumps(doc)[:200]}")
        if "$ref" in doc:
            ref = doc["$ref"]
            if ref in refs:
                raise SchemaRefused(f"{ref} refers to itself: a recursive type has no column type")
            return self.schema(self._resolve(ref), optional=optional, refs=(*refs, ref))
        for key in ("oneOf", "anyOf"):
            if key in doc:
                return self._union(doc, doc[key], optional, refs)
        if "allOf" in doc:
            subs = doc["allOf"]
            if not isinstance(subs, list):
                raise SchemaRefused("allOf is not a list")
            if len(subs) == 1:
                return self.schema(subs[0], optional=optional, refs=refs)
            return self._all_of(subs, optional, refs)
        kind = doc.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if not others:
                raise SchemaRefused("a schema of null alone has no column type")
            if len(others) == 1:
                return self.schema(
                    {**doc, "type": others[0]}, optional=optional or "null" in kind, refs=refs
                )
            subs = [{**doc, "type": k} for k in kind]  # several types: a union of them
            return self._union(doc, subs, optional, refs)
        if "enum" in doc or "const" in doc:
            out: dict[str, Any] = {"type": "string"}
        elif (kind is None and "properties" in doc) or kind == "object":
            out = self._object(doc, refs)
        elif kind == "array":
            out = self._array(doc, refs)
        elif kind == "integer":
            connect = doc.get("connect.type", "int64")
            if connect not in _INTEGER_TYPES:
                raise SchemaRefused(f"connect.type {connect!r} on an integer")
            out = {"type": connect}
        elif kind == "number":
            connect = doc.get("connect.type")
            if connect is None:
                out = {"type": "double"}
            elif connect in _NUMBER_TYPES:
                out = {"type": _NUMBER_TYPES[connect]}
            elif connect in _INTEGER_TYPES:
                out = {"type": connect}
            else:
                raise SchemaRefused(f"connect.type {connect!r} on a number")
        elif kind == "string":
            out = {"type": "bytes" if doc.get("connect.type") == "bytes" else "string"}
        elif kind == "boolean":
            out = {"type": "boolean"}
        elif kind == "null":
            raise SchemaRefused("a schema of null alone has no column type")
        else:
            raise SchemaRefused("an empty schema (any value) has no column type")
        if isinstance(doc.get("title"), str):
            out["name"] = doc["title"]
        if isinstance(doc.get("connect.parameters"), dict):
            out["parameters"] = doc["connect.parameters"]
        if "default" in doc:
            out["default"] = doc["default"]
        if optional:
            out["optional"] = True
        return out

    def _resolve(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaRefused(f"$ref {ref!r}: references to other schemas are not read here")
        node = self.root
        for part in ref[1:].lstrip("/").split("/") if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise SchemaRefused(f"$ref {ref!r} points at nothing")
            node = node[part]
        return node

    def _union(
        self, doc: dict[str, Any], subs: Any, optional: bool, refs: tuple[str, ...]
    ) -> dict[str, Any]:
        if not isinstance(subs, list):
            raise SchemaRefused("oneOf/anyOf is not a list")
        if len(subs) == 1:
            return self.schema(subs[0], optional=optional, refs=refs)
        others = [s for s in subs if not (isinstance(s, dict) and s.get("type") == "null")]
        if len(subs) == 2 and len(others) == 1:
            inner = {**doc, **others[0]}
            for key in ("oneOf", "anyOf"):
                if key not in others[0]:
                    inner.pop(key, None)
            return self.schema(inner, optional=True, refs=refs)
        return self._one_of(subs, optional, refs)

    def _one_of(self, subs: list[Any], optional: bool, refs: tuple[str, ...]) -> dict[str, Any]:
        """Confluent's union struct: a field per alternative that is not null."""
        if self.generalized:
            name, prefix = f"connect_union_{self.unions}", GENERALIZED_FIELD
        else:
            name, prefix = ONE_OF, f"{ONE_OF}.field."
        self.unions += 1
        fields: list[dict[str, Any]] = []
        for sub in subs:
            if isinstance(sub, dict) and sub.get("type") == "null":
                optional = True
                continue
            branch = self.schema(sub, optional=True, refs=refs)
            fields.append({**branch, "field": f"{prefix}{len(fields)}"})
        out: dict[str, Any] = {"type": "struct", "name": name, "fields": fields, UNION: True}
        if optional:
            out["optional"] = True
        return out

    def _all_of(self, subs: list[Any], optional: bool, refs: tuple[str, ...]) -> dict[str, Any]:
        """Confluent's ``allOfToConnectSchema``: the properties of every object alternative
        (through ``$ref`` and nested ``allOf``) as one struct; else a union among them; else
        a string or number that a ``const``, ``enum`` or ``format`` only narrows; else the
        schema a ``$ref`` names."""
        properties: dict[str, Any] = {}
        required: dict[str, bool] = {}
        for sub in subs:
            self._collect(sub, properties, required, refs, set())
        if properties:
            fields = []
            for name, sub in properties.items():
                opt = self.optional_non_required and not required.get(name, False)
                fields.append({**self.schema(sub, optional=opt, refs=refs), "field": name})
            out: dict[str, Any] = {"type": "struct", "fields": fields}
            if optional:
                out["optional"] = True
            return out
        last: dict[str, Any] = {}  # of each kind, the last one (Confluent's loop keeps it)
        for sub in subs:
            if isinstance(sub, dict):
                last[_kind(sub)] = sub
        chosen = None
        if "combined" in last:
            chosen = last["combined"]
        elif "const" in last or "enum" in last:
            narrowed = "const" if "const" in last else "enum"
            if "string" in last:
                chosen = last["string"] if narrowed == "const" else last["enum"]
            elif "number" in last:
                chosen = last["number"]
        elif "string" in last and "format" in last["string"]:
            chosen = last.get("number", last["string"])
        elif "ref" in last:
            chosen = last["ref"]
        if chosen is None:
            raise SchemaRefused("allOf of these schemas has no column type (nor in Confluent)")
        return self.schema(chosen, optional=optional, refs=refs)

    def _collect(
        self,
        doc: Any,
        properties: dict[str, Any],
        required: dict[str, bool],
        refs: tuple[str, ...],
        seen: set[str],
    ) -> None:
        """Confluent's ``collectPropertySchemas``: the properties an ``allOf`` alternative
        brings, a later one replacing an earlier of the same name (in the earlier's place)."""
        if not isinstance(doc, dict):
            return
        if "$ref" in doc:
            ref = doc["$ref"]
            if isinstance(ref, str) and ref not in seen and ref not in refs:
                seen.add(ref)
                self._collect(self._resolve(ref), properties, required, refs, seen)
        elif isinstance(doc.get("allOf"), list):
            for sub in doc["allOf"]:
                self._collect(sub, properties, required, refs, seen)
        elif _kind(doc) == "object" and isinstance(doc.get("properties"), dict):
            needed = set(doc.get("required") or ())
            for name, sub in doc["properties"].items():
                properties[name] = sub
                required[name] = name in needed

    def _object(self, doc: dict[str, Any], refs: tuple[str, ...]) -> dict[str, Any]:
        if doc.get("connect.type") == "map":
            values = doc.get("additionalProperties")
            if not isinstance(values, dict):
                raise SchemaRefused("a map without additionalProperties has no value type")
            return {
                "type": "map",
                "keys": {"type": "string"},
                "values": self.schema(values, optional=False, refs=refs),
            }
        props = doc.get("properties") or {}
        if not isinstance(props, dict):
            raise SchemaRefused("properties is not an object")
        required = set(doc.get("required") or ())
        order = sorted(
            enumerate(props.items()),
            key=lambda item: (
                item[1][1].get("connect.index", item[0])
                if isinstance(item[1][1], dict)
                else item[0]
            ),
        )
        fields = []
        for _, (name, sub) in order:
            optional = self.optional_non_required and name not in required
            fields.append({**self.schema(sub, optional=optional, refs=refs), "field": name})
        return {"type": "struct", "fields": fields}

    def _array(self, doc: dict[str, Any], refs: tuple[str, ...]) -> dict[str, Any]:
        items = doc.get("items")
        if not isinstance(items, dict):
            raise SchemaRefused("Array schema did not specify the items type")
        if doc.get("connect.type") == "map" and isinstance(items.get("properties"), dict):
            p = items["properties"]
            if "key" in p and "value" in p:
                return {
                    "type": "map",
                    "keys": self.schema(p["key"], optional=False, refs=refs),
                    "values": self.schema(p["value"], optional=False, refs=refs),
                }
        return {"type": "array", "items": self.schema(items, optional=False, refs=refs)}


def _kind(doc: dict[str, Any]) -> str:
    """What Everit (Confluent's JSON Schema library) makes of one schema object, as far as
    ``allOf`` cares: ``ref``, ``combined``, ``const``, ``enum``, ``object``, ``number``,
    ``string`` or ``other``."""
    if "$ref" in doc:
        return "ref"
    if any(k in doc for k in ("oneOf", "anyOf", "allOf")):
        return "combined"
    kind = doc.get("type")
    if "const" in doc or "enum" in doc:
        # a typed const or enum is Everit's allOf of the two: a combined schema
        return "combined" if kind is not None else ("const" if "const" in doc else "enum")
    if kind == "object" or (kind is None and "properties" in doc):
        return "object"
    if kind in ("number", "integer"):
        return "number"
    if kind == "string":
        return "string"
    return "other"


@dataclass(frozen=True)
class JsonSchemaType:
    """One registered JSON Schema, ready to read payloads written with it."""

    typed: connectschema.Typed

    @classmethod
    def of(
        cls,
        text: str,
        references: Sequence[tuple[str, str]] = (),
        *,
        optional_non_required: bool = False,
        generalized: bool = False,
    ) -> JsonSchemaType:
        if references:
            raise SchemaRefused("references to other registered JSON Schemas are not read here")
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise SchemaRefused(f"not valid JSON: {e}") from e
        connect = to_connect(
            doc, optional_non_required=optional_non_required, generalized=generalized
        )
        try:
            typed = connectschema.typed_schema(connect, RULES)
        except ConversionError as e:
            raise SchemaRefused(str(e)) from e
        return cls(typed)

    def decode(self, bodies: Sequence[bytes] | Spans) -> tuple[pa.Array, dict[int, Exception]]:
        """Each payload (JSON text) read into the schema's column type; the ones that cannot be
        are null and in the errors, by index."""
        if isinstance(bodies, Spans):
            bodies = bodies.bodies()
        values: list[Any] = []
        errors: dict[int, Exception] = {}
        read = self.typed.read
        for i, body in enumerate(bodies):
            try:
                values.append(read(connectschema.loads(body.decode("utf-8"))))
            except (ValueError, ConversionError, RecursionError) as e:
                # UnicodeDecodeError and JSONDecodeError are ValueErrors
                errors[i] = (
                    e
                    if isinstance(e, ConversionError)
                    else ConversionError(f"the JSON payload cannot be read: {e}")
                )
                values.append(None)
        return column_of(values, self.typed.raw, self.typed.arrow, errors), errors
