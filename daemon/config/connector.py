"""A connector's configuration: the framework's settings typed, the connector's own kept as text.

``ConnectorConfig`` types the keys every sink connector shares (``name``, ``connector.class``,
``tasks.max``, ``topics``/``topics.regex``, converters, ``errors.*``, ``transforms``, ...).
Every other key belongs to the connector class: it is kept in ``connector_settings`` and checked
by the class's ``ConnectorConfigDef`` when a resolver provides one.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, model_validator

from daemon.config import fields as f
from daemon.config import transforms as tf
from daemon.config import values
from daemon.config.clients import (
    AdminSettings,
    ConsumerSettings,
    KafkaClient,
    ProducerSettings,
    client_problems,
)
from daemon.config.fields import Expect, choice, setting
from daemon.config.problems import Problem, error, warning
from daemon.config.worker import WorkerConfig

MAX_NAME_BYTES = 249


def _parse_name(value: object) -> str:
    name = f.parse_str(value)
    if not name:
        raise ValueError("the name is empty")
    if "/" in name:
        raise ValueError(f"{name!r} contains '/'")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise ValueError(f"{name!r} contains a control character")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise ValueError(f"the name is {len(name.encode('utf-8'))} bytes long")
    return name


ConnectorName = Annotated[
    str,
    BeforeValidator(_parse_name),
    Expect(f"a non-empty name without '/' or control characters, at most {MAX_NAME_BYTES} bytes"),
]

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def _parse_topics(value: object) -> tuple[str, ...]:
    topics = f.parse_list(value)
    for topic in topics:
        if not _TOPIC.match(topic) or topic in (".", ".."):
            raise ValueError(f"{topic!r} is not a valid topic name")
    return topics


Topics = Annotated[
    tuple[str, ...],
    BeforeValidator(_parse_topics),
    Expect("a comma-separated list of topic names (letters, digits, '.', '_', '-')"),
]


def _parse_regex(value: object) -> re.Pattern[str] | None:
    if value is None or isinstance(value, re.Pattern):
        return value
    text = f.parse_str(value)
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise ValueError(f"{text!r} is not a valid regular expression: {exc}") from None


TopicsRegex = Annotated[
    re.Pattern[str] | None, BeforeValidator(_parse_regex), Expect("a regular expression")
]


class ErrorTolerance(enum.StrEnum):
    NONE = "none"
    ALL = "all"


Tolerance = Annotated[
    ErrorTolerance, BeforeValidator(choice(ErrorTolerance)), Expect("none or all")
]


class OutOfRangePolicy(enum.StrEnum):
    """``errors.offset.out.of.range``: what a task does when the offset it resumes from is no
    longer in the partition's log (retention deleted records it had not consumed)."""

    FAIL = "fail"
    EARLIEST = "earliest"


OutOfRange = Annotated[
    OutOfRangePolicy, BeforeValidator(choice(OutOfRangePolicy)), Expect("fail or earliest")
]

_E = "Errors"


def _present(value: object) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list | tuple):
        return bool(value)
    return value is not None


