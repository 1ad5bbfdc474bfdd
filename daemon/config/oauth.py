"""The OAUTHBEARER settings of the worker's Kafka clients, checked as Kafka's login handlers
check them: unsecured tokens from the ``unsecuredLogin*`` JAAS options, or the client
credentials grant against ``sasl.oauthbearer.token.endpoint.url`` (the JAAS line's ``ssl.*``
options for an https endpoint). What ``daemon.kafka.oauthbearer`` makes tokens from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from pydantic import SecretStr

from daemon import tlsprotocols
from daemon.config.values import jaas_options, secret
from daemon.kafka import oauthbearer
from daemon.kafka.oauthbearer import Endpoint, OAuthBearerError, Refresh
from daemon.tlsprotocols import TlsProtocols, TlsSettingError


class OAuthInputs(Protocol):
    """The worker settings the OAUTHBEARER token source is made from (``KafkaSettings``'s)."""

    @property
    def sasl_jaas_config(self) -> SecretStr | None: ...
    @property
    def sasl_login_callback_handler_class(self) -> str | None: ...
    @property
    def sasl_oauthbearer_token_endpoint_url(self) -> str | None: ...
    @property
    def sasl_oauthbearer_client_credentials_client_id(self) -> str | None: ...
    @property
    def sasl_oauthbearer_client_credentials_client_secret(self) -> SecretStr | None: ...
    @property
    def sasl_oauthbearer_scope(self) -> str | None: ...
    @property
    def sasl_oauthbearer_sub_claim_name(self) -> str: ...
    @property
    def sasl_oauthbearer_scope_claim_name(self) -> str: ...
    @property
    def sasl_oauthbearer_header_urlencode(self) -> bool: ...
    @property
    def sasl_login_connect_timeout(self) -> timedelta | None: ...
    @property
    def sasl_login_read_timeout(self) -> timedelta | None: ...
    @property
    def sasl_login_retry_backoff(self) -> timedelta: ...
    @property
    def sasl_login_retry_backoff_max(self) -> timedelta: ...
    @property
    def sasl_login_refresh_window_factor(self) -> float: ...
    @property
    def sasl_login_refresh_window_jitter(self) -> float: ...
    @property
    def sasl_login_refresh_min_period_seconds(self) -> int: ...
    @property
    def sasl_login_refresh_buffer_seconds(self) -> int: ...


#: Kafka's OAUTHBEARER login callback handler for tokens from a token endpoint (its name since
#: Kafka 3.4, and the older one), and its default, unsecured one.
OAUTH_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
_OAUTH_LOGIN_HANDLERS = (
    OAUTH_LOGIN_HANDLER,
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
_UNSECURED_LOGIN_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredLoginCallbackHandler"
)


class OAuthSettingError(ValueError):
    """An OAUTHBEARER setting connectd cannot honour: ``key`` and why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@dataclass(frozen=True)
class OAuthSettings:
    """What the OAUTHBEARER token source is made from (``daemon.kafka.oauthbearer``)."""

    jaas: tuple[tuple[str, str], ...]
    endpoint: Endpoint | None
    principal_claim: str
    scope_claim: str
    refresh: Refresh


def oauth_settings(kafka: OAuthInputs) -> OAuthSettings:
    """The OAUTHBEARER settings checked (``OAuthSettingError`` names the first wrong one)."""
    jaas_text = secret(kafka.sasl_jaas_config) or ""
    if "OAuthBearerLoginModule" not in jaas_text:
        raise OAuthSettingError(
            "sasl.jaas.config",
            "OAUTHBEARER needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
            " required ...;",
        )
    jaas = jaas_options(jaas_text)
    handler = kafka.sasl_login_callback_handler_class
    url = kafka.sasl_oauthbearer_token_endpoint_url
    endpoint: Endpoint | None = None
    if handler in _OAUTH_LOGIN_HANDLERS:
        if not url:
            raise OAuthSettingError(
                "sasl.oauthbearer.token.endpoint.url", f"{handler} needs the token endpoint's URL"
            )
        endpoint = _endpoint(kafka, url, jaas)
    elif handler not in (None, _UNSECURED_LOGIN_HANDLER):
        raise OAuthSettingError(
            "sasl.login.callback.handler.class",
            f"{handler} is a Java class connectd cannot load; it makes OAUTHBEARER tokens"
            f" unsecured (unset) or from a token endpoint ({OAUTH_LOGIN_HANDLER})",
        )
    elif url:
        raise OAuthSettingError(
            "sasl.login.callback.handler.class",
            f"sasl.oauthbearer.token.endpoint.url is set, so Kafka needs {OAUTH_LOGIN_HANDLER}"
            " here; without it the token would be the unsecured one",
        )
    refresh = Refresh(
        kafka.sasl_login_refresh_window_factor,
        kafka.sasl_login_refresh_window_jitter,
        float(kafka.sasl_login_refresh_min_period_seconds),
        float(kafka.sasl_login_refresh_buffer_seconds),
    )
    try:
        oauthbearer.extensions(jaas, secured=endpoint is not None)
        if endpoint is None:
            oauthbearer.unsecured_token(jaas)
    except OAuthBearerError as exc:
        key, _, reason = str(exc).partition(": ")
        raise OAuthSettingError(key, reason) from None
    return OAuthSettings(
        tuple(sorted(jaas.items())),
        endpoint,
        kafka.sasl_oauthbearer_sub_claim_name,
        kafka.sasl_oauthbearer_scope_claim_name,
        refresh,
    )


#: The JAAS line's ``ssl.*`` options connectd's https token client takes (Kafka's client takes
#: every client TLS setting there; these are the ones its Kafka clients take too).
JAAS_TLS_OPTIONS = frozenset(
    {
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
    }
)


def jaas_tls_protocols(tls: Mapping[str, str]) -> TlsProtocols:
    """The TLS versions and suites of the JAAS line's ``ssl.protocol``,
    ``ssl.enabled.protocols`` and ``ssl.cipher.suites`` (Kafka's defaults unset), as the Kafka
    clients' own are read (``TlsSettingError`` names the option)."""

    def listed(key: str) -> list[str] | None:
        value = tls.get(key)
        return None if value is None else [v.strip() for v in value.split(",") if v.strip()]

    return tlsprotocols.parse(
        "sasl.jaas.config ssl",
        tls.get("ssl.protocol"),
        listed("ssl.enabled.protocols"),
        listed("ssl.cipher.suites"),
    )


def _endpoint(kafka: OAuthInputs, url: str, jaas: dict[str, str]) -> Endpoint:
    scheme = url.partition(":")[0].lower()
    if scheme not in ("http", "https", "file"):
        raise OAuthSettingError(
            "sasl.oauthbearer.token.endpoint.url", f"{url!r} is not an http, https or file URL"
        )
    tls = {k: v for k, v in jaas.items() if k.startswith("ssl.")}
    other = sorted(set(tls) - JAAS_TLS_OPTIONS)
    if other:
        raise OAuthSettingError(
            "sasl.jaas.config",
            f"{other[0]}: connectd's token endpoint client takes only these TLS options of the"
            f" JAAS line: {', '.join(sorted(JAAS_TLS_OPTIONS))}",
        )
    try:
        jaas_tls_protocols(tls)
    except TlsSettingError as exc:
        raise OAuthSettingError("sasl.jaas.config", f"{exc.key}: {exc.reason}") from None
    algorithm = tls.get("ssl.endpoint.identification.algorithm", "https")
    if algorithm.lower() not in ("", "https"):
        raise OAuthSettingError(
            "sasl.jaas.config",
            f"ssl.endpoint.identification.algorithm={algorithm!r}: expected https (check the"
            " token endpoint's host name, the default) or empty (do not)",
        )
    client_id = kafka.sasl_oauthbearer_client_credentials_client_id or jaas.get("clientId", "")
    client_secret = secret(kafka.sasl_oauthbearer_client_credentials_client_secret) or jaas.get(
        "clientSecret", ""
    )
    scope = kafka.sasl_oauthbearer_scope or jaas.get("scope", "")
    if scheme != "file":
        for value, key, option in (
            (client_id, "sasl.oauthbearer.client.credentials.client.id", "clientId"),
            (client_secret, "sasl.oauthbearer.client.credentials.client.secret", "clientSecret"),
        ):
            if not value.strip():
                raise OAuthSettingError(
                    key,
                    f'the client credentials grant needs it (or {option}="..." in the JAAS line)',
                )

    def seconds(value: timedelta | None) -> float | None:
        return None if value is None else value.total_seconds()

    return Endpoint(
        url,
        client_id,
        client_secret,
        scope,
        kafka.sasl_oauthbearer_header_urlencode,
        seconds(kafka.sasl_login_connect_timeout),
        seconds(kafka.sasl_login_read_timeout),
        kafka.sasl_login_retry_backoff.total_seconds(),
        kafka.sasl_login_retry_backoff_max.total_seconds(),
        tuple(sorted(tls.items())) if scheme == "https" else (),
    )
