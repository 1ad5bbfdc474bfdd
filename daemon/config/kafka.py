"""Settings of the worker's Kafka clients: brokers, security, and the task consumers' overrides."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from daemon import tlsprotocols
from daemon.config import fields as f
from daemon.config.clients import AdminSettings, ConsumerSettings, ProducerSettings
from daemon.config.fields import setting
from daemon.config.oauth import (
    OAUTH_LOGIN_HANDLER,
    OAuthSettingError,
    OAuthSettings,
    oauth_settings,
)
from daemon.config.problems import Problem, error, warning
from daemon.config.values import (
    EndpointIdentification,
    HostPorts,
    SaslMechanism,
    SaslMechanismName,
    SecurityProtocol,
    SecurityProtocolName,
    StoreType,
    jaas_options,
    secret,
)
from daemon.tlsprotocols import TlsProtocols, TlsSettingError
from daemon.tlsstores import Store, configured

_KAFKA = "Kafka"


#: SASL mechanisms Connect offers that connectd's clients (aiokafka) cannot use as configured:
#: each would be accepted and fail when the first client starts, so it is refused with why.
_UNSUPPORTED_SASL = {
    SaslMechanism.GSSAPI: "Kerberos needs the gssapi package and a Kerberos setup that connectd"
    " does not configure from sasl.kerberos.* or a JAAS keytab",
}


class KafkaSettings(BaseModel):
    """The Kafka client part of ``WorkerConfig`` (its first settings)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    bootstrap_servers: HostPorts = setting(
        ("127.0.0.1:9092",),
        key="bootstrap.servers",
        group=_KAFKA,
        description="Kafka brokers to bootstrap from.",
    )
    client_id: f.OptStr = setting(
        None,
        key="client.id",
        example="connect-1",
        group=_KAFKA,
        default_doc="connectd",
        description="Prefix of the Kafka client ids this worker uses.",
    )
    security_protocol: SecurityProtocolName = setting(
        SecurityProtocol.PLAINTEXT,
        key="security.protocol",
        group=_KAFKA,
        description="How the worker talks to the brokers.",
    )
    sasl_mechanism: SaslMechanismName = setting(
        SaslMechanism.PLAIN,
        key="sasl.mechanism",
        group=_KAFKA,
        description="SASL mechanism, with SASL_PLAINTEXT or SASL_SSL (Connect defaults to GSSAPI).",
    )
    sasl_jaas_config: SecretStr | None = setting(
        None,
        key="sasl.jaas.config",
        example=(
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="connect" password="${env:KAFKA_PASSWORD}";'
        ),
        group=_KAFKA,
        expected='a JAAS line with username="..." password="..."',
        description='Credentials, as a JAAS line: ... required username="u" password="p";',
    )
    sasl_login_callback_handler_class: f.OptStr = setting(
        None,
        key="sasl.login.callback.handler.class",
        example=OAUTH_LOGIN_HANDLER,
        group=_KAFKA,
        expected=f"{OAUTH_LOGIN_HANDLER} (or unset)",
        description="OAUTHBEARER's token source, by Kafka's class name: unset for Kafka's"
        " unsecured tokens (unsecuredLogin* options in sasl.jaas.config),"
        " OAuthBearerLoginCallbackHandler for tokens from sasl.oauthbearer.token.endpoint.url"
        " (client credentials). Other classes are refused: connectd runs no Java plug-ins.",
    )
    sasl_oauthbearer_token_endpoint_url: f.OptStr = setting(
        None,
        key="sasl.oauthbearer.token.endpoint.url",
        example="https://login.example.com/oauth2/token",
        group=_KAFKA,
        expected="an http, https or file URL",
        description="OAUTHBEARER: the OAuth 2 token endpoint asked with the client credentials"
        " grant, or a file: URL of a file that holds the token.",
    )
    sasl_oauthbearer_client_credentials_client_id: f.OptStr = setting(
        None,
        key="sasl.oauthbearer.client.credentials.client.id",
        group=_KAFKA,
        default_doc="the JAAS option clientId",
        description="OAUTHBEARER: the client id of the client credentials grant (Kafka 4.1).",
    )
    sasl_oauthbearer_client_credentials_client_secret: f.Password | None = setting(
        None,
        key="sasl.oauthbearer.client.credentials.client.secret",
        group=_KAFKA,
        default_doc="the JAAS option clientSecret",
        description="OAUTHBEARER: the client secret of the client credentials grant (Kafka 4.1).",
    )
    sasl_oauthbearer_scope: f.OptStr = setting(
        None,
        key="sasl.oauthbearer.scope",
        group=_KAFKA,
        default_doc="the JAAS option scope",
        description="OAUTHBEARER: the scope the token is asked for (Kafka 4.1).",
    )
    sasl_oauthbearer_sub_claim_name: f.Str = setting(
        "sub",
        key="sasl.oauthbearer.sub.claim.name",
        group=_KAFKA,
        description="OAUTHBEARER: the claim of a fetched token that names its principal.",
    )
    sasl_oauthbearer_scope_claim_name: f.Str = setting(
        "scope",
        key="sasl.oauthbearer.scope.claim.name",
        group=_KAFKA,
        description="OAUTHBEARER: the claim of a fetched token that holds its scope.",
    )
    sasl_oauthbearer_header_urlencode: f.Bool = setting(
        False,
        key="sasl.oauthbearer.header.urlencode",
        group=_KAFKA,
        description="OAUTHBEARER: URL-encode the client id and secret in the token request's"
        " Basic authorization header (RFC 6749 section 2.3.1).",
    )
    sasl_login_connect_timeout: f.Millis | None = setting(
        None,
        key="sasl.login.connect.timeout.ms",
        example=10000,
        group=_KAFKA,
        default_doc="none",
        description="OAUTHBEARER: how long connecting to the token endpoint may take.",
    )
    sasl_login_read_timeout: f.Millis | None = setting(
        None,
        key="sasl.login.read.timeout.ms",
        example=10000,
        group=_KAFKA,
        default_doc="none",
        description="OAUTHBEARER: how long the token endpoint's answer may take.",
    )
    sasl_login_retry_backoff: f.Millis = setting(
        timedelta(milliseconds=100),
        key="sasl.login.retry.backoff.ms",
        group=_KAFKA,
        description="OAUTHBEARER: the first pause before asking the token endpoint again (it"
        " doubles).",
    )
    sasl_login_retry_backoff_max: f.Millis = setting(
        timedelta(seconds=10),
        key="sasl.login.retry.backoff.max.ms",
        group=_KAFKA,
        description="OAUTHBEARER: how long the token endpoint is asked again in all, and the"
        " longest pause.",
    )
    sasl_login_refresh_window_factor: f.RefreshFactor = setting(
        0.8,
        key="sasl.login.refresh.window.factor",
        group=_KAFKA,
        description="OAUTHBEARER: a token is replaced at this fraction of its lifetime.",
    )
    sasl_login_refresh_window_jitter: f.RefreshJitter = setting(
        0.05,
        key="sasl.login.refresh.window.jitter",
        group=_KAFKA,
        description="OAUTHBEARER: up to this fraction of a token's lifetime is added at random"
        " to its replacement time.",
    )
    sasl_login_refresh_min_period_seconds: f.RefreshMinPeriod = setting(
        60,
        key="sasl.login.refresh.min.period.seconds",
        group=_KAFKA,
        description="OAUTHBEARER: the least time between two tokens, in seconds.",
    )
    sasl_login_refresh_buffer_seconds: f.RefreshBuffer = setting(
        300,
        key="sasl.login.refresh.buffer.seconds",
        group=_KAFKA,
        description="OAUTHBEARER: a token is replaced at least this many seconds before it"
        " expires (when its lifetime allows).",
    )
    ssl_truststore_location: f.FilePath | None = setting(
        None,
        key="ssl.truststore.location",
        example="/etc/connectd/ca.pem",
        group=_KAFKA,
        description="The CA certificates that sign the brokers' certificates (ssl.truststore.type"
        " says the format). Unset: the system's CAs.",
    )
    ssl_truststore_type: StoreType = setting(
        "JKS",
        key="ssl.truststore.type",
        group=_KAFKA,
        description="Trust store format: PEM, PKCS12 or JKS (read through the JDK's keytool)."
        " Unset: JKS as in Kafka, or PEM for a file of PEM text.",
    )
    ssl_truststore_password: f.Password | None = setting(
        None,
        key="ssl.truststore.password",
        example="${env:CONNECTD_TRUSTSTORE_PASSWORD}",
        group=_KAFKA,
        description="Password of a PKCS12 or JKS trust store (JKS needs one).",
    )
    ssl_keystore_location: f.FilePath | None = setting(
        None,
        key="ssl.keystore.location",
        example="/etc/connectd/client.p12",
        group=_KAFKA,
        description="The client's private key and certificate chain (mutual TLS), in the format"
        " ssl.keystore.type says.",
    )
    ssl_keystore_type: StoreType = setting(
        "JKS",
        key="ssl.keystore.type",
        group=_KAFKA,
        description="Key store format: PEM, PKCS12 or JKS (read through the JDK's keytool)."
        " Unset: JKS as in Kafka, or PEM for a file of PEM text.",
    )
    ssl_keystore_password: f.Password | None = setting(
        None,
        key="ssl.keystore.password",
        example="${env:CONNECTD_KEYSTORE_PASSWORD}",
        group=_KAFKA,
        description="Password of a PKCS12 or JKS key store.",
    )
    ssl_key_password: f.Password | None = setting(
        None,
        key="ssl.key.password",
        example="${env:CONNECTD_KEY_PASSWORD}",
        group=_KAFKA,
        description="Password of the private key: of a PEM key if encrypted, of a JKS key if it"
        " differs from ssl.keystore.password.",
    )
    ssl_endpoint_identification_algorithm: EndpointIdentification = setting(
        "https",
        key="ssl.endpoint.identification.algorithm",
        group=_KAFKA,
        description="https checks the broker's host name against its certificate.",
    )
    ssl_protocol: f.Str = setting(
        tlsprotocols.DEFAULT_PROTOCOL,
        key="ssl.protocol",
        group=_KAFKA,
        expected="TLSv1.3, TLSv1.2 or TLS",
        description="The newest TLS version the clients use: TLSv1.2 keeps TLSv1.3 off, as in"
        " Kafka.",
    )
    ssl_enabled_protocols: f.StrList = setting(
        tlsprotocols.DEFAULT_ENABLED,
        key="ssl.enabled.protocols",
        group=_KAFKA,
        expected="a list of TLSv1.2 and TLSv1.3",
        description="TLS versions the clients may use (TLSv1 and TLSv1.1 are left out with a"
        " warning: OpenSSL 3 disables them, as Java 17 does).",
    )
    ssl_cipher_suites: f.StrList = setting(
        (),
        key="ssl.cipher.suites",
        group=_KAFKA,
        example="TLS_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256,TLS_CHACHA20_POLY1305_SHA256,"
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        expected="IANA cipher suite names",
        default_doc="OpenSSL's defaults",
        description="Cipher suites by their IANA (Java) names. TLS 1.3's three suites go"
        " together or not at all (Python cannot narrow them); a list without any suite of a"
        " TLS version turns that version off.",
    )
    consumer: ConsumerSettings = setting(
        {},
        key="consumer.*",
        example={"max.poll.records": "500"},
        group=_KAFKA,
        description="Overrides for the task consumers: consumer.max.poll.records=500 etc.",
    )
    producer: ProducerSettings = setting(
        {},
        key="producer.*",
        example={"sasl.jaas.config": "..."},
        group=_KAFKA,
        description="The dead-letter queue's producer: its security settings (security.protocol,"
        " ssl.*, sasl.*) over the worker's; other producer keys are for source connectors"
        " (warned about, unused).",
    )
    admin: AdminSettings = setting(
        {},
        key="admin.*",
        example={"sasl.jaas.config": "..."},
        group=_KAFKA,
        description="The dead-letter queue's admin client (it creates the topic): its security"
        " settings (security.protocol, ssl.*, sasl.*) over the worker's; other admin keys are"
        " warned about, unused.",
    )

    def client_settings(self) -> dict[str, dict[str, str]]:
        """Each Kafka client's settings by their prefix (``consumer.``, ``producer.``,
        ``admin.``)."""
        return {"consumer.": self.consumer, "producer.": self.producer, "admin.": self.admin}

    def tls_stores(self) -> tuple[Store | None, Store | None]:
        """The key store and the trust store the Kafka clients use, as configured."""
        given = self.model_fields_set
        return (
            store(
                "ssl.keystore",
                self.ssl_keystore_location,
                self.ssl_keystore_type if "ssl_keystore_type" in given else None,
                self.ssl_keystore_password,
                self.ssl_key_password,
            ),
            store(
                "ssl.truststore",
                self.ssl_truststore_location,
                self.ssl_truststore_type if "ssl_truststore_type" in given else None,
                self.ssl_truststore_password,
                None,
            ),
        )

    def tls_protocols(self) -> TlsProtocols:
        """The TLS versions and suites the Kafka clients use (``TlsSettingError`` if none)."""
        return tlsprotocols.parse(
            "ssl", self.ssl_protocol, self.ssl_enabled_protocols, self.ssl_cipher_suites
        )

    def sasl_credentials(self) -> tuple[str, str] | None:
        """``(username, password)`` from ``sasl.jaas.config``, if it has both."""
        if self.sasl_jaas_config is None:
            return None
        options = jaas_options(self.sasl_jaas_config.get_secret_value())
        if "username" in options and "password" in options:
            return options["username"], options["password"]
        return None

    def oauth_settings(self) -> OAuthSettings:
        """The OAUTHBEARER token source's settings (``OAuthSettingError`` if wrong)."""
        return oauth_settings(self)

    def kafka_problems(self) -> list[Problem]:
        """Problems between the security settings."""
        problems: list[Problem] = []
        try:
            self.tls_protocols()
        except TlsSettingError as exc:
            problems.append(error(exc.key, exc.reason))
        sasl = self.security_protocol in (
            SecurityProtocol.SASL_PLAINTEXT,
            SecurityProtocol.SASL_SSL,
        )
        if sasl and self.sasl_mechanism in (
            SaslMechanism.PLAIN,
            SaslMechanism.SCRAM_SHA_256,
            SaslMechanism.SCRAM_SHA_512,
        ):
            if self.sasl_credentials() is None:
                problems.append(
                    error(
                        "sasl.jaas.config",
                        f"{self.sasl_mechanism} needs a username and password",
                        'a JAAS line with username="..." password="..."',
                    )
                )
        elif sasl and self.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            try:
                self.oauth_settings()
            except OAuthSettingError as exc:
                problems.append(error(exc.key, exc.reason))
        elif sasl and self.sasl_mechanism in _UNSUPPORTED_SASL:
            problems.append(
                error(
                    "sasl.mechanism",
                    f"{self.sasl_mechanism.value} is not supported by connectd's Kafka clients:"
                    f" {_UNSUPPORTED_SASL[self.sasl_mechanism]}",
                    "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                )
            )
        elif not sasl and self.sasl_jaas_config is not None:
            problems.append(
                warning(
                    "sasl.jaas.config", f"ignored: security.protocol is {self.security_protocol}"
                )
            )
        return problems


def store(
    prefix: str,
    location: Path | None,
    kind: str | None,
    password: SecretStr | None,
    key_password: SecretStr | None,
) -> Store | None:
    """A configured store (``prefix``: its settings' names), or None without a location;
    ``kind``: its ``*.type`` if set (``tlsstores.configured``)."""
    return configured(prefix, location, kind, secret(password), secret(key_password))
