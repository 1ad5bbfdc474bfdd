"""The REST API's JSON shapes as pydantic models: request bodies (validated) and answers.

Request models validate every body before a handler sees it, and the OpenAPI document at
``/openapi.json`` is generated from these same classes, so the document cannot promise a shape
the server refuses. Config values follow Connect's JSON rules: strings, numbers and booleans
are accepted and stored as their text (``1`` → ``"1"``, ``true`` → ``"true"``).

Answer models describe what ``daemon.runtime.model``'s ``to_json()`` methods produce (a test
keeps the two in step); handlers serialise those dataclasses, not these models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    RootModel,
    WithJsonSchema,
)

from daemon.config.jsonfile import scalar_text
from daemon.runtime.model import State

_STRICT = ConfigDict(strict=True, extra="forbid")


def _config_text(value: object) -> str:
    text = scalar_text(value)
    if text is None:
        kind = "null" if value is None else "an object" if isinstance(value, dict) else "an array"
        raise ValueError(f"the value is {kind}; expected a string, number or boolean")
    return text


_SCALAR_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]
}
ConfigValue = Annotated[str, BeforeValidator(_config_text), WithJsonSchema(_SCALAR_SCHEMA)]
"""A config value as Connect reads JSON: a string, or a number/boolean taken as its text."""


def _any_case(*words: str) -> str:
    alternatives = ("".join(f"[{c.upper()}{c.lower()}]" for c in w) for w in words)
    return "^(" + "|".join(alternatives) + ")$"


def _upper_choice(*choices: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if isinstance(value, str) and value.upper() in choices:
            return value.upper()
        raise ValueError(f"{value!r} is not one of {', '.join(choices)}")

    return parse


_INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")
InitialState = Annotated[
    str,
    BeforeValidator(_upper_choice(*_INITIAL_STATES)),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": _any_case(*_INITIAL_STATES),
            "description": "RUNNING, PAUSED or STOPPED (any letter case)",
        }
    ),
]


# --- request bodies --------------------------------------------------------------------------


_DEMO_CONFIG: dict[str, JsonValue] = {
    "connector.class": "HangSink",
    "tasks.max": "1",
    "topics": "some_demo_topic",
}
HANG_DEMO: dict[str, JsonValue] = {"name": "sink-hang-connector", "config": _DEMO_CONFIG}
"""The hang demo's connector (seeds/000): the documented example of a creation."""


class CreateConnectorRequest(BaseModel):
    """``POST /connectors``: the connector's name, configuration and optional initial state."""

    model_config = ConfigDict(
        strict=True, extra="forbid", json_schema_extra={"examples": [HANG_DEMO]}
    )

    name: str = Field(description="The connector's name; leading and trailing spaces are cut.")
    config: dict[str, ConfigValue] = Field(
        description="The configuration; config.name is filled in from name when missing."
    )
    initial_state: InitialState | None = Field(
        default=None, description="RUNNING (default), PAUSED or STOPPED."
    )


class ConnectorConfigBody(RootModel[dict[str, ConfigValue]]):
    """``PUT /connectors/{connector}/config`` and config validation: a whole configuration."""

    model_config = ConfigDict(json_schema_extra={"examples": [_DEMO_CONFIG]})


class TaskConfigsBody(RootModel[list[dict[str, str]]]):
    """``POST /connectors/{connector}/tasks`` (between workers): task configurations, task 0
    first."""


class ConfigPatchBody(RootModel[dict[str, ConfigValue | None]]):
    """``PATCH /connectors/{connector}/config``: keys to set; a null value removes the key."""


class OffsetEntry(BaseModel):
    """One partition's offset, in Connect's sink shape (checked with Connect's messages)."""

    model_config = _STRICT

    partition: dict[str, Any] | None = Field(
        default=None, description='{"kafka_topic": "...", "kafka_partition": N}'
    )
    offset: dict[str, Any] | None = Field(default=None, description='{"kafka_offset": N}')


class OffsetsBody(BaseModel):
    """``PATCH /connectors/{connector}/offsets``."""

    model_config = _STRICT

    offsets: list[OffsetEntry] | None = None


class LoggerLevelBody(BaseModel):
    """``PUT /admin/loggers/{logger}``: the new level (log4j's or Python's names)."""

    model_config = ConfigDict(strict=True, extra="allow")

    level: str | None = Field(default=None, description="e.g. DEBUG; required")


# --- answers ---------------------------------------------------------------------------------

StateName = Literal["UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"]
assert set(StateName.__args__) == {s.value for s in State}  # type: ignore[attr-defined]


class ErrorMessage(BaseModel):
    error_code: int
    message: str


class Message(BaseModel):
    message: str


