"""ParquetSink's settings: one declaration each (type, default, validation, documentation)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.config.definitions import (
    REQUIRED,
    ConfigDef,
    ConfigType,
    Importance,
    in_range,
    one_of,
)
from daemon.config.problems import Problem, error
from daemon.config.worker import WRITE_TIMEOUT_KEY
from daemon.connectors.parquet.place import place_problems, scheme_problem
from daemon.connectors.parquet.write import COMPRESSION, FORMATS
from daemon.connectors.parquet.writer import FlushPolicy
from daemon.errors import ConfigError

DEFAULT_WRITE_TIMEOUT_MS = 60_000
#: Defaults of flush.linger.ms, buffer.max.records and buffer.max.bytes (bench/README.md has
#: what one Spark write costs by size, which these follow).
LINGER_MS = 500
BUFFER_RECORDS = 250_000
BUFFER_BYTES = 128 << 20


#: Minimum lease of an unfinished staging dir on a Hadoop filesystem (see
#: ``daemon.storage.hadoopfs``); at least twice the write deadline.
STAGING_LEASE = 600.0


def table_path(uri: str) -> Path:
    """The local directory of a ``path`` setting: a plain absolute path or a ``file://`` URI.

    ``ValueError`` for other schemes (see ``table_location``) or a relative path.
    """
    parsed = urllib.parse.urlsplit(uri.strip())
    if parsed.scheme in ("", "file"):
        if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise ValueError(f"{uri!r} names host {parsed.netloc!r}; use file:///absolute/path")
        text = urllib.parse.unquote(parsed.path) if parsed.scheme else uri.strip()
        path = Path(text)
        if not path.is_absolute():
            raise ValueError(
                f"{uri!r} is relative; give an absolute path (the daemon's working"
                " directory is not a place for tables)"
            )
        return path
    raise ValueError(f"{uri!r} is not a local path")


def is_hadoop_uri(uri: str) -> bool:
    """``True`` for a URI with a scheme other than ``file`` (``hdfs://``, ``viewfs://`` …)."""
    scheme = urllib.parse.urlsplit(uri.strip()).scheme
    return scheme not in ("", "file") and len(scheme) > 1  # "C:" is no scheme


def table_location(uri: str) -> str:
    """A ``path`` setting as the commit log takes it: a local directory for a plain path or
    ``file:`` URI (the daemon's own filesystem calls), else the Hadoop URI as given (its
    commit log runs in the executors' JVMs; ``daemon.storage.hadoopfs`` says which
    filesystems are accepted there). ``ValueError`` if it is malformed."""
    if not is_hadoop_uri(uri):
        return str(table_path(uri))
    parsed = urllib.parse.urlsplit(uri.strip())
    if not parsed.path.startswith("/") or parsed.path.rstrip("/") == "":
        raise ValueError(
            f"{uri!r}: give the table's directory, e.g. {parsed.scheme}://authority/dir/table"
        )
    if parsed.query or parsed.fragment:
        raise ValueError(f"{uri!r}: a table URI has no query or fragment")
    return uri.strip().rstrip("/")


def _check_path(value: Any) -> None:
    problem = scheme_problem(str(value))
    if problem is not None:
        raise ValueError(problem)
    table_location(str(value))


def _check_partition_by(value: Any) -> None:
    columns = list(value)
    if len(set(columns)) != len(columns):
        raise ValueError(f"{columns} names a column twice")
    if "headers" in columns:
        raise ValueError("headers is a list of structs and cannot be a partition column")


class ParquetConfigDef(ConfigDef):
    """ParquetSink's settings; settings are also checked against each other (the codec against
    the format), so ``check-config`` and REST validation see those problems. ``parse`` also
    gives the write deadline the runtime passes as ``task.write.timeout.ms``, in seconds."""

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        return _cross_problems(values, config)

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        """Also whether a local ``path`` can hold the table (``parquet.place``: cheap ``stat``
        calls), so ``check-config``, REST validation and creation refuse a file, a read-only
        directory or an unsupported scheme. Not part of ``parse`` (a task's start): there the
        filesystem's own error says what went wrong."""
        problems = super().validate(config)
        path = config.get("path", "")
        if path and not any(p.key == "path" for p in problems) and not is_hadoop_uri(path):
            problems += place_problems(table_path(path))
        return problems


CONFIG_DEF = (
    ParquetConfigDef()
    .define(
        "path",
        ConfigType.STRING,
        REQUIRED,
        Importance.HIGH,
        "The table's directory: an absolute local path, a file:/// URI, or a Hadoop filesystem "
        "URI (hdfs://, viewfs://, abfs://, s3a:// with conditional writes; see "
        "docs/connectors.md for the guarantees per filesystem). With a Spark cluster master, "
        "a local path only if executor.spark.local.paths.shared=true.",
        validator=_check_path,
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
        "partition.by",
        ConfigType.LIST,
        [],
        Importance.MEDIUM,
        "Columns to partition the table by (Hive-style col=value directories), e.g. "
        "kafka_partition, or fields of the value with value.fields.",
        validator=_check_partition_by,
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
        "Write (and commit) what is buffered once no record came for this long: the task has "
        "read what there is, so its records need not wait for flush.interval.ms. Under a "
        "steady stream writes still follow flush.max.records and flush.interval.ms; set it to "
        "flush.interval.ms to write only by those.",
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
        "value.fields",
        ConfigType.LIST,
        [],
        Importance.MEDIUM,
        "With the JSON value converter: the value's fields to store as columns (with "
        "optional types, e.g. id:int64,name), instead of one value column. Short for "
        "value.converter.fields.",
    )
    .define(
        "commit.log.checkpoint.interval",
        ConfigType.INT,
        100,
        Importance.LOW,
        "Checkpoint the table's commit log every this many records: opening the table reads "
        "the latest checkpoint and only the records after it, so its time and memory do not "
        "grow with the table's history.",
        validator=in_range(1, 1_000_000),
    )
    .define(
        "commit.log.retention.ms",
        ConfigType.MS,
        7 * 24 * 3600 * 1000,
        Importance.LOW,
        "Commit records (the audit trail of what each commit covered) are kept at least this "
        "long; older ones that the checkpoint before the latest covers are deleted by a "
        "background clean-up.",
    )
    .define(
        "takeover",
        ConfigType.LIST,
        [],
        Importance.LOW,
        "Connectors whose partitions of this table this connector takes over (it replaces "
        "them, e.g. after a rename): it continues from their committed offsets, and they can "
        "no longer write those partitions. Without it, a partition of the table that another "
        "connector owns is refused.",
    )
)


@dataclass(frozen=True)
class ParquetSettings:
    """A ParquetSink configuration, parsed and checked."""

    path: str  # a local directory, or a Hadoop URI when ``hadoop``
    format: str
    partition_by: tuple[str, ...]
    flush_max_records: int
    flush_interval: float  # seconds
    compression: str
    write_timeout: float  # seconds
    hadoop: bool = False
    takeover: tuple[str, ...] = ()  # connectors whose partitions this one may take over
    checkpoint_interval: int = 100  # commit.log.checkpoint.interval
    retention_ms: int = 7 * 24 * 3600 * 1000  # commit.log.retention.ms
    flush_linger: float = LINGER_MS / 1000.0  # seconds
    buffer_max_records: int = BUFFER_RECORDS
    buffer_max_bytes: int = BUFFER_BYTES

    @property
    def flush_policy(self) -> FlushPolicy:
        return FlushPolicy(
            max_records=self.flush_max_records,
            interval=self.flush_interval,
            linger=self.flush_linger,
            buffer_records=max(self.buffer_max_records, self.flush_max_records),
            buffer_bytes=self.buffer_max_bytes,
        )

    @property
    def staging_lease(self) -> float:
        """Seconds before a Hadoop table's unfinished staging dir may be deleted."""
        return max(STAGING_LEASE, 2 * self.write_timeout + 60.0)

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ParquetSettings:
        """``InvalidConfig`` listing every problem if the configuration is not usable."""
        values = CONFIG_DEF.parse(config)  # the one parse: every problem, or typed values
        return cls(
            path=table_location(values["path"]),
            format=values["format"].lower(),
            partition_by=tuple(values["partition.by"]),
            flush_max_records=values["flush.max.records"],
            flush_interval=values["flush.interval.ms"] / 1000.0,
            compression=values["compression"].strip().lower(),
            write_timeout=_write_timeout(config) / 1000.0,  # checked by the parse
            hadoop=is_hadoop_uri(values["path"]),
            takeover=tuple(c.strip() for c in values["takeover"] if c.strip()),
            checkpoint_interval=values["commit.log.checkpoint.interval"],
            retention_ms=values["commit.log.retention.ms"],
            flush_linger=values["flush.linger.ms"] / 1000.0,
            buffer_max_records=values["buffer.max.records"],
            buffer_max_bytes=values["buffer.max.bytes"],
        )


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
    return problems + stream_problems(values, config)


def stream_problems(values: Mapping[str, Any], config: Mapping[str, str]) -> list[Problem]:
    """Problems between the settings every sink that buffers and flushes like ParquetSink
    shares (the table sinks too): ``value.fields`` against ``value.converter.fields``, and
    the write deadline."""
    problems = []
    own = config.get("value.converter.fields")
    if values["value.fields"] and own is not None and own.strip() != config["value.fields"].strip():
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
    return problems
