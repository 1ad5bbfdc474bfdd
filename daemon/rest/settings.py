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
``listeners_https_ssl_keystore_location``             PEM file: private key + certificate chain
``listeners_https_ssl_key_password``                  password of that key, if encrypted
``listeners_https_ssl_truststore_location``           PEM CA bundle for client certificates
``listeners_https_ssl_client_auth``                   none | requested | required
====================================================  ==========================================
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from daemon.config import Listener, WorkerConfig
from daemon.errors import ConfigError


def _declared(name: str) -> Any:
    """The default ``WorkerConfig`` declares for field ``name``: defaults are not repeated here."""
    return WorkerConfig.model_fields[name].get_default(call_default_factory=True)


DEFAULT_LISTENER: Listener = _declared("listeners")[0]
DEFAULT_MAX_BODY_BYTES: int = _declared("rest_request_max_bytes")
ClientAuth = Literal["none", "requested", "required"]


@dataclass(frozen=True)
class TlsSettings:
    """TLS of the ``https://`` listeners, from PEM files (Kafka's ``ssl.keystore.type=PEM``)."""

    keystore_location: Path
    key_password: str | None = None
    truststore_location: Path | None = None
    client_auth: ClientAuth = "none"

    def context(self) -> ssl.SSLContext:
        """A server ``SSLContext`` (TLS 1.2 or newer). Reads the files: call it at start-up."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.keystore_location, password=self.key_password)
            if self.truststore_location is not None:
                ctx.load_verify_locations(cafile=self.truststore_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"listeners.https.ssl.*: cannot load the PEM key store {self.keystore_location}"
                f" or trust store {self.truststore_location}: {exc}; expected PEM files (key +"
                " certificate chain in the key store)"
            ) from exc
        if self.client_auth != "none":
            if self.truststore_location is None:
                raise ConfigError(
                    "listeners.https.ssl.client.auth needs listeners.https.ssl.truststore.location"
                )
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

    @classmethod
    def from_worker_config(cls, config: WorkerConfig) -> RestSettings:
        """The REST settings a worker configuration asks for (see the module docstring)."""
        tls = None
        if config.listeners_https_ssl_keystore_location is not None:
            password = config.listeners_https_ssl_key_password
            tls = TlsSettings(
                keystore_location=config.listeners_https_ssl_keystore_location,
                key_password=None if password is None else password.get_secret_value(),
                truststore_location=config.listeners_https_ssl_truststore_location,
                client_auth=config.listeners_https_ssl_client_auth,
            )
        return cls(
            listeners=tuple(config.listeners),
            max_body_bytes=config.rest_request_max_bytes,
            request_timeout=config.rest_request_timeout.total_seconds(),
            credentials_file=config.rest_auth_basic_credentials_file,
            topic_tracking=config.topic_tracking_enable,
            topic_tracking_reset=config.topic_tracking_allow_reset,
            tls=tls,
            health_stalled_unhealthy=config.health_stalled_unhealthy,
        )

    def check(self) -> None:
        """``ConfigError`` if an ``https://`` listener has no key store to serve with."""
        if any(listener.scheme == "https" for listener in self.listeners) and self.tls is None:
            raise ConfigError(
                "listeners has an https:// listener but listeners.https.ssl.keystore.location is"
                " not set; expected a PEM file holding the private key and certificate chain"
            )
        if self.max_body_bytes < 1:
            raise ConfigError("rest.request.max.bytes must be at least 1")
