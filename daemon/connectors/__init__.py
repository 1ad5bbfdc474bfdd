"""Sink connectors: the API connectors implement, records and batches, converters.

The public names are re-exported here; see ``api`` for the lifecycle and its guarantees (its
parts: ``protocols``, ``base``, ``registry``), ``records`` for what a task receives and
``converters`` for Connect's converters.
"""

from __future__ import annotations

# Registers the built-in aliases (ParquetSink, HangSink, EchoSink): names only, their modules
# are imported when an alias is first resolved.
from daemon.connectors import builtin as _builtin  # noqa: F401
from daemon.connectors.api import (
    REQUIRED,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConnectorRegistry,
    ExecutorRunner,
    Importance,
    PluginInfo,
    SinkConnector,
    SinkTask,
    SinkTaskContext,
    TaskId,
    default_registry,
    in_range,
    list_plugins,
    one_of,
    register_alias,
    resolve_connector_class,
)
from daemon.connectors.converters import (
    ByteArrayConverter,
    ConversionResult,
    Converter,
    JsonConverter,
    JsonMode,
    StringConverter,
    converter_class,
    converter_from_config,
    list_converters,
    make_converter,
)
from daemon.connectors.records import (
    BadRecord,
    OffsetRange,
    RawBatch,
    RecordBatch,
    SinkRecord,
    TimestampType,
    TopicPartition,
)

__all__ = [
    "REQUIRED",
    "BadRecord",
    "ByteArrayConverter",
    "ConfigDef",
    "ConfigKey",
    "ConfigType",
    "ConnectorRegistry",
    "ConversionResult",
    "Converter",
    "ExecutorRunner",
    "Importance",
    "JsonConverter",
    "JsonMode",
    "OffsetRange",
    "PluginInfo",
    "RawBatch",
    "RecordBatch",
    "SinkConnector",
    "SinkRecord",
    "SinkTask",
    "SinkTaskContext",
    "StringConverter",
    "TaskId",
    "TimestampType",
    "TopicPartition",
    "converter_class",
    "converter_from_config",
    "default_registry",
    "in_range",
    "list_converters",
    "list_plugins",
    "make_converter",
    "one_of",
    "register_alias",
    "resolve_connector_class",
]
