"""What the REST layer needs to know, taken from the worker's configuration once.

``RestSettings.from_worker_config`` reads the REST part of ``WorkerConfig``
(``daemon.config.rest.RestApiSettings``, where each setting is declared with its default and
documentation) and ``listeners``:

====================================================  ==========================================
``WorkerConfig`` field (property)                     meaning here
====================================================  ==========================================
``listeners`` (``listeners``)                         where to listen
``rest_request_max_bytes``                            body cap → 413
(``rest.request.max.bytes``)
``rest_request_timeout`` (``rest.request.timeout.ms``)  deadline of one worker call → 500
``rest_auth_basic_credentials_file``                  HTTP basic auth on when set
(``rest.auth.basic.credentials.file``)
``topic_tracking_enable`` (``topic.tracking.enable``)   ``/topics`` → 403 when false
``topic_tracking_allow_reset``                        ``/topics/reset`` → 403 when false
(``topic.tracking.allow.reset``)
``listeners_https_ssl_keystore_*``                   key store: private key + certificate chain
``listeners_https_ssl_key_password``                  password of that key (PEM, JKS)
``listeners_https_ssl_truststore_*``                 CAs that sign client certificates
``listeners_https_ssl_client_auth``                   none | requested | required
``access_control_allow_origin`` / ``…methods``         CORS (``daemon.config.httpheaders``)
``response_http_headers_config``                      headers on every answer
``admin_listeners``                                   unset: /admin served; empty: not
``listeners_https_ssl_protocol``, ``…enabled_protocols``  TLS versions and cipher suites
``, ``…cipher_suites``                                (``daemon.tlsprotocols``)
====================================================  ==========================================

As in Connect, the ``listeners.https.*`` settings go together: when none is given, the HTTPS
listeners take the worker's own ``ssl.*`` settings (``ssl.client.auth`` among them).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon import tlsprotocols
from daemon.config import Listener, WorkerConfig
from daemon.config.httpheaders import Cors, HeaderRule, parse_header_rules
from daemon.config.kafka import store
from daemon.config.rest import ClientAuth
from daemon.errors import ConfigError
from daemon.tlsprotocols import TlsProtocols
from daemon.tlsstores import Store, load_keystore, load_truststore


def _declared(name: str) -> Any:
    """The default ``WorkerConfig`` declares for field ``name``: defaults are not repeated here."""
    return WorkerConfig.model_fields[name].get_default(call_default_factory=True)


DEFAULT_LISTENER: Listener = _declared("listeners")[0]
DEFAULT_MAX_BODY_BYTES: int = _declared("rest_request_max_bytes")


@dataclass(frozen=True)
class TlsSettings:
    """TLS of the ``https://`` listeners: a key store and a trust store as Connect's
    ``listeners.https.ssl.*`` name them, PEM, PKCS12 or JKS (``daemon.tlsstores``)."""

    keystore_location: Path
    key_password: str | None = None
    truststore_location: Path | None = None
    client_auth: ClientAuth = "none"
    keystore_type: str = "PEM"
    keystore_password: str | None = None
    truststore_type: str = "PEM"
    truststore_password: str | None = None
    protocols: TlsProtocols = tlsprotocols.DEFAULTS
    prefix: str = "listeners.https.ssl"
    """Where the settings came from: ``listeners.https.ssl`` or the worker's own ``ssl``."""

    def context(self) -> ssl.SSLContext:
        """A server ``SSLContext`` (TLS 1.2 or newer, as ``protocols`` allows). Reads the
        files: call it at start-up."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.protocols.apply(ctx)
        prefix = self.prefix
        keystore = Store(
            f"{prefix}.keystore",
            self.keystore_location,
            self.keystore_type,
            self.keystore_password,
            self.key_password,
        )
        load_keystore(ctx, keystore)
        if self.truststore_location is not None:
            truststore = Store(
                f"{prefix}.truststore",
                self.truststore_location,
                self.truststore_type,
                self.truststore_password,
            )
            load_truststore(ctx, truststore)
        if self.client_auth != "none":
            if self.truststore_location is None:
                raise ConfigError(f"{prefix}.client.auth needs {prefix}.truststore.location")
            ctx.verify_mode = (
                ssl.CERT_REQUIRED if self.client_auth == "required" else ssl.CERT_OPTIONAL
            )
        return ctx


@dataclass(frozen=True)
class RestSettings:
    """The REST server's settings. Safe defaults: loopback only, 1 MiB bodies, no TLS, no auth."""

    listeners: tuple[Listener, ...] = (DEFAULT_LISTENER,)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout: float = _declared("rest_request_timeout").total_seconds()
    """Seconds a request waits for the worker (Connect's 90 s); the operation itself goes on."""
    health_timeout: float = 10.0
    """Seconds ``/health`` waits for the worker's own loop to answer (Connect's 10 s)."""
    health_stalled_unhealthy: bool = _declared("health_stalled_unhealthy")
    """``health.stalled.unhealthy``: a stalled task makes ``/health`` 503 (else 200, named)."""
    credentials_file: Path | None = None
    topic_tracking: bool = _declared("topic_tracking_enable")
    topic_tracking_reset: bool = _declared("topic_tracking_allow_reset")
    tls: TlsSettings | None = None
    shutdown_timeout: float = 5.0
    """Seconds ``RestServer.close`` lets requests in flight finish."""
    cors_origins: str = ""
    """``access.control.allow.origin`` (``daemon.config.httpheaders``); empty: no CORS."""
    cors_methods: str = ""
    """``access.control.allow.methods``; empty: Jetty's GET,POST,HEAD."""
    header_config: str = ""
    """``response.http.headers.config``."""
    admin_listeners: tuple[Listener, ...] | None = None
    """``admin.listeners``: None, ``/admin`` on the main listeners; empty, nowhere; else only
    on these."""

    @property
    def admin_endpoints(self) -> bool:
        """Whether ``/admin/loggers`` is served at all."""
        return self.admin_listeners is None or bool(self.admin_listeners)

    @property
    def separate_admin(self) -> bool:
        return bool(self.admin_listeners)

    def cors(self) -> Cors | None:
        return Cors.parse(self.cors_origins, self.cors_methods)

    def header_rules(self) -> tuple[HeaderRule, ...]:
        return parse_header_rules(self.header_config)

    @classmethod
    def from_worker_config(cls, config: WorkerConfig) -> RestSettings:
        """The REST settings a worker configuration asks for (see the module docstring)."""
        every = (*config.listeners, *(config.admin_listeners or ()))
        https = any(listener.scheme == "https" for listener in every)
        tls = rest_tls(config) if https else None
        return cls(
            listeners=tuple(config.listeners),
            max_body_bytes=config.rest_request_max_bytes,
            request_timeout=config.rest_request_timeout.total_seconds(),
            credentials_file=config.rest_auth_basic_credentials_file,
            topic_tracking=config.topic_tracking_enable,
            topic_tracking_reset=config.topic_tracking_allow_reset,
            tls=tls,
            health_stalled_unhealthy=config.health_stalled_unhealthy,
            cors_origins=config.access_control_allow_origin,
            cors_methods=config.access_control_allow_methods,
            header_config=config.response_http_headers_config,
            admin_listeners=config.admin_listeners,
        )

    def check(self) -> None:
        """``ConfigError`` if an ``https://`` listener has no key store to serve with."""
        every = (*self.listeners, *(self.admin_listeners or ()))
        if any(listener.scheme == "https" for listener in every) and self.tls is None:
            raise ConfigError(
                "listeners has an https:// listener but neither listeners.https.ssl.keystore."
                "location nor ssl.keystore.location is set; expected a key store (PEM, PKCS12 or"
                " JKS) holding the private key and certificate chain"
            )
        if self.max_body_bytes < 1:
            raise ConfigError("rest.request.max.bytes must be at least 1")
        self.cors()
        self.header_rules()


