"""Kafka client settings given by prefix: ``consumer.*``, ``producer.*``, ``admin.*`` (worker) and
``consumer.override.*``, ``producer.override.*``, ``admin.override.*`` (connector).

Connect hands these keys to its Java clients, which refuse a bad value (the worker does not
start) and log an unknown key. connectd checks them when the file is loaded, against the table
of each client's settings here (``KNOWN_KEYS``/``CONSUMER_KEYS``):

- a consumer key that connectd passes on to aiokafka (``max.poll.records`` ...) must have a
  valid value: an error naming the key and the expected type (``check-config`` reports it, the
  daemon exits 78, a REST create answers 400); the runtime maps it with the same ``parse``;
- the security settings (``security.protocol``, ``ssl.*``, ``sasl.*``) of every client are
  read as the worker's own are (``daemon.config.parse.security_overrides``): the task
  consumers take ``consumer.*``/``consumer.override.*``'s, the dead-letter queue's producer
  ``producer.*``/``producer.override.*``'s, its admin client ``admin.*``/``admin.override.*``'s;
- a key Connect's Java client knows but connectd does not use (``partition.assignment.strategy``,
  a producer or admin key other than a security setting, the runtime's own ``group.id``) is a
  warning saying why it is ignored;
- any other key is a warning ``unknown key``, with a "did you mean" when one is close.

Values holding a ``${provider:...}`` reference are checked once resolved, at task start.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated

from daemon.config import fields as f
from daemon.config.problems import Problem, Severity, error, unknown_key, warning
from daemon.config.providers import has_reference


class KafkaClient(enum.StrEnum):
    """The Kafka clients whose settings a prefix setting may carry."""

    CONSUMER = "consumer"
    PRODUCER = "producer"
    ADMIN = "admin"


@dataclass(frozen=True)
class ClientKey:
    """One Kafka client setting connectd passes on: the aiokafka argument it becomes and how
    its text is parsed (``ValueError`` naming the value when it is not valid)."""

    argument: str
    parse: Callable[[object], object]
    expected: str


def _int(least: int) -> Callable[[object], object]:
    def parse(value: object) -> object:
        number = f.parse_int_value(value)
        if number < least:
            raise ValueError(f"{value!r} is less than {least}")
        return number

    return parse


def _one_of(*choices: str) -> Callable[[object], object]:
    # Case-sensitive, as Java's ValidString, and aiokafka compares the exact text too.
    def parse(value: object) -> object:
        text = f.parse_str(value)
        if text not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _non_empty(value: object) -> object:
    text = f.parse_str(value)
    if not text:
        raise ValueError("the value is empty")
    return text


def _key(argument: str, least: int) -> ClientKey:
    return ClientKey(argument, _int(least), f"an integer ≥ {least}")


CONSUMER_KEYS: Mapping[str, ClientKey] = {
    "max.poll.records": _key("max_poll_records", 1),
    "fetch.min.bytes": _key("fetch_min_bytes", 0),
    "fetch.max.bytes": _key("fetch_max_bytes", 0),
    "fetch.max.wait.ms": _key("fetch_max_wait_ms", 0),
    "max.partition.fetch.bytes": _key("max_partition_fetch_bytes", 0),
    "session.timeout.ms": _key("session_timeout_ms", 1),
    "heartbeat.interval.ms": _key("heartbeat_interval_ms", 1),
    "max.poll.interval.ms": _key("max_poll_interval_ms", 1),
    "auto.offset.reset": ClientKey(
        "auto_offset_reset", _one_of("earliest", "latest", "none"), "earliest, latest or none"
    ),
    "isolation.level": ClientKey(
        "isolation_level",
        _one_of("read_uncommitted", "read_committed"),
        "read_uncommitted or read_committed",
    ),
    "request.timeout.ms": _key("request_timeout_ms", 0),
    "retry.backoff.ms": _key("retry_backoff_ms", 0),
    "metadata.max.age.ms": _key("metadata_max_age_ms", 0),
    "connections.max.idle.ms": _key("connections_max_idle_ms", 0),
    "check.crcs": ClientKey("check_crcs", f.parse_bool, "true or false"),
    "client.id": ClientKey("client_id", f.parse_str, "a string"),
    "client.rack": ClientKey("client_rack", f.parse_str, "a string"),
    "group.instance.id": ClientKey("group_instance_id", _non_empty, "a non-empty string"),
}
"""The consumer settings connectd passes on to aiokafka, by their Kafka names."""

FIXED_CONSUMER_KEYS: Mapping[str, str] = {
    "group.id": "tasks always use the group connect-<connector name>",
    "enable.auto.commit": "the runtime commits offsets after the sink made them durable",
    "key.deserializer": "records are read as bytes and converted by the connector's converters",
    "value.deserializer": "records are read as bytes and converted by the connector's converters",
    "bootstrap.servers": "the task consumers use the worker's bootstrap.servers",
}
"""Consumer keys the runtime decides itself, each with the reason an override is ignored."""

_COMMON = (
    "bootstrap.servers",
    "client.dns.lookup",
    "client.id",
    "metadata.max.age.ms",
    "send.buffer.bytes",
    "receive.buffer.bytes",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "request.timeout.ms",
    "connections.max.idle.ms",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms",
    "metrics.sample.window.ms",
    "metrics.num.samples",
    "metrics.recording.level",
    "metric.reporters",
    "auto.include.jmx.reporter",
    "enable.metrics.push",
    "security.protocol",
    "security.providers",
    "metadata.recovery.strategy",
    "metadata.recovery.rebootstrap.trigger.ms",
)
"""Settings every Java Kafka client has (``ssl.*`` and ``sasl.*`` are known by prefix)."""

_JAVA_CONSUMER = (
    "group.protocol",
    "group.remote.assignor",
    "partition.assignment.strategy",
    "auto.commit.interval.ms",
    "default.api.timeout.ms",
    "interceptor.classes",
    "exclude.internal.topics",
    "internal.leave.group.on.close",
    "internal.throw.on.fetch.stable.offset.unsupported",
    "allow.auto.create.topics",
)
_JAVA_PRODUCER = (
    "acks",
    "batch.size",
    "buffer.memory",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "delivery.timeout.ms",
    "enable.idempotence",
    "interceptor.classes",
    "key.serializer",
    "value.serializer",
    "linger.ms",
    "max.block.ms",
    "max.in.flight.requests.per.connection",
    "max.request.size",
    "metadata.max.idle.ms",
    "partitioner.class",
    "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms",
    "partitioner.ignore.keys",
    "retries",
    "transaction.timeout.ms",
    "transactional.id",
)
_JAVA_ADMIN = ("bootstrap.controllers", "default.api.timeout.ms", "retries")

KNOWN_PREFIXES = ("ssl.", "sasl.")
"""Every client's TLS and SASL settings: known, and read as the worker's own
(``daemon.config.parse.security_overrides``)."""

KNOWN_KEYS: dict[KafkaClient, frozenset[str]] = {
    KafkaClient.CONSUMER: frozenset(
        (*_COMMON, *_JAVA_CONSUMER, *CONSUMER_KEYS, *FIXED_CONSUMER_KEYS)
    ),
    KafkaClient.PRODUCER: frozenset((*_COMMON, *_JAVA_PRODUCER)),
    KafkaClient.ADMIN: frozenset((*_COMMON, *_JAVA_ADMIN)),
}
"""Each client's known setting names (without the prefix); ``ssl.*``/``sasl.*`` besides."""

