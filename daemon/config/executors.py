"""The executor pool's part of ``WorkerConfig`` (connectd's own keys, ``executor.*``): how many
executors, when they start, their Spark master, session settings and table formats."""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from daemon.config import fields as f
from daemon.config.fields import setting
from daemon.config.problems import Problem, error
from daemon.config.values import SparkMaster

SPARK_MASTER_KEY = "executor.spark.master"
LOCAL_PATHS_SHARED_KEY = "executor.spark.local.paths.shared"
"""Named by the refusal of a local table path with a cluster master (``config.placement``)."""

#: The table formats ``daemon.executor.formats.NAMES`` defines (the config layer cannot import
#: it; tests/unit/executor/test_formats.py keeps the two equal).
TABLE_FORMATS = ("delta", "iceberg")


def _parse_formats(value: object) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.lower() for n in f.parse_list(value)))
    unknown = [n for n in names if n not in TABLE_FORMATS]
    if unknown:
        raise ValueError(f"unknown table format {', '.join(map(repr, unknown))}")
    return names


TableFormats = Annotated[
    tuple[str, ...],
    BeforeValidator(_parse_formats),
    f.Expect(f"a comma-separated list of: {', '.join(TABLE_FORMATS)}"),
]

POOL_START_KEY = "executor.pool.start"


class PoolStart(enum.StrEnum):
    """When the executor pool starts (``executor.pool.start``); whatever this says, a write to a
    pool not started yet starts it and waits for an executor under its own deadlines."""

    #: With the daemon, as connectd always did.
    EAGER = "eager"
    #: At the first executor call (a write, or an offsets hook that runs a job).
    ON_DEMAND = "on-demand"
    #: As soon as a task of a connector class that needs executors
    #: (``SinkConnector.needs_executors``) is set up on this worker; never without one.
    AUTO = "auto"


PoolStartName = Annotated[
    PoolStart, BeforeValidator(f.choice(PoolStart)), f.Expect("eager, on-demand or auto")
]


SPARK_SESSION_KEY = "executor.spark.session"


class SparkSession(enum.StrEnum):
    """When an executor opens its SparkSession (``executor.spark.session``)."""

    #: Once a connector on this worker needs Spark; until then executors are Python processes
    #: that write with pyarrow (no JVM, no PySpark workers).
    ON_DEMAND = "on-demand"
    #: Every executor, at its start, as connectd always did.
    ALWAYS = "always"


SparkSessionName = Annotated[
    SparkSession, BeforeValidator(f.choice(SparkSession)), f.Expect("on-demand or always")
]


_EXEC = "Executors (connectd)"


