"""The worker's settings: one ``WorkerConfig`` for standalone and distributed mode.

Each field is one setting, named by its Kafka Connect property (the alias). Connect's keys mean
what they mean in Connect; connectd's own keys (``state.dir``, ``executor.*``, ``log.*``,
``task.write.timeout.ms``, ``startup.kafka.timeout.ms``) are marked as such. Build one from a
file with the loaders (``load_worker``), from a mapping with ``parse_worker``; both report every
problem at once. ``Mode`` and what each mode needs are in ``daemon.config.modes``.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, ValidationInfo, model_validator

from daemon.config import fields as f
from daemon.config import values
from daemon.config.clients import KafkaClient, client_problems
from daemon.config.fields import setting
from daemon.config.kafka import KafkaSettings
from daemon.config.problems import Problem
from daemon.config.providers import provider_specs
from daemon.config.rest import RestApiSettings, map_deprecated_rest
from daemon.config.values import (
    Listener,
    Listeners,
    LogFormat,
    LogFormatName,
    LogLevel,
    LogLevelName,
    SparkMaster,
)

WRITE_TIMEOUT_KEY = "task.write.timeout.ms"
"""connectd's write deadline; the runtime also passes it to each task in its configuration."""

SPARK_MASTER_KEY = "executor.spark.master"
LOCAL_PATHS_SHARED_KEY = "executor.spark.local.paths.shared"
"""Named by the refusal of a local table path with a cluster master (``config.placement``)."""

#: The table formats ``daemon.executor.formats.FORMATS`` defines (the config layer cannot import
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

DEFAULT_STATE_DIR = Path("/var/lib/connectd")
"""Where the packaged service keeps its state (systemd ``StateDirectory=connectd``)."""


_REST, _CONV, _TASK, _START, _STORE, _GROUP, _PROV, _EXEC, _LOG = (
    "REST API",
    "Converters",
    "Tasks",
    "Startup (connectd)",
    "Storage",
    "Distributed mode",
    "Config providers",
    "Executors (connectd)",
    "Logging (connectd)",
)
_DISTRIBUTED_ONLY = "; distributed mode only, required there"