class ServerInfo(BaseModel):
    version: str
    commit: str
    kafka_cluster_id: str | None


class StalledTask(BaseModel):
    connector: str
    task: int
    since: str
    lag: int


class WorkerStatus(BaseModel):
    status: Literal["healthy", "starting", "unhealthy"]
    message: str
    stalled: list[StalledTask] | None = Field(
        default=None,
        description="connectd: the stalled tasks (task.stall.warn.ms), when there are any.",
    )


class ConnectorTaskId(BaseModel):
    connector: str
    task: int


class ConnectorInfo(BaseModel):
    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: str


class AutoRestart(BaseModel):
    count: int
    last_restart: str | None
    next_restart: str | None


class Stall(BaseModel):
    since: str = Field(description="ISO 8601, UTC: since when the task has had lag and no commit.")
    lag: int = Field(description="Records behind, over its stalled partitions.")
    partitions: list[str] = Field(description="topic-partition of each stalled partition.")


class Retrying(BaseModel):
    reason: str = Field(description="What failed: the error's class and the first line of it.")
    attempts: int = Field(description="Retries so far, since the last step that succeeded.")
    since: str = Field(description="ISO 8601, UTC: the first failure of this run of retries.")
    next_retry: str = Field(description="ISO 8601, UTC: when the batch is delivered again.")


class ConnectorState(BaseModel):
    state: StateName
    worker_id: str
    trace: str | None = None
    auto_restart: AutoRestart | None = None


class TaskState(BaseModel):
    id: int
    state: StateName
    worker_id: str
    trace: str | None = None
    incarnation: int | None = Field(
        default=None,
        description="connectd: the epoch the live (or last) incarnation started with; "
        "a new value means the task was restarted.",
    )
    epoch: int | None = Field(
        default=None,
        description="connectd: the incarnation's fencing epoch now; it grows when a "
        "rebalance hands the task new partitions.",
    )
    executor_pid: int | None = Field(
        default=None, description="connectd: the executor process writing for the task now."
    )
    auto_restart: AutoRestart | None = None
    stalled: Stall | None = Field(
        default=None,
        description="connectd: present while the task is RUNNING with lag above 0 and no commit"
        " for task.stall.warn.ms.",
    )
    retrying: Retrying | None = Field(
        default=None,
        description="connectd: present while the task is RUNNING between a failed delivery step"
        " and its retry (the sink's RetriableError, retried until it succeeds, or a retriable"
        " failure within errors.retry.timeout).",
    )


class ConnectorStateInfo(BaseModel):
    name: str
    connector: ConnectorState
    tasks: list[TaskState]
    type: str


class TaskInfo(BaseModel):
    id: ConnectorTaskId
    config: dict[str, str]


class ConnectorExpansion(BaseModel):
    status: ConnectorStateInfo | None = None
    info: ConnectorInfo | None = None


class ConnectorList(RootModel[list[str] | dict[str, ConnectorExpansion]]):
    """Connector names; with ``expand``, each name's status and/or info."""


class ActiveTopics(BaseModel):
    topics: list[str]


class ActiveTopicsByConnector(RootModel[dict[str, ActiveTopics]]):
    pass


class KafkaPartition(BaseModel):
    kafka_topic: str
    kafka_partition: int


class KafkaOffset(BaseModel):
    kafka_offset: int


class SinkOffset(BaseModel):
    partition: KafkaPartition
    offset: KafkaOffset


class ConnectorOffsets(BaseModel):
    offsets: list[SinkOffset]


class PluginInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    class_: str = Field(alias="class")
    type: str
    version: str


class PluginList(RootModel[list[PluginInfo]]):
    pass


class ConfigKeyInfo(BaseModel):
    name: str
    type: str
    required: bool
    default_value: str | None
    importance: str
    documentation: str
    group: str | None
    width: str
    display_name: str
    dependents: list[str]
    order: int


class ConfigKeyInfoList(RootModel[list[ConfigKeyInfo]]):
    pass


class ConfigValueInfo(BaseModel):
    name: str
    value: str | None
    recommended_values: list[str]
    errors: list[str]
    visible: bool


class ConfigInfo(BaseModel):
    definition: ConfigKeyInfo
    value: ConfigValueInfo


class ConfigInfos(BaseModel):
    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo]


class LoggerLevel(BaseModel):
    level: str
    last_modified: int | None


class LoggerLevels(RootModel[dict[str, LoggerLevel]]):
    pass


class LoggerNames(RootModel[list[str]]):
    pass


class ConfigMap(RootModel[dict[str, str]]):
    pass


class TaskInfoList(RootModel[list[TaskInfo]]):
    pass
