"""Converters that read Confluent's Schema Registry wire format (``converter.py``), the
registry client they share (``client.py``), the Avro decoding (``avro.py``, ``columnar.py``)
and JSON Schema's (``jsonschema.py``)."""

from __future__ import annotations

from daemon.connectors.converters.registry.avro import AvroType, SchemaRefused
from daemon.connectors.converters.registry.client import (
    RegistryClient,
    RegistrySettings,
    RegistryUnavailable,
    SchemasNeeded,
)
from daemon.connectors.converters.registry.converter import (
    AvroConverter,
    JsonSchemaConverter,
    ProtobufConverter,
    RegistryConverter,
)

__all__ = [
    "AvroConverter",
    "AvroType",
    "JsonSchemaConverter",
    "ProtobufConverter",
    "RegistryClient",
    "RegistryConverter",
    "RegistrySettings",
    "RegistryUnavailable",
    "SchemaRefused",
    "SchemasNeeded",
]