def rest_tls(config: WorkerConfig) -> TlsSettings | None:
    """The HTTPS listeners' TLS, or None without a key store. As Connect's
    ``valuesWithPrefixAllOrNothing``: the ``listeners.https.ssl.*`` settings when any
    ``listeners.https.*`` setting is given, else the worker's own ``ssl.*`` (those of its Kafka
    clients), ``ssl.client.auth`` among them."""
    given = config.model_fields_set
    if not any(name.startswith("listeners_https_") for name in given):
        prefix = "ssl"
        keystore, truststore = config.tls_stores()
        protocol, enabled, suites = (
            config.ssl_protocol,
            config.ssl_enabled_protocols,
            config.ssl_cipher_suites,
        )
        client_auth = config.ssl_client_auth
    else:
        prefix = "listeners.https.ssl"
        keystore = store(
            f"{prefix}.keystore",
            config.listeners_https_ssl_keystore_location,
            config.listeners_https_ssl_keystore_type
            if "listeners_https_ssl_keystore_type" in given
            else None,
            config.listeners_https_ssl_keystore_password,
            config.listeners_https_ssl_key_password,
        )
        truststore = store(
            f"{prefix}.truststore",
            config.listeners_https_ssl_truststore_location,
            config.listeners_https_ssl_truststore_type
            if "listeners_https_ssl_truststore_type" in given
            else None,
            config.listeners_https_ssl_truststore_password,
            None,
        )
        protocol, enabled, suites = (
            config.listeners_https_ssl_protocol,
            config.listeners_https_ssl_enabled_protocols,
            config.listeners_https_ssl_cipher_suites,
        )
        client_auth = config.listeners_https_ssl_client_auth
    if keystore is None:
        return None
    return TlsSettings(
        keystore_location=keystore.location,
        key_password=keystore.key_password,
        truststore_location=truststore.location if truststore else None,
        client_auth=client_auth,
        keystore_type=keystore.type,
        keystore_password=keystore.password,
        truststore_type=truststore.type if truststore else "PEM",
        truststore_password=truststore.password if truststore else None,
        protocols=tlsprotocols.parse(prefix, protocol, enabled, suites, client=False),
        prefix=prefix,
    )
