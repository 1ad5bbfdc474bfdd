"""ParquetSink's settings: one declaration each (type, default, validation, documentation);
the keys every table sink shares come from ``daemon.connectors.tables.settings``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.config.definitions import (
    REQUIRED,
    ConfigType,
    Importance,
    in_range,
    one_of,
)
from daemon.config.problems import Problem, error
from daemon.connectors.parquet.place import place_problems
from daemon.connectors.parquet.write import COMPRESSION, ENGINES, FORMATS, arrow_refusal
from daemon.connectors.tables.location import check_path, is_hadoop_uri, table_location, table_path
from daemon.connectors.tables.settings import (
    TOPIC,
    TableConfigDef,
    TableSettings,
    Target,
    check_topic,
    schema_key,
    shared_keys,
    topic_table,
)

#: Formats whose files carry their columns' types: the table's schema is read back from
#: them, so ``schema.evolution`` and type checks can be kept (JSON and CSV carry none).
TYPED = ("parquet", "orc")


#: Minimum lease of an unfinished staging dir on a Hadoop filesystem (see
#: ``daemon.storage.hadoopfs``); at least twice the write deadline.
STAGING_LEASE = 600.0


class ParquetConfigDef(TableConfigDef):
    """ParquetSink's settings; settings are also checked against each other (the codec and
    ``schema.evolution`` against the format), so ``check-config`` and REST validation see
    those problems."""

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        return super().cross_check(values, config) + _cross_problems(values, config)

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        """Also whether a local ``path`` can hold the table (``parquet.place``: cheap ``stat``
        calls), so ``check-config``, REST validation and creation refuse a file, a read-only
        directory or an unsupported scheme. Not part of ``parse`` (a task's start): there the
        filesystem's own error says what went wrong."""
        problems = super().validate(config)
        path = topic_table(config.get("path", ""), "topic")
        if path and not any(p.key == "path" for p in problems) and not is_hadoop_uri(path):
            problems += place_problems(table_path(path))
        return problems


#: Seconds between two clean-ups of a table's commit log by default
#: (``commit.log.cleanup.interval.ms``; ``parquet.upkeep`` runs them).
CLEAN_UP_EVERY = 60.0


CONFIG_DEF = (
    ParquetConfigDef()
    .define(
        "path",
        ConfigType.STRING,
        REQUIRED,
        Importance.HIGH,
        "The table's directory: an absolute local path, a file:/// URI, or a Hadoop "
        "filesystem URI (hdfs://, viewfs://, abfs://, s3a:// with conditional writes; see "
        f"docs/connectors.md for the guarantees per filesystem). {TOPIC} in it is replaced "
        "by each record's topic: one table per topic. With a Spark cluster master, a local "
        "path only if executor.spark.local.paths.shared=true.",
        validator=check_path,
        location=True,
    )
    .define(
        "format",
        ConfigType.STRING,
        "parquet",
        Importance.HIGH,
        f"File format: {', '.join(FORMATS)}.",
        validator=one_of(*FORMATS),
    )
    .define(
        "compression",
        ConfigType.STRING,
        "",
        Importance.LOW,
        "Codec of the data files; empty for the format's Spark default. Parquet: "
        + ", ".join(COMPRESSION["parquet"])
        + ". ORC: "
        + ", ".join(COMPRESSION["orc"])
        + ". JSON and CSV: "
        + ", ".join(COMPRESSION["csv"])
        + ".",
    )
    .define(
        "write.engine",
        ConfigType.STRING,
        "auto",
        Importance.MEDIUM,
        "Who writes the data files, inside the executor: spark (a Spark job: 0.3-0.6 s of "
        "fixed cost per write here), arrow (pyarrow, no Spark job: milliseconds; the same "
        "Parquet files Spark writes, for format parquet on a local path with compression "
        "none, snappy, gzip or zstd; a batch with a column it cannot write as Spark does "
        "fails the write), or auto (arrow wherever it writes what Spark would, spark "
        "otherwise: one batch at a time, by its columns' types).",
        validator=one_of(*ENGINES),
    )
    .define(
        "commit.log.checkpoint.interval",
        ConfigType.INT,
        100,
        Importance.LOW,
        "Checkpoint the table's commit log every this many records: opening the table "
        "reads the latest checkpoint and only the records after it, so its time and memory "
        "do not grow with the table's history.",
        validator=in_range(1, 1_000_000),
    )
    .define(
        "commit.log.retention.ms",
        ConfigType.MS,
        7 * 24 * 3600 * 1000,
        Importance.LOW,
        "Commit records (the audit trail of what each commit covered) are kept at least "
        "this long; older ones that the checkpoint before the latest covers are deleted by "
        "a background clean-up.",
    )
    .define(
        "commit.log.cleanup.interval.ms",
        ConfigType.MS,
        int(CLEAN_UP_EVERY * 1000),
        Importance.LOW,
        "How often a task cleans its table's commit log up, at most (after a commit; each "
        "clean-up takes at most 5 s, in a thread for a local table, in the flush job for a "
        "Hadoop one). Shorter keeps the log smaller under many small commits.",
        validator=in_range(1000, 24 * 3600 * 1000),
    )
)
shared_keys(CONFIG_DEF)
schema_key(CONFIG_DEF, default=True)


@dataclass(frozen=True)
class ParquetSettings:
    """A ParquetSink configuration, parsed and checked."""

    path: str  # the ``path`` setting as given: may hold ${topic}
    format: str
    compression: str
    table: TableSettings
    engine: str = "auto"  # write.engine
    checkpoint_interval: int = 100  # commit.log.checkpoint.interval
    retention_ms: int = 7 * 24 * 3600 * 1000  # commit.log.retention.ms
    cleanup_interval: float = CLEAN_UP_EVERY  # commit.log.cleanup.interval.ms, in seconds

    @property
    def template(self) -> str:
        return self.path

    @property
    def hadoop(self) -> bool:
        """The tables are on a Hadoop filesystem (their commit logs run in executor jobs)."""
        return is_hadoop_uri(self.path)

    @property
    def staging_lease(self) -> float:
        """Seconds before a Hadoop table's unfinished staging dir may be deleted."""
        return max(STAGING_LEASE, 2 * self.table.write_timeout + 60.0)

    def target(self, topic: str) -> Target:
        """The table of ``topic``'s records: ``name`` is its location as the commit log takes
        it (a local directory, or the Hadoop URI)."""
        topic = self.table.routes.route(topic)
        check_topic(topic)
        location = table_location(topic_table(self.path, topic))
        return Target(location, {"path": location})

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ParquetSettings:
        """``InvalidConfig`` listing every problem if the configuration is not usable."""
        values = CONFIG_DEF.parse(config)  # the one parse: every problem, or typed values
        return cls(
            path=values["path"].strip(),
            format=values["format"].lower(),
            compression=values["compression"].strip().lower(),
            table=TableSettings.parse(values, config),
            engine=values["write.engine"].lower(),
            checkpoint_interval=values["commit.log.checkpoint.interval"],
            retention_ms=values["commit.log.retention.ms"],
            cleanup_interval=values["commit.log.cleanup.interval.ms"] / 1000.0,
        )


def check_config(config: Mapping[str, str]) -> list[Problem]:
    """Every problem of ``config``: each setting on its own, then across settings, then
    whether a local ``path`` can hold the table."""
    return CONFIG_DEF.validate(config)


def _cross_problems(values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
    problems = []
    fmt, codec = values["format"].lower(), values["compression"].strip().lower()
    if codec and codec not in COMPRESSION[fmt]:
        problems.append(
            error(
                "compression",
                f"{codec!r} is not available for format {fmt}",
                ", ".join(COMPRESSION[fmt]),
            )
        )
    engine, path = values["write.engine"].lower(), values["path"].strip()
    refusal = arrow_refusal(None, fmt, (), codec, path)
    if engine == "arrow" and refusal is not None:
        problems.append(error("write.engine", f"arrow cannot be used: {refusal}", "auto or spark"))
    if not values["schema.evolution"] and fmt not in TYPED:
        problems.append(
            error(
                "schema.evolution",
                f"false needs files that carry their columns' types; {fmt} files carry none",
                f"true, or format {' or '.join(TYPED)}",
            )
        )
    return problems
