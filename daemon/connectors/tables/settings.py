"""Settings every table sink (ParquetSink, DeltaSink, IcebergSink) shares, declared once.

A format's ``ConfigDef`` declares where its tables are (``path``, ``table``, ``catalog.*``) and
its own keys, and takes these from here: the buffering and flushing keys, ``partition.by``,
``value.fields``, ``takeover`` (``shared_keys``), ``schema.evolution`` (``schema_key``, whose
default is the format's) and, for formats that compact, ``compaction.*`` (``compaction_keys``).
A location may name the record's topic as ``${topic}``: one connector then lands each topic in
its own table, each with its own exactly-once state.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.config import transforms as tf
from daemon.config.definitions import ConfigDef, ConfigType, Importance, in_range, one_of
from daemon.config.problems import Problem, error
from daemon.config.worker import WRITE_TIMEOUT_KEY
from daemon.connectors.tables import timeparts
from daemon.connectors.tables.timeparts import TimeColumn
from daemon.connectors.tables.writer import FlushPolicy
from daemon.connectors.transforms.routing import regex_route
from daemon.errors import ConfigError

TOPIC = "${topic}"
MISSING_KEY = "table.offsets.missing"
DEFAULT_WRITE_TIMEOUT_MS = 60_000
#: Defaults of flush.linger.ms, buffer.max.records and buffer.max.bytes (bench/README.md has
#: what one Spark write costs by size, which these follow).
LINGER_MS = 500
BUFFER_RECORDS = 250_000
BUFFER_BYTES = 128 << 20
#: Topic names Kafka accepts (so a table name made from one stays a plain name).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _check_partition_by(value: Any) -> None:
    try:
        columns = list(timeparts.split_partition_by(list(value))[0])
    except timeparts.TimePartitionError as e:
        raise ValueError(e.reason) from None
    if len(set(columns)) != len(columns):
        raise ValueError(f"{columns} names a column twice")
    if "headers" in columns:
        raise ValueError("headers is a list of structs and cannot be a partition column")


def shared_keys(defn: ConfigDef) -> ConfigDef:
    """``defn`` with the keys every table sink has (returns ``defn``)."""
    return (
        defn.define(
            "partition.by",
            ConfigType.LIST,
            [],
            Importance.MEDIUM,
            "Columns to partition the table by, e.g. kafka_partition, or fields of the value "
            "with value.fields, or time transforms of a timestamp column: year(col), "
            "month(col), day(col), hour(col), each a column <col>_<transform> computed in UTC "
            "(e.g. day(kafka_timestamp)). Hive-style col=value directories (ParquetSink), the "
            "table's partition columns when the sink creates it (DeltaSink, IcebergSink).",
            validator=_check_partition_by,
        )
        .define(
            "partitioner.class",
            ConfigType.STRING,
            "",
            Importance.LOW,
            "Confluent's storage partitioner, for S3/HDFS sink configs moving over: "
            f"{timeparts.TIME_BASED} (with path.format and partition.duration.ms), "
            "HourlyPartitioner, DailyPartitioner or DefaultPartitioner. A time-based one adds "
            "a column per 'name'=pattern segment of path.format, after partition.by's.",
        )
        .define(
            "path.format",
            ConfigType.STRING,
            "",
            Importance.LOW,
            "TimeBasedPartitioner's layout, as Confluent's sinks take it: "
            "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH gives the columns year, month, day "
            "and hour and those directories.",
        )
        .define(
            "partition.duration.ms",
            ConfigType.LONG,
            -1,
            Importance.LOW,
            "TimeBasedPartitioner: the time a partition spans; a record's time is floored to "
            "it (in timezone) before path.format formats it.",
        )
        .define(
            "timezone",
            ConfigType.STRING,
            "",
            Importance.LOW,
            "Time-based partitioning: the time zone path.format's values are in (an id such "
            "as UTC or Europe/Paris; required, as in Confluent's sinks).",
        )
        .define(
            "locale",
            ConfigType.STRING,
            "",
            Importance.LOW,
            "Time-based partitioning: required as in Confluent's sinks; path.format's "
            "patterns are numeric, so it changes nothing.",
        )
        .define(
            "timestamp.extractor",
            ConfigType.STRING,
            "Wallclock",
            Importance.LOW,
            "Time-based partitioning: whose time places a record. Record: its Kafka "
            "timestamp; RecordField: the value field timestamp.field; Wallclock (Confluent's "
            "default): the time it is buffered.",
            validator=one_of(*timeparts.EXTRACTORS),
        )
        .define(
            "timestamp.field",
            ConfigType.STRING,
            "timestamp",
            Importance.LOW,
            "timestamp.extractor=RecordField: the column holding the time (a timestamp, a "
            "date or epoch milliseconds).",
        )
        .define(
            "flush.max.records",
            ConfigType.INT,
            50_000,
            Importance.MEDIUM,
            "Write (and commit) once this many records are buffered.",
            validator=in_range(1, 10_000_000),
        )
        .define(
            "flush.interval.ms",
            ConfigType.MS,
            10_000,
            Importance.MEDIUM,
            "Write (and commit) once the oldest buffered record waited this long; 0 writes "
            "every batch.",
        )
        .define(
            "flush.linger.ms",
            ConfigType.MS,
            LINGER_MS,
            Importance.MEDIUM,
            "Write (and commit) what is buffered once no record came for this long: the task "
            "has read what there is, so its records need not wait for flush.interval.ms. Under "
            "a steady stream writes still follow flush.max.records and flush.interval.ms; set "
            "it to flush.interval.ms to write only by those.",
        )
        .define(
            "buffer.max.records",
            ConfigType.INT,
            BUFFER_RECORDS,
            Importance.LOW,
            "The most records a task holds unwritten. A task reads on while its write is in "
            "flight, and the next write takes all that came meanwhile: behind a backlog writes "
            "grow up to this many records (fewer, larger Spark jobs); reading waits beyond it. "
            "At least flush.max.records.",
            validator=in_range(1, 100_000_000),
        )
        .define(
            "buffer.max.bytes",
            ConfigType.LONG,
            BUFFER_BYTES,
            Importance.LOW,
            "The most bytes of Arrow data a task holds unwritten (see buffer.max.records): the "
            "memory bound of a task's buffer; one write holds about this much at most.",
            validator=in_range(1 << 20, 1 << 40),
        )
        .define(
            "value.fields",
            ConfigType.LIST,
            [],
            Importance.MEDIUM,
            "With the JSON value converter: the value's fields to store as columns (with "
            "optional types, e.g. id:int64,name), instead of one value column. Short for "
            "value.converter.fields.",
        )
        .define(
            "takeover",
            ConfigType.LIST,
            [],
            Importance.LOW,
            "Connectors whose partitions of this table this connector takes over (it replaces "
            "them, e.g. after a rename): it continues from their committed offsets, and they "
            "can no longer write those partitions. Without it, a partition of the table that "
            "another connector owns is refused.",
        )
        .define(
            MISSING_KEY,
            ConfigType.STRING,
            "fail",
            Importance.MEDIUM,
            "What a task does with a partition the table has no committed offsets for while "
            "the connector's consumer group has committed one (the table was deleted or lost "
            "its log, or it is a new table for a connector that ran before, e.g. moved from "
            "Kafka Connect). fail: the task fails naming the table and the group's offsets; "
            "nothing is written. group: the table starts at the group's offsets. To write it "
            "again from Kafka's start instead, stop the connector and reset its offsets "
            "(DELETE /connectors/{name}/offsets).",
            validator=one_of("fail", "group"),
        )
    )


def schema_key(defn: ConfigDef, default: bool) -> ConfigDef:
    """``defn`` with ``schema.evolution`` defaulting to ``default`` (returns ``defn``)."""
    return defn.define(
        "schema.evolution",
        ConfigType.BOOLEAN,
        default,
        Importance.MEDIUM,
        "true: a field the table lacks becomes a new column. false: records carrying such a "
        "field are errant (errors.tolerance decides). Either way a column's type never "
        "changes: a record whose field has another type than the table's column is errant.",
    )


def compaction_keys(defn: ConfigDef) -> ConfigDef:
    """``defn`` with the compaction keys of formats that compact (returns ``defn``)."""
    return (
        defn.define(
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


class TableConfigDef(ConfigDef):
    """A table sink's settings, also checked against each other: ``value.fields`` against
    ``value.converter.fields``, and the write deadline."""

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        problems = []
        own = config.get("value.converter.fields")
        given = config.get("value.fields", "").strip()
        if values["value.fields"] and own is not None and own.strip() != given:
            problems.append(
                error(
                    "value.fields",
                    "value.converter.fields says otherwise",
                    "only one of value.fields and value.converter.fields",
                )
            )
        try:
            _write_timeout(config)
        except ValueError as e:
            problems.append(error(WRITE_TIMEOUT_KEY, str(e), "milliseconds as an integer > 0"))
        try:
            time_columns(values)
        except timeparts.TimePartitionError as e:
            problems.append(error(e.key, e.reason))
        return problems


def time_columns(values: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[TimeColumn, ...]]:
    """The table's partition columns (``partition.by``'s, then ``path.format``'s) and the time
    columns to compute, from a format's typed ``values`` (``TimePartitionError``)."""
    names, derived = timeparts.split_partition_by(list(values["partition.by"]))
    partitioner = timeparts.Partitioner(
        cls=str(values["partitioner.class"]).strip(),
        path_format=str(values["path.format"]),
        duration_ms=int(values["partition.duration.ms"]),
        timezone=str(values["timezone"]),
        locale=str(values["locale"]),
        extractor=str(values["timestamp.extractor"]),
        field=str(values["timestamp.field"]),
    )
    formatted = partitioner.columns()
    names += tuple(c.name for c in formatted)
    if len(set(names)) != len(names):
        raise timeparts.TimePartitionError(
            "path.format", f"the partition columns {list(names)} name a column twice"
        )
    return names, derived + formatted