_NO_SUCH = "the Python Kafka client has no such setting"
_UNUSED: Mapping[KafkaClient, str] = {
    KafkaClient.PRODUCER: (
        "only used by source connectors and Connect's dead letter queue producer; connectd runs"
        " sink connectors and its dead letter producer takes only the security settings"
        " (security.protocol, ssl.*, sasl.*) of producer.* and producer.override.*"
    ),
    KafkaClient.ADMIN: "Connect's admin client setting; connectd's dead letter queue admin"
    " client takes only the security settings (security.protocol, ssl.*, sasl.*) of admin.*"
    " and admin.override.*",
}


def is_security_key(key: str) -> bool:
    """Whether a Kafka client key is one of its security settings (``security.protocol``,
    ``ssl.*``, ``sasl.*``): a client's override of it changes the worker's for that client."""
    return key == "security.protocol" or key.startswith(KNOWN_PREFIXES)


def known_keys(client: str | None) -> frozenset[str] | None:
    """The setting names ``client`` knows (``ssl.*``/``sasl.*`` besides), or ``None``."""
    if client is None:
        return None
    return KNOWN_KEYS.get(KafkaClient(client))


def is_known(client: KafkaClient, key: str) -> bool:
    return key in KNOWN_KEYS[client] or key.startswith(KNOWN_PREFIXES)


def ignored_reason(client: KafkaClient, key: str) -> str | None:
    """Why connectd ignores a known ``client`` setting; ``None`` if it passes it on (or the key
    is not known at all)."""
    if client is KafkaClient.CONSUMER:
        if key in CONSUMER_KEYS:
            return None
        if key in FIXED_CONSUMER_KEYS:
            return FIXED_CONSUMER_KEYS[key]
        if is_security_key(key):
            return None  # honoured: daemon.config.parse.security_overrides
        return _NO_SUCH if key in KNOWN_KEYS[client] else None
    if is_security_key(key):
        return None  # the dead-letter queue's clients: daemon.config.parse.security_overrides
    return _UNUSED[client] if is_known(client, key) else None


def key_problem(prefix: str, client: KafkaClient, key: str, value: object) -> Problem | None:
    """The problem with one setting ``<prefix><key>=value`` of ``client``, if any."""
    full = prefix + key
    if is_security_key(key):
        return None  # checked as the worker's own: daemon.config.parse.security_overrides
    spec = CONSUMER_KEYS.get(key) if client is KafkaClient.CONSUMER else None
    if spec is not None:
        if isinstance(value, str) and has_reference(value):
            return None  # checked once resolved, when a task starts
        try:
            spec.parse(value)
        except ValueError as exc:
            return error(full, f"{exc}", spec.expected)
        return None
    if not is_known(client, key):
        candidates = [prefix + k for k in sorted(KNOWN_KEYS[client])]
        return unknown_key(full, candidates, Severity.WARNING)
    reason = ignored_reason(client, key)
    return warning(full, f"ignored: {reason}") if reason is not None else None


def client_problems(
    prefix: str, client: KafkaClient, settings: Mapping[str, object]
) -> list[Problem]:
    """Every problem of the ``client`` settings given under ``prefix`` (see the module doc)."""
    found = (key_problem(prefix, client, key, value) for key, value in settings.items())
    return [p for p in found if p is not None]


ConsumerSettings = Annotated[f.StrDict, f.ClientKeys(KafkaClient.CONSUMER.value)]
"""Settings for the task consumers, by their Kafka names (``max.poll.records``)."""
ProducerSettings = Annotated[f.StrDict, f.ClientKeys(KafkaClient.PRODUCER.value)]
"""Producer settings by their Kafka names; the dead-letter producer takes the security ones."""
AdminSettings = Annotated[f.StrDict, f.ClientKeys(KafkaClient.ADMIN.value)]
"""Admin client settings by their Kafka names; the dead-letter admin takes the security ones."""
