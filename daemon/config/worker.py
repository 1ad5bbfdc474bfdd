"""The worker's settings: one ``WorkerConfig`` for standalone and distributed mode.

Each field is one setting, named by its Kafka Connect property (the alias). Connect's keys mean
what they mean in Connect; connectd's own keys (``state.dir``, ``executor.*``, ``log.*``,
``task.write.timeout.ms``, ``startup.kafka.timeout.ms``) are marked as such. Build one from a
file with the loaders (``load_worker``), from a mapping with ``parse_worker``; both report every
problem at once. ``Mode`` and what each mode needs are in ``daemon.config.modes``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, ValidationInfo, model_validator

from daemon.config import fields as f
from daemon.config import values
from daemon.config.clients import KafkaClient, client_problems
from daemon.config.distributed import DistributedSettings
from daemon.config.executors import (
    ExecutorSettings,
)
from daemon.config.fields import setting
from daemon.config.kafka import KafkaSettings
from daemon.config.overrides import OverridePolicy, OverridePolicyName
from daemon.config.problems import Problem
from daemon.config.providers import provider_specs
from daemon.config.rest import RestApiSettings, map_deprecated_rest, rest_problems
from daemon.config.values import (
    Listener,
    Listeners,
    LogFormat,
    LogFormatName,
    LogLevel,
    LogLevelName,
)

WRITE_TIMEOUT_KEY = "task.write.timeout.ms"
"""connectd's write deadline; the runtime also passes it to each task in its configuration."""

TASKS_MAX_LIMIT_KEY = "tasks.max.limit"
TASKS_MAX_LIMIT = 256
"""connectd's bound on a connector's ``tasks.max`` (a worker setting)."""

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


class WorkerConfig(KafkaSettings, RestApiSettings, DistributedSettings, ExecutorSettings):
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
    header_converter: values.OptHeaderConverterName = setting(
        None,
        key="header.converter",
        example="org.apache.kafka.connect.storage.SimpleHeaderConverter",
        group=_CONV,
        default_doc="none: the headers' bytes",
        description="What the headers column holds, unless a connector sets its own: each"
        " header's text (SimpleHeaderConverter, Connect's default, or StringConverter), the"
        " JSON text of what JsonConverter reads from it, or its bytes (ByteArrayConverter).",
    )
    header_converter_config: f.StrDict = setting(
        {},
        key="header.converter.*",
        example={"converter.type": "header"},
        group=_CONV,
        description="Settings of the header converter: StringConverter's converter.encoding"
        " (default UTF-8).",
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
    tasks_max_limit: f.TasksLimit = setting(
        TASKS_MAX_LIMIT,
        key=TASKS_MAX_LIMIT_KEY,
        group=_TASK,
        description="connectd: the most tasks one connector may ask for (tasks.max); a "
        "connector asking for more is refused when created or validated, and one stored "
        "with more fails at start. Each task is a Kafka consumer of its own.",
    )
    connector_client_config_override_policy: OverridePolicy = setting(
        OverridePolicyName.ALL,
        key="connector.client.config.override.policy",
        group=_TASK,
        description="Which client settings a connector may override (consumer.override.*, "
        "producer.override.*, admin.override.*): All (any), Principal (only sasl.jaas.config, "
        "sasl.mechanism and security.protocol) or None; Connect's class names of the three "
        "are accepted too. A connector overriding another is refused, naming the key.",
    )
    offset_flush_interval: f.Millis = setting(
        timedelta(milliseconds=10000),
        key="offset.flush.interval.ms",
        group=_TASK,
        description="How often tasks commit what they have written to the sink.",
    )
    offset_flush_timeout: f.Millis = setting(
        timedelta(milliseconds=5000),
        key="offset.flush.timeout.ms",
        group=_TASK,
        description="How long a task waits for the consumer group to take an offset commit, as"
        " Connect's sink tasks do; past it, a warning, and the next commit carries the offsets."
        " The group's offsets are for lag tools: the sink's own commit records what was written.",
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
        problems += rest_problems(self)
        for prefix, settings in self.client_settings().items():
            problems += client_problems(prefix, KafkaClient(prefix.rstrip(".")), settings)
        problems += self.executor_problems()
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
