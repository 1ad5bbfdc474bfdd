"""Kafka Connect's String, JSON and ByteArray converters, for a whole poll at a time.

``convert_poll(raw, key, value)`` turns one poll's raw records (``RawBatch``) into a
``RecordBatch`` (an Arrow table, see ``records.py``) plus the records that could not be
converted (``BadRecord``), so the runtime can apply ``errors.tolerance`` / the dead-letter queue
without failing the batch.

Converters are chosen with Connect's class names (``value.converter=
org.apache.kafka.connect.json.JsonConverter``), their simple names, short names (``json``,
``string``, ``bytearray``, ``long``, ``integer``, ``short``, ``float``, ``double``, ``avro``)
or a Python path (``package.module:Class``); their options come from the ``key.converter.*`` /
``value.converter.*`` keys, prefix stripped. ``avro`` and ``jsonschema`` (Confluent's
AvroConverter, JsonSchemaConverter) read a Schema Registry: ``registry/``.

Speed: ``ByteArrayConverter`` and ``StringConverter`` (UTF-8) build Arrow arrays straight from
the lists of bytes, with no Python work per record unless a record is bad. JSON has to be
parsed; see ``JsonConverter`` for its fast path. Conversion is CPU work: the runtime runs it off
the event loop.

A converter instance belongs to one task and converts one batch at a time (not thread-safe):
``JsonConverter`` remembers the value columns it has seen so the table's schema stays stable.
"""

from __future__ import annotations

from daemon.connectors.converters.base import Converted, Converter, Side
from daemon.connectors.converters.batch import (
    HEADERS_TYPE,
    TIMESTAMP_TYPE,
    ConversionResult,
    convert_poll,
    coordinate_table,
    headers_array,
)
from daemon.connectors.converters.jsonconverter import JsonConverter, JsonMode
from daemon.connectors.converters.lookup import (
    converter_class,
    converter_from_config,
    converter_problems,
    list_converters,
    make_converter,
)
from daemon.connectors.converters.numbers import (
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    NumberConverter,
    ShortConverter,
)
from daemon.connectors.converters.registry import (
    AvroConverter,
    JsonSchemaConverter,
    ProtobufConverter,
    RegistryConverter,
    RegistryUnavailable,
    SchemasNeeded,
)
from daemon.connectors.converters.text import (
    ByteArrayConverter,
    StringConverter,
    decode_each,
    decode_text,
    string_array,
)

__all__ = [
    "HEADERS_TYPE",
    "TIMESTAMP_TYPE",
    "AvroConverter",
    "ByteArrayConverter",
    "ConversionResult",
    "Converted",
    "Converter",
    "DoubleConverter",
    "FloatConverter",
    "IntegerConverter",
    "JsonConverter",
    "JsonMode",
    "JsonSchemaConverter",
    "LongConverter",
    "NumberConverter",
    "ProtobufConverter",
    "RegistryConverter",
    "RegistryUnavailable",
    "SchemasNeeded",
    "ShortConverter",
    "Side",
    "StringConverter",
    "convert_poll",
    "converter_class",
    "converter_from_config",
    "converter_problems",
    "coordinate_table",
    "decode_each",
    "decode_text",
    "headers_array",
    "list_converters",
    "make_converter",
    "string_array",
]

# The classes keep their public qualified name: it is what a configuration may name
# (``daemon.connectors.converters:JsonConverter``) and what a dead-letter record's
# ``__connect.errors.class.name`` header says a failed converter was.
for _cls in (
    Converter,
    ByteArrayConverter,
    StringConverter,
    JsonConverter,
    JsonMode,
    NumberConverter,
    LongConverter,
    IntegerConverter,
    ShortConverter,
    FloatConverter,
    DoubleConverter,
    RegistryConverter,
    AvroConverter,
    JsonSchemaConverter,
    ProtobufConverter,
):
    _cls.__module__ = __name__

#: Names that moved up to the runtime layer, served from there until every importer imports
#: them from their new home (then this goes). By name, not by import statement: a connector
#: module must not depend on the runtime (``dev/check_layers.py``).
