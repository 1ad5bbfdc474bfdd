"""Settings every table-format sink (DeltaSink, IcebergSink) shares, declared once.

The buffering and flushing keys are ParquetSink's own declarations (same names, same meaning);
a format adds where its tables are (``path`` for Delta, ``table`` and ``catalog.*`` for Iceberg)
and its own keys. A location may name the record's topic as ``${topic}``: one connector then
lands each topic in its own table, each with its own exactly-once state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.config.definitions import ConfigDef, ConfigType, Importance, in_range
from daemon.config.problems import Problem
from daemon.connectors.parquet.settings import CONFIG_DEF as PARQUET_DEF
from daemon.connectors.parquet.settings import stream_problems, write_timeout
from daemon.connectors.parquet.writer import FlushPolicy

#: ParquetSink's keys the table sinks take as they are.
SHARED_KEYS = (
    "partition.by",
    "flush.max.records",
    "flush.interval.ms",
    "flush.linger.ms",
    "buffer.max.records",
    "buffer.max.bytes",
    "value.fields",
)
TOPIC = "${topic}"
#: Topic names Kafka accepts (so a table name made from one stays a plain name).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class TableConfigDef(ConfigDef):
    """A table sink's settings, checked against each other as ParquetSink's are (the write
    deadline; ``value.fields`` against ``value.converter.fields``)."""

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        return stream_problems(values, config)


def table_config_def(defn: ConfigDef) -> ConfigDef:
    """``defn`` with the shared keys and the upkeep keys added (returns ``defn``)."""
    for key in SHARED_KEYS:
        defn.keys[key] = PARQUET_DEF.keys[key]
    return (
        defn.define(
            "schema.evolution",
            ConfigType.BOOLEAN,
            False,
            Importance.MEDIUM,
            "true: a field the table lacks becomes a new column. false: records carrying such a "
            "field are errant (errors.tolerance decides). Either way a column's type never "
            "changes: a record whose field has another type than the table's column is errant.",
        )
        .define(
            "compaction.min.files",
            ConfigType.INT,
            50,
            Importance.LOW,
            "Compact a table partition (one Spark job in an executor, under the write deadline, "
            "between this task's commits) once it holds more than this many small files; 0 "
            "turns compaction off.",
            validator=in_range(0, 1_000_000),
        )
        .define(
            "compaction.small.bytes",
            ConfigType.LONG,
            32 << 20,
            Importance.LOW,
            "Files smaller than this count as small for compaction.min.files.",
            validator=in_range(1, 1 << 40),
        )
        .define(
            "compaction.interval.ms",
            ConfigType.MS,
            600_000,
            Importance.LOW,
            "How often a task looks at a table's files for compaction (and the format's other "
            "upkeep), at most.",
        )
    )


def topic_table(template: str, topic: str) -> str:
    """``template`` with ``${topic}`` replaced by ``topic``."""
    return template.replace(TOPIC, topic)


def check_topic(topic: str) -> None:
    if not _TOPIC_NAME.fullmatch(topic):
        raise ValueError(f"{topic!r} is not a Kafka topic name")


@dataclass(frozen=True)
class Target:
    """One table a task writes: ``name`` for logs and keys, ``kwargs`` for the format's jobs."""

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSettings:
    """What the shared task needs of a table sink's configuration."""

    partition_by: tuple[str, ...]
    flush_policy: FlushPolicy
    merge_schema: bool
    compaction_min_files: int
    compaction_small_bytes: int
    upkeep_interval: float  # seconds
    write_timeout: float  # seconds

    @classmethod
    def shared(cls, values: Mapping[str, Any], config: Mapping[str, str]) -> dict[str, Any]:
        """The shared fields from ``defn.parse(config)``'s typed ``values``."""
        records = values["flush.max.records"]
        return {
            "partition_by": tuple(values["partition.by"]),
            "flush_policy": FlushPolicy(
                max_records=records,
                interval=values["flush.interval.ms"] / 1000.0,
                linger=values["flush.linger.ms"] / 1000.0,
                buffer_records=max(values["buffer.max.records"], records),
                buffer_bytes=values["buffer.max.bytes"],
            ),
            "merge_schema": values["schema.evolution"],
            "compaction_min_files": values["compaction.min.files"],
            "compaction_small_bytes": values["compaction.small.bytes"],
            "upkeep_interval": values["compaction.interval.ms"] / 1000.0,
            "write_timeout": write_timeout(config),
        }