class WorkerConfig(KafkaSettings, RestApiSettings):
    """A worker's configuration. Frozen; durations are ``timedelta``; ``None`` means unset."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    # -- REST API ----------------------------------------------------------------------------
    listeners: Listeners = setting(
        (Listener(scheme="http", host="127.0.0.1", port=8083),),
        key="listeners",
        group=_REST,
        description="Where the REST API listens. Empty host: every interface; port 0: a free port.",
    )
    rest_host_name: f.OptStr = setting(
        None,
        key="rest.host.name",
        example="127.0.0.1",
        group=_REST,
        deprecated="use listeners=http://HOST:PORT",
        description="Deprecated (gone in Kafka 4.0): REST host, used when listeners is not set.",
    )
    rest_port: f.Port | None = setting(
        None,
        key="rest.port",
        example=8083,
        group=_REST,
        deprecated="use listeners=http://HOST:PORT",
        description="Deprecated (gone in Kafka 4.0): REST port, used when listeners is not set.",
    )
    rest_advertised_host_name: f.OptStr = setting(
        None,
        key="rest.advertised.host.name",
        example="connect-1.example.com",
        group=_REST,
        default_doc="the listener's host",
        description="Host name other workers use to reach this one (distributed mode).",
    )
    rest_advertised_port: f.Port | None = setting(
        None,
        key="rest.advertised.port",
        example=8083,
        group=_REST,
        default_doc="the listener's port",
        description="Port other workers use to reach this one (distributed mode).",
    )
    rest_advertised_listener: Literal["http", "https"] | None = setting(
        None,
        key="rest.advertised.listener",
        example="http",
        group=_REST,
        expected="http or https",
        default_doc="the first listener's scheme",
        description="Scheme other workers use to reach this one.",
    )
    # -- Converters --------------------------------------------------------------------------
    key_converter: values.ConverterName = setting(
        values.Converter.JSON,
        key="key.converter",
        group=_CONV,
        description="How record keys are read, unless a connector sets its own.",
    )
    value_converter: values.ConverterName = setting(
        values.Converter.JSON,
        key="value.converter",
        group=_CONV,
        description="How record values are read, unless a connector sets its own.",
    )
    key_converter_schemas_enable: f.Bool = setting(
        True,
        key="key.converter.schemas.enable",
        group=_CONV,
        description='JSON converter: keys are {"schema": ..., "payload": ...} envelopes.',
    )
    value_converter_schemas_enable: f.Bool = setting(
        True,
        key="value.converter.schemas.enable",
        group=_CONV,
        description='JSON converter: values are {"schema": ..., "payload": ...} envelopes.',
    )
    key_converter_config: f.StrDict = setting(
        {},
        key="key.converter.*",
        example={"converter.type": "key"},
        group=_CONV,
        description="Other settings for the key converter.",
    )
    value_converter_config: f.StrDict = setting(
        {},
        key="value.converter.*",
        example={"replace.null.with.default": "true"},
        group=_CONV,
        description="Other settings for the value converter.",
    )
    # -- Tasks -------------------------------------------------------------------------------
    offset_flush_interval: f.Millis = setting(
        timedelta(milliseconds=10000),
        key="offset.flush.interval.ms",
        group=_TASK,
        description="How often tasks commit what they have written to the sink.",
    )
    task_shutdown_graceful_timeout: f.Millis = setting(
        timedelta(milliseconds=5000),
        key="task.shutdown.graceful.timeout.ms",
        group=_TASK,
        description="How long a stopping task may finish before its executor is killed.",
    )
    task_write_timeout: f.Millis = setting(
        timedelta(milliseconds=60000),
        key=WRITE_TIMEOUT_KEY,
        group=_TASK,
        description="connectd: deadline of one write; then it fails and its executor is killed.",
    )
    task_consumer_start_timeout: f.PositiveMillis = setting(
        timedelta(milliseconds=60000),
        key="task.consumer.start.timeout.ms",
        group=_TASK,
        description="connectd: deadline for a task's consumer to connect and subscribe; then "
        "the task fails (raise it for slow or distant brokers).",
    )
    config_resolve_timeout: f.PositiveMillis = setting(
        timedelta(milliseconds=30000),
        key="config.resolve.timeout.ms",
        group=_TASK,
        description="connectd: deadline for resolving a configuration's ${provider:...} "
        "references when a task starts or offsets are read (raise it for slow secret stores).",
    )
    task_stall_warn: f.PositiveMillis = setting(
        timedelta(minutes=5),
        key="task.stall.warn.ms",
        group=_TASK,
        description="connectd: a running task whose lag stayed above 0 this long without a "
        "commit is stalled: its status says since when, and /health names it.",
    )
    health_stalled_unhealthy: f.Bool = setting(
        False,
        key="health.stalled.unhealthy",
        group=_TASK,
        description="connectd: GET /health answers 503 while a task is stalled "
        "(task.stall.warn.ms); false: 200, with the stalled tasks named.",
    )
    errors_restart_enabled: f.Bool = setting(
        True,
        key="errors.restart.enabled",
        group=_TASK,
        description="connectd: restart failed connectors and tasks automatically "
        "(the default for every connector).",
    )
    errors_restart_max: f.Limit = setting(
        7,
        key="errors.restart.max",
        group=_TASK,
        description="connectd: automatic restarts before giving up; -1 for no limit "
        "(the default for every connector).",
    )
    errors_restart_backoff_max: f.Millis = setting(
        timedelta(hours=1),
        key="errors.restart.backoff.max.ms",
        group=_TASK,
        description="connectd: longest wait before an automatic restart "
        "(n·(n+1) minutes, at most this).",
    )
    # -- Startup -----------------------------------------------------------------------------
    startup_kafka_timeout: f.Millis = setting(
        timedelta(milliseconds=60000),
        key="startup.kafka.timeout.ms",
        group=_START,
        description=(
            "connectd: how long the daemon waits at start for a broker of bootstrap.servers to"
            " answer; then it exits with code 69 (service unavailable). 0 skips the check."
        ),
    )
    # -- Storage -----------------------------------------------------------------------------
    state_dir: f.FilePath = setting(
        DEFAULT_STATE_DIR,
        key="state.dir",
        group=_STORE,
        description="connectd: the worker's own state (standalone connector configs, epochs).",
    )
    offset_storage_file_filename: f.FilePath | None = setting(
        None,
        key="offset.storage.file.filename",
        example="/var/lib/connectd/connect.offsets",
        group=_STORE,
        default_doc="<state.dir>/connect.offsets",
        description="Standalone mode: the offsets file (the sink's commit log is the truth).",
    )
    # -- Distributed mode --------------------------------------------------------------------
    group_id: f.OptStr = setting(
        None,
        key="group.id",
        example="connect-cluster",
        group=_GROUP,
        description="The cluster this worker joins: workers with one group.id share the work"
        + _DISTRIBUTED_ONLY
        + ".",
    )
    config_storage_topic: f.OptStr = setting(
        None,
        key="config.storage.topic",
        example="connect-configs",
        group=_GROUP,
        description="Compacted one-partition topic of connector configs" + _DISTRIBUTED_ONLY + ".",
    )
    config_storage_replication_factor: f.TopicSetting = setting(
        3,
        key="config.storage.replication.factor",
        group=_GROUP,
        description="Replication factor if connectd creates the config topic.",
    )
    offset_storage_topic: f.OptStr = setting(
        None,
        key="offset.storage.topic",
        example="connect-offsets",
        group=_GROUP,
        description="Compacted topic of committed offsets" + _DISTRIBUTED_ONLY + ".",
    )
    offset_storage_replication_factor: f.TopicSetting = setting(
        3,
        key="offset.storage.replication.factor",
        group=_GROUP,
        description="Replication factor if connectd creates the offsets topic.",
    )
    offset_storage_partitions: f.TopicSetting = setting(
        25,
        key="offset.storage.partitions",
        group=_GROUP,
        description="Partitions if connectd creates the offsets topic.",
    )
    status_storage_topic: f.OptStr = setting(
        None,
        key="status.storage.topic",
        example="connect-status",
        group=_GROUP,
        description="Compacted topic of connector and task states" + _DISTRIBUTED_ONLY + ".",
    )
    status_storage_replication_factor: f.TopicSetting = setting(
        3,
        key="status.storage.replication.factor",
        group=_GROUP,
        description="Replication factor if connectd creates the status topic.",
    )
    status_storage_partitions: f.TopicSetting = setting(
        5,
        key="status.storage.partitions",
        group=_GROUP,
        description="Partitions if connectd creates the status topic.",
    )
    heartbeat_interval: f.Millis = setting(
        timedelta(milliseconds=3000),
        key="heartbeat.interval.ms",
        group=_GROUP,
        description="Heartbeat to the group coordinator.",
    )
    session_timeout: f.Millis = setting(
        timedelta(milliseconds=10000),
        key="session.timeout.ms",
        group=_GROUP,
        description="A worker silent for this long leaves the group; its work is reassigned.",
    )
    rebalance_timeout: f.Millis = setting(
        timedelta(milliseconds=60000),
        key="rebalance.timeout.ms",
        group=_GROUP,
        description="How long workers have to stop their tasks and rejoin during a rebalance.",
    )
    scheduled_rebalance_max_delay: f.Millis = setting(
        timedelta(milliseconds=300000),
        key="scheduled.rebalance.max.delay.ms",
        group=_GROUP,
        description="How long the work of a worker that left on purpose (SIGTERM, a rolling"
        " restart) stays reserved for it before it moves to the others.",
    )
    scheduled_rebalance_delay_crashed: f.Bool = setting(
        False,
        key="scheduled.rebalance.delay.crashed",
        group=_GROUP,
        description="true: a crashed worker's work waits scheduled.rebalance.max.delay.ms too,"
        " exactly as in Kafka Connect; false: it moves as soon as the group notices the crash.",
    )
    worker_sync_timeout: f.Millis = setting(
        timedelta(milliseconds=3000),
        key="worker.sync.timeout.ms",
        group=_GROUP,
        description="How long a worker tries to read the config log to its end before it gives"
        " up its work and rejoins.",
    )
    worker_unsync_backoff: f.Millis = setting(
        timedelta(milliseconds=300000),
        key="worker.unsync.backoff.ms",
        group=_GROUP,
        description="How long a worker that could not read the config log waits before it"
        " rejoins the group.",
    )
    # -- Config providers --------------------------------------------------------------------
    config_providers: f.StrList = setting(
        (),
        key="config.providers",
        example=["env", "file"],
        group=_PROV,
        description="Names of the config providers ${NAME:...} references may use, e.g. env,file.",
    )
    config_provider_settings: f.StrDict = setting(
        {},
        key="config.providers.*",
        example={
            "env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            "file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "file.param.allowed.paths": "/etc/connectd",
        },
        group=_PROV,
        description="For each NAME: config.providers.NAME.class and config.providers.NAME.param.*.",
    )
    # -- Executors ---------------------------------------------------------------------------
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
    executor_pool_start: PoolStartName = setting(
        PoolStart.AUTO,
        key=POOL_START_KEY,
        group=_EXEC,
        description="connectd: when the executors start. eager: with the daemon. on-demand: at"
        " the first write (it waits for a JVM start). auto: as soon as a task of a connector"
        " whose class needs executors (the Spark sinks; any connector not marked otherwise)"
        " starts on this worker, so its first write waits no longer than with eager; a worker"
        " whose connectors never write (EchoSink) starts none. Whatever the choice, a write"
        " starts a pool not started yet.",
    )
    executor_spark_master: SparkMaster = setting(
        "local[*]",
        key=SPARK_MASTER_KEY,
        group=_EXEC,
        description="The Spark master each executor's session uses.",
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
    # -- Logging -----------------------------------------------------------------------------
    log_level: LogLevelName = setting(
        LogLevel.INFO, key="log.level", group=_LOG, description="Lowest level logged."
    )
    log_format: LogFormatName = setting(
        LogFormat.TEXT,
        key="log.format",
        group=_LOG,
        description="text for people and journald, json for log pipelines.",
    )

    @model_validator(mode="before")
    @classmethod
    def _map_deprecated_rest(cls, data: Any, info: ValidationInfo) -> Any:
        return map_deprecated_rest(data, info)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> WorkerConfig:
        for problem in self.cross_problems():
            f.report(info, problem)
        return self

    def cross_problems(self) -> list[Problem]:
        """Problems between settings (each value being valid on its own)."""
        _, problems = provider_specs(self.config_providers, self.config_provider_settings)
        problems += self.kafka_problems()
        problems += client_problems("consumer.", KafkaClient.CONSUMER, self.consumer)
        return problems

    def offsets_file(self) -> Path:
        """``offset.storage.file.filename``, or its default under ``state.dir``."""
        return self.offset_storage_file_filename or self.state_dir / "connect.offsets"

    def converter_config(self, which: Literal["key", "value"]) -> dict[str, str]:
        """The worker's settings for its key or value converter, ``schemas.enable`` included."""
        if which == "key":
            extra, schemas = self.key_converter_config, self.key_converter_schemas_enable
        else:
            extra, schemas = self.value_converter_config, self.value_converter_schemas_enable
        return {**extra, "schemas.enable": "true" if schemas else "false"}