class ConnectorConfig(BaseModel):
    """One connector's configuration, validated. Frozen.

    ``properties`` is the map this was built from, exactly (strings, ``${...}`` references
    unresolved if they were): what is stored, returned by the REST API and passed to the
    connector. ``connector_settings`` is the part of it that is not the framework's.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    name: ConnectorName = setting(key="name", description="The connector's unique name.")
    connector_class: f.Str = setting(
        key="connector.class",
        expected="a connector class name or alias, e.g. ParquetSink",
        description="The connector class: its name or alias.",
    )
    tasks_max: f.PositiveInt = setting(
        1, key="tasks.max", description="Most tasks the connector may run."
    )
    tasks_max_enforce: f.Bool = setting(
        True,
        key="tasks.max.enforce",
        description="(Deprecated in Connect) true: a connector that generates more task"
        " configurations than tasks.max fails, naming both counts; false: they all run (up to"
        " the worker's tasks.max.limit), with a warning.",
    )
    topics: Topics = setting(
        (), key="topics", description="Topics to consume. Set this or topics.regex."
    )
    topics_regex: TopicsRegex = setting(
        None, key="topics.regex", description="Consume every topic whose whole name matches."
    )
    key_converter: values.OptConverterName = setting(
        None,
        key="key.converter",
        default_doc="the worker's",
        description="Key converter for this connector.",
    )
    value_converter: values.OptConverterName = setting(
        None,
        key="value.converter",
        default_doc="the worker's",
        description="Value converter for this connector.",
    )
    header_converter: values.OptHeaderConverterName = setting(
        None,
        key="header.converter",
        example="org.apache.kafka.connect.storage.SimpleHeaderConverter",
        default_doc="the worker's",
        description="What this connector's headers column holds: each header's text"
        " (SimpleHeaderConverter, StringConverter), the JSON text of what JsonConverter reads"
        " from it, or its bytes (ByteArrayConverter).",
    )
    header_converter_config: f.StrDict = setting(
        {},
        key="header.converter.*",
        description="Settings of this connector's header converter: converter.encoding.",
    )
    key_converter_config: f.StrDict = setting(
        {}, key="key.converter.*", description="Settings of this connector's key converter."
    )
    value_converter_config: f.StrDict = setting(
        {}, key="value.converter.*", description="Settings of this connector's value converter."
    )
    errors_tolerance: Tolerance = setting(
        ErrorTolerance.NONE,
        key="errors.tolerance",
        group=_E,
        description="none: a bad record fails the task; all: skip it (log it, send it to the DLQ).",
    )
    errors_retry_timeout: f.MillisOrForever = setting(
        timedelta(0),
        key="errors.retry.timeout",
        group=_E,
        description=(
            "How long to retry connectd's retriable failures of a delivery step (a hung write"
            " killed, a dead executor); -1 for ever. A sink's RetriableError is retried"
            " regardless, as Connect retries a RetriableException from put."
        ),
    )
    errors_retry_delay_max: f.Millis = setting(
        timedelta(milliseconds=60000),
        key="errors.retry.delay.max.ms",
        group=_E,
        description="Longest wait between retries.",
    )
    errors_offset_out_of_range: OutOfRange = setting(
        OutOfRangePolicy.FAIL,
        key="errors.offset.out.of.range",
        group=_E,
        description=(
            "connectd: when the offset a task resumes from was deleted from the log (retention)."
            " fail: the task fails, naming the partition, the offset and the log start;"
            " earliest: continue from the log start, log and count the offsets skipped and"
            " record the gap in the sink (ParquetSink: a skip record in the commit log)."
        ),
    )
    errors_log_enable: f.Bool = setting(
        False, key="errors.log.enable", group=_E, description="Log each tolerated error."
    )
    errors_log_include_messages: f.Bool = setting(
        False,
        key="errors.log.include.messages",
        group=_E,
        description="Include the record's coordinates and content in that log.",
    )
    errors_deadletterqueue_topic_name: f.OptStr = setting(
        None,
        key="errors.deadletterqueue.topic.name",
        group=_E,
        description="Topic that receives records that failed.",
    )
    errors_deadletterqueue_topic_replication_factor: f.TopicSetting = setting(
        3,
        key="errors.deadletterqueue.topic.replication.factor",
        group=_E,
        description="Replication factor if the dead letter topic is created.",
    )
    errors_deadletterqueue_context_headers_enable: f.Bool = setting(
        False,
        key="errors.deadletterqueue.context.headers.enable",
        group=_E,
        description="Add headers describing the failure to dead letter records.",
    )
    errors_restart_enabled: f.Bool = setting(
        True,
        key="errors.restart.enabled",
        group=_E,
        description="connectd: restart failed tasks automatically.",
    )
    errors_restart_max: f.Limit = setting(
        7,
        key="errors.restart.max",
        group=_E,
        description="connectd: automatic restarts before giving up; -1 for no limit.",
    )
    errors_restart_backoff_max: f.Millis = setting(
        timedelta(hours=1),
        key="errors.restart.backoff.max.ms",
        group=_E,
        description="connectd: longest wait before an automatic restart (n·(n+1) minutes).",
    )
    transforms: f.StrList = setting(
        (),
        key="transforms",
        description="Aliases of Connect's single message transforms, applied in this order"
        " after conversion, before the sink: every transform of Kafka Connect 4.1 (with Connect's"
        " rules for keys and values with a schema and for schemaless ones), or a Python class"
        " named package.module:Class. A class connectd does not know is refused (its records"
        " would reach the sink untransformed).",
    )
    transforms_config: f.StrDict = setting(
        {}, key="transforms.*", description="transforms.ALIAS.type and the transforms' settings."
    )
    predicates: f.StrList = setting(
        (),
        key="predicates",
        description="Aliases of the predicates transforms may use (TopicNameMatches,"
        " HasHeaderKey, RecordIsTombstone).",
    )
    predicates_config: f.StrDict = setting(
        {}, key="predicates.*", description="predicates.ALIAS.type and the predicates' settings."
    )
    executor_writes_max: f.OptPositiveInt = setting(
        None,
        key="executor.writes.max",
        example=-1,
        default_doc="executor.pool.size",
        description="connectd: the most executors this connector's writes hold at once, counting"
        " writes that ran long and stepped aside for other connectors' (at most"
        " executor.pool.size, the default). 1: its tasks write one at a time.",
    )
    consumer_override: ConsumerSettings = setting(
        {},
        key="consumer.override.*",
        description="Consumer settings for this connector's tasks, over the worker's consumer.*.",
    )
    producer_override: ProducerSettings = setting(
        {},
        key="producer.override.*",
        description="Security settings (security.protocol, ssl.*, sasl.*) of this connector's"
        " dead-letter producer, over the worker's producer.*; other keys warned about, unused.",
    )
    admin_override: AdminSettings = setting(
        {},
        key="admin.override.*",
        description="Security settings (security.protocol, ssl.*, sasl.*) of this connector's"
        " dead-letter admin client, over the worker's admin.*; other keys warned about, unused.",
    )

    connector_settings: dict[str, str] = Field(default_factory=dict)
    properties: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _one_topic_source(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict):
            has = [
                key
                for key, name in (("topics", "topics"), ("topics.regex", "topics_regex"))
                if _present(data.get(key, data.get(name)))
            ]
            if not has:
                f.report(
                    info,
                    error(
                        "topics",
                        "neither topics nor topics.regex is set",
                        "exactly one of topics or topics.regex",
                    ),
                )
            elif len(has) == 2:
                f.report(
                    info,
                    error(
                        "topics.regex",
                        "both topics and topics.regex are set",
                        "exactly one of topics or topics.regex",
                    ),
                )
        return data

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> ConnectorConfig:
        for problem in self.cross_problems():
            f.report(info, problem)
        return self

    def chain_and_problems(self) -> tuple[tf.Chain, list[Problem]]:
        """The transformation chain ``transforms`` and ``predicates`` configure, and its
        problems (``daemon.config.transforms``)."""
        return tf.chain(
            self.transforms, self.transforms_config, self.predicates, self.predicates_config
        )

    @property
    def transform_chain(self) -> tf.Chain:
        """The checked chain (empty without ``transforms``); a parsed configuration has none
        with errors."""
        return self.chain_and_problems()[0]

    def cross_problems(self) -> list[Problem]:
        """Problems between settings (each value being valid on its own)."""
        problems = []
        dlq = self.errors_deadletterqueue_topic_name
        if dlq is not None and dlq in self.topics:
            problems.append(
                error(
                    "errors.deadletterqueue.topic.name",
                    f"{dlq!r} is also in topics",
                    "a topic this connector does not consume",
                )
            )
        elif dlq is not None and self.topics_regex is not None and self.topics_regex.fullmatch(dlq):
            problems.append(
                error(
                    "errors.deadletterqueue.topic.name",
                    f"{dlq!r} matches topics.regex",
                    "a topic this connector does not consume",
                )
            )
        if dlq is not None and self.errors_tolerance is ErrorTolerance.NONE:
            problems.append(
                warning(
                    "errors.deadletterqueue.topic.name",
                    "errors.tolerance is none, so a failing record stops the task instead",
                )
            )
        problems += self.chain_and_problems()[1]
        for prefix, settings in self.client_overrides().items():
            client = KafkaClient(prefix.removesuffix(".override."))
            problems += client_problems(prefix, client, settings)
        return problems

    def client_overrides(self) -> dict[str, dict[str, str]]:
        """Each Kafka client's overrides by their prefix (``consumer.override.`` ...)."""
        return {
            "consumer.override.": self.consumer_override,
            "producer.override.": self.producer_override,
            "admin.override.": self.admin_override,
        }


def effective_header_converter(
    worker: WorkerConfig, connector: ConnectorConfig
) -> tuple[values.HeaderConverter | None, dict[str, str]]:
    """The header converter a connector's tasks use and its settings: the connector's own
    (with exactly its own settings, as in Connect), else the worker's."""
    if connector.header_converter is not None:
        return connector.header_converter, dict(connector.header_converter_config)
    return worker.header_converter, {
        **worker.header_converter_config,
        **connector.header_converter_config,
    }


def effective_converter(
    worker: WorkerConfig, connector: ConnectorConfig, which: Literal["key", "value"]
) -> tuple[values.Converter | str, dict[str, str]]:
    """The converter a connector's tasks use for keys or values, and its settings.

    A connector that names its own converter gets exactly its own ``<which>.converter.*``
    settings, as in Connect. One that does not gets the worker's converter and settings, with
    its own ``<which>.converter.*`` settings on top (Connect would ignore those silently).
    """
    own = connector.key_converter if which == "key" else connector.value_converter
    own_config = (
        connector.key_converter_config if which == "key" else connector.value_converter_config
    )
    if own is not None:
        return own, dict(own_config)
    base = worker.key_converter if which == "key" else worker.value_converter
    return base, {**worker.converter_config(which), **own_config}
