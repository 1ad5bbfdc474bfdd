"""Connect keys that connectd accepts but does not use, each with the reason given to the user.

A stock Kafka Connect file must load: these keys draw one warning each, naming the key, instead
of the "unknown key" error. Exact keys are matched first, then the longest matching prefix.
"""

from __future__ import annotations

_JVM = "only meaningful on the JVM; ignored"
_SOURCE = "only used by source connectors; connectd runs sink connectors; ignored"
_CLIENT = (
    "a worker-level Kafka client setting; set it for the task consumers as consumer.<key>; ignored"
)
_REBALANCE = "Connect's rebalance protocol setting; connectd assigns work its own way; ignored"
_REST = "not supported by connectd's REST API; ignored"

WORKER_KEYS: dict[str, str] = {
    "plugin.path": _JVM + " (connectors are Python classes found by name)",
    "plugin.discovery": _JVM,
    "internal.key.converter": "deprecated in Connect and " + _JVM,
    "internal.value.converter": "deprecated in Connect and " + _JVM,
    "metric.reporters": _JVM + " (connectd serves Prometheus metrics at /metrics)",
    "metrics.num.samples": _JVM,
    "metrics.sample.window.ms": _JVM,
    "metrics.recording.level": _JVM,
    "auto.include.jmx.reporter": _JVM,
    "rest.extension.classes": _JVM,
    "connector.client.config.override.policy": _JVM
    + " (connectors may override any consumer setting)",
    "header.converter": "connectd passes record headers through as bytes; ignored",
    "exactly.once.source.support": _SOURCE,
    "offset.flush.timeout.ms": _SOURCE,
    "topic.creation.enable": _SOURCE,
    "connect.protocol": _REBALANCE,
    "scheduled.rebalance.max.delay.ms": _REBALANCE,
    "worker.sync.timeout.ms": _REBALANCE,
    "worker.unsync.backoff.ms": _REBALANCE,
    "inter.worker.key.generation.algorithm": _JVM,
    "inter.worker.key.size": _JVM,
    "inter.worker.key.ttl.ms": _JVM,
    "inter.worker.signature.algorithm": _JVM,
    "inter.worker.verification.algorithms": _JVM,
    "access.control.allow.origin": _REST,
    "access.control.allow.methods": _REST,
    "response.http.headers.config": _REST,
    "admin.listeners": _REST,
    "client.dns.lookup": _CLIENT,
    "metadata.max.age.ms": _CLIENT,
    "request.timeout.ms": _CLIENT,
    "retry.backoff.ms": _CLIENT,
    "retry.backoff.max.ms": _CLIENT,
    "reconnect.backoff.ms": _CLIENT,
    "reconnect.backoff.max.ms": _CLIENT,
    "receive.buffer.bytes": _CLIENT,
    "send.buffer.bytes": _CLIENT,
    "connections.max.idle.ms": _CLIENT,
    "socket.connection.setup.timeout.ms": _CLIENT,
    "socket.connection.setup.timeout.max.ms": _CLIENT,
}

WORKER_PREFIXES: dict[str, str] = {
    "internal.key.converter.": "deprecated in Connect and " + _JVM,
    "internal.value.converter.": "deprecated in Connect and " + _JVM,
    "header.converter.": "connectd passes record headers through as bytes; ignored",
    "metrics.context.": _JVM,
    "producer.": _SOURCE + " (and Connect's dead letter queue producer)",
    "admin.": _JVM + " (Connect's admin client settings)",
    "listeners.https.": "TLS settings of Connect's REST listener; " + _REST,
    "ssl.": _JVM + " (Java key store settings; connectd reads PEM files)",
    "sasl.": _JVM + " (Java SASL plug-in settings)",
}

CONNECTOR_KEYS: dict[str, str] = {
    "header.converter": "connectd passes record headers through as bytes; ignored",
    "config.action.reload": "connectd re-reads config providers whenever a task starts; ignored",
    "tasks.max.enforce": "connectd always enforces tasks.max; ignored",
    "exactly.once.support": _SOURCE,
    "transaction.boundary": _SOURCE,
    "transaction.boundary.interval.ms": _SOURCE,
    "offsets.storage.topic": _SOURCE,
}

CONNECTOR_PREFIXES: dict[str, str] = {
    "header.converter.": "connectd passes record headers through as bytes; ignored",
    "producer.override.": _SOURCE + " (and Connect's dead letter queue producer)",
    "admin.override.": _JVM + " (Connect's admin client settings)",
    "topic.creation.": _SOURCE,
}
