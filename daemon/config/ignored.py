"""Connect keys that connectd accepts but does not use, each with the reason given to the user,
and the few it refuses because it cannot do what they ask (``WORKER_REFUSED``).

A stock Kafka Connect file must load: these keys draw one warning each, naming the key, instead
of the "unknown key" error. Exact keys are matched first, then the longest matching prefix.
The Kafka client prefixes connectd does not pass on (``producer.*``, ``admin.*``) are checked
key by key against the client's settings (``daemon.config.clients``): a known key is ignored
with a warning, an unknown one draws "unknown key" with a "did you mean".
"""

from __future__ import annotations

_JVM = "only meaningful on the JVM; ignored"
_SOURCE = "only used by source connectors; connectd runs sink connectors; ignored"
_CLIENT = (
    "a worker-level Kafka client setting; set it for the task consumers as consumer.<key>; ignored"
)
_REBALANCE = "Connect's rebalance protocol setting; connectd assigns work its own way; ignored"

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
    "server.port": "not a Kafka Connect setting (Connect ignores it too); the REST port is"
    + " set with listeners",
    "exactly.once.source.support": _SOURCE,
    "topic.creation.enable": _SOURCE,
    "connect.protocol": _REBALANCE,
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

#: Keys that ask for something connectd does not do, where going on without it would be unsafe:
#: an error naming the key (a stock Connect file sets none of them).
WORKER_REFUSED: dict[str, str] = {
    key: "Connect signs requests between workers with a session key; connectd neither signs"
    " nor verifies them (its internal POST /connectors/{name}/tasks is unsigned), so it cannot"
    " honour this key: remove it, and keep the REST listener where only the workers and"
    " operators reach it (or behind its TLS and authentication settings)"
    for key in (
        "inter.worker.key.generation.algorithm",
        "inter.worker.key.size",
        "inter.worker.key.ttl.ms",
        "inter.worker.signature.algorithm",
        "inter.worker.verification.algorithms",
    )
}

WORKER_PREFIXES: dict[str, str] = {
    "internal.key.converter.": "deprecated in Connect and " + _JVM,
    "internal.value.converter.": "deprecated in Connect and " + _JVM,
    "metrics.context.": _JVM,
    "sasl.": _JVM + " (Java SASL plug-in settings)",
}

_JVM_TLS = (
    "a setting of Java's TLS provider (connectd's TLS is OpenSSL's, whose own choice of"
    " algorithm and randomness serves the same purpose); ignored"
)
#: Kafka's ``ssl.*`` keys that choose Java's TLS machinery: nothing to honour outside the JVM.
SSL_JVM_KEYS = (
    "provider",
    "keymanager.algorithm",
    "trustmanager.algorithm",
    "secure.random.implementation",
)
#: Kafka's ``ssl.*`` keys connectd cannot honour: refused with what to do instead.
SSL_REFUSED: dict[str, str] = {
    "engine.factory.class": "a Java class that builds TLS engines; connectd cannot load it:"
    " remove it and configure TLS with the ssl.keystore.*, ssl.truststore.*, ssl.protocol,"
    " ssl.enabled.protocols and ssl.cipher.suites settings",
    "keystore.key": "connectd reads a key store from a file: put the PEM key and its chain in"
    " one file and set ssl.keystore.location (ssl.keystore.type=PEM)",
    "keystore.certificate.chain": "connectd reads a key store from a file: put the PEM key and"
    " its chain in one file and set ssl.keystore.location (ssl.keystore.type=PEM)",
    "truststore.certificates": "connectd reads a trust store from a file: put the PEM"
    " certificates in a file and set ssl.truststore.location (ssl.truststore.type=PEM)",
}
#: Connect's own TLS settings for separate admin listeners: connectd's admin listeners use the
#: main HTTPS listeners' settings, so these are refused rather than ignored.
ADMIN_TLS_KEYS = (
    "keystore.type", "keystore.location", "keystore.password", "key.password",
    "truststore.type", "truststore.location", "truststore.password", "client.auth",
    "protocol", "enabled.protocols", "cipher.suites", "provider", "keymanager.algorithm",
    "trustmanager.algorithm", "secure.random.implementation", "endpoint.identification.algorithm",
)  # fmt: skip
WORKER_REFUSED.update(
    {
        f"admin.listeners.https.ssl.{key}": "connectd's admin listeners use the TLS settings"
        " of its main HTTPS listeners (listeners.https.ssl.*, or the worker's ssl.*); set"
        " the key there instead"
        for key in ADMIN_TLS_KEYS
    }
)
_TLS_PREFIXES = ("ssl.", "listeners.https.ssl.")
WORKER_KEYS.update({p + k: _JVM_TLS for p in _TLS_PREFIXES for k in SSL_JVM_KEYS})
#: Broker-side TLS keys that worker files copied from a broker's often carry.
WORKER_KEYS.update(
    {
        f"ssl.{key}": "a broker's TLS setting; a Connect worker does not use it either; ignored"
        for key in ("principal.mapping.rules", "allow.dn.changes", "allow.san.changes")
    }
)
WORKER_KEYS["listeners.https.ssl.endpoint.identification.algorithm"] = (
    "the host name check of Connect's REST client between workers; connectd's forwarding"
    " between workers uses the worker URLs each one advertises; ignored"
)
WORKER_REFUSED.update(
    {
        p + k: why.replace("ssl.", p) if p != "ssl." else why
        for p in _TLS_PREFIXES
        for k, why in SSL_REFUSED.items()
    }
)

CONNECTOR_KEYS: dict[str, str] = {
    "config.action.reload": "connectd re-reads config providers whenever a task starts; ignored",
    "exactly.once.support": _SOURCE,
    "transaction.boundary": _SOURCE,
    "transaction.boundary.interval.ms": _SOURCE,
    "offsets.storage.topic": _SOURCE,
}

CONNECTOR_PREFIXES: dict[str, str] = {
    "topic.creation.": _SOURCE,
}

#: Kafka's client SASL keys that name Java classes or a grant connectd does not make: refused.
_SASL_JAVA_CLASS = (
    "a Java class that Kafka's clients load; connectd runs no Java plug-ins, so it cannot"
    " honour it: remove it (OAUTHBEARER tokens come from Kafka's unsecured login or from"
    " sasl.oauthbearer.token.endpoint.url with the client credentials grant)"
)
WORKER_REFUSED.update(
    {
        key: _SASL_JAVA_CLASS
        for key in (
            "sasl.login.class",
            "sasl.client.callback.handler.class",
            "sasl.oauthbearer.jwt.retriever.class",
            "sasl.oauthbearer.jwt.validator.class",
        )
    }
)
WORKER_REFUSED.update(
    {
        f"sasl.oauthbearer.assertion.{key}": "the JWT bearer grant (KIP-1139) is not made by"
        " connectd: its tokens come from the client credentials grant"
        " (sasl.oauthbearer.client.credentials.client.id and .secret) or Kafka's unsecured login"
        for key in (
            "algorithm", "claim.aud", "claim.exp.seconds", "claim.iss", "claim.jti.include",
            "claim.nbf.seconds", "claim.sub", "file", "private.key.file",
            "private.key.passphrase", "template.file",
        )
    }
)  # fmt: skip