class ExecutorSettings(BaseModel):
    """The executor part of ``WorkerConfig``."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    executor_pool_size: f.PositiveInt = setting(
        1,
        key="executor.pool.size",
        group=_EXEC,
        description="Executor processes, each with a warm SparkSession.",
    )
    executor_pool_spares: f.NonNegInt = setting(
        1,
        key="executor.pool.spares",
        group=_EXEC,
        description="Extra warm executors, so a killed one is replaced without waiting for a JVM.",
    )
    executor_pool_max_size: f.OptPositiveInt = setting(
        None,
        key="executor.pool.max.size",
        example=-1,
        default_doc="2 × executor.pool.size + executor.pool.spares",
        group=_EXEC,
        description="connectd: the most executor processes at once. A write that runs longer"
        " than executor.write.overdue.ms while another connector's write waits steps aside: the"
        " waiting write takes a spare and one more executor starts, up to this many. At least"
        " executor.pool.size + executor.pool.spares.",
    )
    executor_write_overdue: f.PositiveMillis = setting(
        timedelta(milliseconds=2000),
        key="executor.write.overdue.ms",
        group=_EXEC,
        description="connectd: a write running this long while another connector's write waits"
        " for an executor steps aside (it keeps its executor and its deadline), so that one"
        " connector's slow or hung writes never hold the others' back.",
    )
    executor_pool_start: PoolStartName = setting(
        PoolStart.AUTO,
        key=POOL_START_KEY,
        group=_EXEC,
        description="connectd: when the executors start. eager: with the daemon. on-demand: at"
        " the first write (it waits for a JVM start). auto: as soon as a task of a connector"
        " whose class needs executors (the Spark sinks; any connector not marked otherwise)"
        " starts on this worker, so its first write waits no longer than with eager; a worker"
        " whose connectors never write (EchoSink) starts none; a distributed worker whose"
        " config log has such connectors starts them before it joins its group and joins once"
        " one can write (eager does the same). Whatever the choice, a write starts a pool not"
        " started yet.",
    )
    executor_spark_session: SparkSessionName = setting(
        SparkSession.ON_DEMAND,
        key=SPARK_SESSION_KEY,
        group=_EXEC,
        description="connectd: when an executor opens its SparkSession (a JVM, and PySpark's"
        " Python workers). on-demand: once a connector on this worker needs Spark: a DeltaSink"
        " or IcebergSink, a ParquetSink whose writes Spark makes (a Hadoop path, a format other"
        " than parquet, a codec pyarrow does not write as Spark does, write.engine=spark, or a"
        " batch with a column type only Spark writes as Spark would), a connector class not"
        " marked otherwise. Until then each executor is a Python process that writes with"
        " pyarrow (a ParquetSink on a local path: the same files); from then on every executor"
        " opens one, and those without are replaced, so the write that first needs Spark waits"
        " for a JVM start. always: every executor opens one at its start.",
    )
    executor_spark_master: SparkMaster = setting(
        "local[*]",
        key=SPARK_MASTER_KEY,
        group=_EXEC,
        description="The Spark master each executor's session uses.",
    )
    executor_spark_master_ui_url: f.StrList = setting(
        (),
        key="executor.spark.master.ui.url",
        example=("http://spark-master.example:8080/",),
        group=_EXEC,
        description="connectd: the web UI of a spark:// master (comma-separated, one per master"
        " of an HA setup), where connectd reads the master's Spark version at start and before"
        " each executor's session opens: a master of another Spark line than the installed"
        " pyspark's cannot take its executors, so the daemon exits 69 at start (and an executor"
        " start fails, failing the task) naming both versions. Empty: port 8080 of each master"
        " host. A UI that cannot be read is warned about and not checked.",
    )
    executor_spark_local_paths_shared: f.Bool = setting(
        False,
        key=LOCAL_PATHS_SHARED_KEY,
        group=_EXEC,
        description="connectd: local paths (no scheme, or file:) name the same directory on "
        "every node of the Spark cluster, e.g. a shared mount, or a cluster whose workers run "
        "on this host. False: with a master other than local, a connector's local table path "
        "is refused.",
    )
    executor_spark_conf: f.StrDict = setting(
        {},
        key="executor.spark.conf.*",
        example={"spark.sql.shuffle.partitions": "4"},
        group=_EXEC,
        description="Spark settings of the executors, e.g. executor.spark.conf.spark.ui.enabled.",
    )
    executor_spark_formats: TableFormats = setting(
        (),
        key="executor.spark.formats",
        example=("delta",),
        group=_EXEC,
        description="connectd: table formats every executor's session loads from the start (its"
        " jars must be in executor.jars.dir). Unset: a format is loaded when a connector's write"
        " first needs it, and executors without it are replaced then.",
    )
    executor_jars_dir: f.FilePath | None = setting(
        None,
        key="executor.jars.dir",
        example="/var/lib/connectd/jars",
        group=_EXEC,
        default_doc="$XDG_CACHE_HOME/connectd/jars or ~/.cache/connectd/jars",
        description="connectd: where the table formats' jars are (`connectd fetch-jars`).",
    )
    executor_start_timeout: f.Millis = setting(
        timedelta(milliseconds=120000),
        key="executor.start.timeout.ms",
        group=_EXEC,
        description="How long an executor may take to start its SparkSession.",
    )

    def executor_problems(self) -> list[Problem]:
        """Problems between the executor settings."""
        least = self.executor_pool_size + self.executor_pool_spares
        most = self.executor_pool_max_size
        if most is not None and most < least:
            return [
                error(
                    "executor.pool.max.size",
                    f"{most} is less than executor.pool.size + executor.pool.spares ({least})",
                    f"an integer ≥ {least}, or -1 for the default",
                )
            ]
        return []