def _write_timeout(config: Mapping[str, str]) -> int:
    text = config.get(WRITE_TIMEOUT_KEY, str(DEFAULT_WRITE_TIMEOUT_MS)).strip()
    if not text.isdigit() or int(text) == 0:
        raise ValueError(f"{text!r} is not a positive number of milliseconds")
    return int(text)


def write_timeout(config: Mapping[str, str]) -> float:
    """Seconds one executor write may take: ``task.write.timeout.ms`` from the task config
    (the runtime passes the worker's value; a connector config may set its own), default 60 s.
    ``ConfigError`` if it is not a positive integer."""
    try:
        return _write_timeout(config) / 1000.0
    except ValueError as e:
        raise ConfigError(f"{WRITE_TIMEOUT_KEY}: {e}") from None


def task_configs(config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
    """One config per task; ``value.fields`` is handed on as the value converter's ``fields``
    option."""
    out = dict(config)
    if out.get("value.fields", "").strip():
        out.setdefault("value.converter.fields", out["value.fields"])
    return [dict(out) for _ in range(max_tasks)]


@dataclass(frozen=True)
class Routes:
    """The connector's routers (RegexRouter, TimestampRouter), as they decide which ``${topic}``
    table a topic's records go to: each partition's records must land in one table, since the
    table commits the partition's offsets. So under a ``${topic}`` location only routing decided
    by the topic alone is taken: RegexRouter with no predicate or a TopicNameMatches one
    (``problems`` refuses the rest). Under a fixed location any router is fine: the table is one,
    and its ``kafka_topic`` column holds each record's routed topic."""

    routers: tuple[tf.TransformSpec, ...] = ()

    @classmethod
    def of(cls, config: Mapping[str, str]) -> Routes:
        chain, _ = tf.chain_from(config)  # its problems are the connector config's
        return cls(tuple(s for s in chain.transforms if s.cls in tf.ROUTERS))

    def route(self, topic: str) -> str:
        """The topic the sink sees for records read from ``topic``."""
        for spec in self.routers:
            p = spec.predicate
            if p is not None:
                holds = re.fullmatch(tf.python_regex(p.config["pattern"]), topic) is not None
                if holds == spec.negate:
                    continue
            if spec.cls == tf.REGEX_ROUTER:
                topic = regex_route(spec, topic)
        return topic

    def problems(self, template: str) -> list[Problem]:
        """The routers a ``template`` location cannot follow, each under its type key."""
        if TOPIC not in template:
            return []
        out = []
        for spec in self.routers:
            key = f"transforms.{spec.alias}.type"
            if spec.cls == tf.TIMESTAMP_ROUTER:
                out.append(
                    error(
                        key,
                        f"TimestampRouter routes each record by its time, and {template} names"
                        " a table per topic: one partition's records would land in several"
                        " tables, while a table commits a partition's offsets whole",
                        "a location without ${topic} (its kafka_topic column then holds the"
                        " routed topic), or time in partition.by",
                    )
                )
            elif spec.predicate is not None and spec.predicate.cls != tf.TOPIC_NAME_MATCHES:
                out.append(
                    error(
                        key,
                        f"RegexRouter applies where predicate '{spec.predicate.alias}' holds,"
                        f" record by record, and {template} names a table per topic: one"
                        " partition's records could land in several tables",
                        "no predicate or a TopicNameMatches one, or a location without ${topic}",
                    )
                )
        return out


@dataclass(frozen=True)
class TableSettings:
    """What the one table sink task needs of any format's configuration."""

    partition_by: tuple[str, ...]  # column names, a time transform's by its column's
    flush_policy: FlushPolicy
    merge_schema: bool  # schema.evolution
    write_timeout: float  # seconds
    takeover: tuple[str, ...] = ()  # connectors whose partitions this one may take over
    #: A partition the table has no offsets for while the consumer group has: fail unless
    #: ``table.offsets.missing=group`` (``MISSING_KEY``).
    start_at_group: bool = False
    routes: Routes = Routes()
    #: Columns computed from each record's time (``timeparts``), appended as records arrive.
    time_columns: tuple[TimeColumn, ...] = ()

    @property
    def generated(self) -> dict[str, list[str]]:
        """The computed columns of ``partition.by``'s transforms, ``name → [transform, source]``:
        what DeltaSink declares as generated columns when it creates a table (Iceberg's are
        hidden, ``hidden_transforms``, so none here)."""
        return {
            c.name: [c.transform, c.source] for c in self.time_columns if c.transform and c.source
        }

    def hidden_transforms(self) -> TableSettings:
        """For a format that partitions by time transforms itself (Iceberg's hidden
        partitioning): ``partition.by``'s transforms stay as ``day(col)`` in ``partition_by``
        and are not computed as columns; ``path.format``'s columns still are."""
        hidden = {c.name: f"{c.transform}({c.source})" for c in self.time_columns if c.transform}
        if not hidden:
            return self
        return dataclasses.replace(
            self,
            partition_by=tuple(hidden.get(c, c) for c in self.partition_by),
            time_columns=tuple(c for c in self.time_columns if not c.transform),
        )

    @classmethod
    def parse(cls, values: Mapping[str, Any], config: Mapping[str, str]) -> TableSettings:
        """From a format's ``ConfigDef.parse(config)`` typed ``values``."""
        records = values["flush.max.records"]
        partition_by, computed = time_columns(values)  # TimePartitionError is a ConfigError
        return cls(
            partition_by=partition_by,
            time_columns=computed,
            flush_policy=FlushPolicy(
                max_records=records,
                interval=values["flush.interval.ms"] / 1000.0,
                linger=values["flush.linger.ms"] / 1000.0,
                buffer_records=max(values["buffer.max.records"], records),
                buffer_bytes=values["buffer.max.bytes"],
            ),
            merge_schema=values["schema.evolution"],
            write_timeout=write_timeout(config),
            takeover=tuple(c.strip() for c in values["takeover"] if c.strip()),
            start_at_group=str(values[MISSING_KEY]).lower() == "group",
            routes=Routes.of(config),
        )


@dataclass(frozen=True)
class Compaction:
    """When a format that compacts runs its upkeep (``compaction_keys``)."""

    min_files: int
    small_bytes: int
    interval: float  # seconds

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> Compaction:
        return cls(
            values["compaction.min.files"],
            values["compaction.small.bytes"],
            values["compaction.interval.ms"] / 1000.0,
        )


# ---- which tables ----


@dataclass(frozen=True)
class Target:
    """One table: ``name`` for logs and keys, ``kwargs`` for the format's jobs."""

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def topic_table(template: str, topic: str) -> str:
    """``template`` with ``${topic}`` replaced by ``topic`` (the routed one: ``Routes``)."""
    return template.replace(TOPIC, topic)


def check_topic(topic: str) -> None:
    if not _TOPIC_NAME.fullmatch(topic):
        raise ValueError(f"{topic!r} is not a Kafka topic name")


def topic_targets(
    template: str, target: Callable[[str], Target], config: Mapping[str, str]
) -> list[Target]:
    """The tables of a configuration whose location is ``template``: one, or one per topic of
    ``topics`` for a ``${topic}`` one (``ConfigError`` with ``topics.regex``: they cannot be
    named)."""
    if TOPIC not in template:
        return [target("_")]
    topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    if not topics:
        raise ConfigError(
            f"{template}: a table per topic needs the topics listed in 'topics' (with "
            "topics.regex the tables cannot be named)"
        )
    return [target(t) for t in topics]
