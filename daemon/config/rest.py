"""Settings of the worker's REST API: limits, authentication, HTTPS and topic tracking."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo

from daemon import tlsprotocols
from daemon.config import fields as f
from daemon.config.fields import setting
from daemon.config.httpheaders import Cors, HttpSettingError, parse_header_rules
from daemon.config.problems import Problem, error, warning
from daemon.config.values import AdminListeners, StoreType

_REST = "REST API"
ClientAuth = Literal["none", "requested", "required"]
LOOPBACK = "127.0.0.1"
"""Where the REST API listens unless ``listeners`` (or ``rest.host.name``) names a host."""


class RestApiSettings(BaseModel):
    """The REST part of ``WorkerConfig`` (connectd's limits and auth; Connect's HTTPS keys)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    rest_request_max_bytes: f.PositiveInt = setting(
        1 << 20,
        key="rest.request.max.bytes",
        group=_REST,
        description="Largest request body accepted (connectd); larger bodies get 413.",
    )
    rest_request_timeout: f.Millis = setting(
        timedelta(milliseconds=90_000),
        key="rest.request.timeout.ms",
        group=_REST,
        description="Deadline for one request's work in the worker (connectd); then 500.",
    )
    rest_auth_basic_credentials_file: f.FilePath | None = setting(
        None,
        key="rest.auth.basic.credentials.file",
        example="/etc/connectd/rest.passwd",
        group=_REST,
        description=(
            "HTTP basic authentication (connectd): a file of 'user:salted-hash' lines made with "
            "`connectd passwd FILE USER`; /health stays open."
        ),
    )
    rest_front_process: f.Bool = setting(
        True,
        key="rest.front.process",
        group=_REST,
        description=(
            "Serve the listeners from a child process (connectd) that answers status requests "
            "from a copy of the worker's states refreshed every 100 ms and after every change "
            "made through it, and passes every other request on: status stays fast while the "
            "worker's loop is busy. false: serve from the worker's own loop."
        ),
    )
    access_control_allow_origin: f.Str = setting(
        "",
        key="access.control.allow.origin",
        example="https://.*\\.example\\.com",
        group=_REST,
        expected="comma-separated origin patterns (regular expressions), or *",
        description="Origins whose browsers may call the API (CORS), as Connect's Jetty reads"
        " them: each a regular expression for the whole origin, * for any. Empty: no CORS.",
    )
    access_control_allow_methods: f.Str = setting(
        "",
        key="access.control.allow.methods",
        example="GET,POST,PUT,DELETE",
        group=_REST,
        default_doc="GET,POST,HEAD",
        description="Methods a CORS preflight allows (with access.control.allow.origin).",
    )
    response_http_headers_config: f.Str = setting(
        "",
        key="response.http.headers.config",
        example="add X-Frame-Options: DENY, set Cache-Control: no-store",
        group=_REST,
        expected="comma-separated rules '[set|add|setDate|addDate] [header name]:[header value]'",
        description="Headers added to every REST response, Connect's rules.",
    )
    admin_listeners: AdminListeners = setting(
        None,
        key="admin.listeners",
        example="http://127.0.0.1:8084",
        group=_REST,
        default_doc="unset: /admin on the main listeners",
        description="Where /admin/loggers is served, as in Connect: unset, on the main"
        " listeners; empty, nowhere (404); URLs, only there (the main listeners answer 404"
        " for /admin, and these nothing else; no CORS or configured headers on them). An"
        " https:// one takes the TLS settings of the main HTTPS listeners.",
    )
    topic_tracking_enable: f.Bool = setting(
        True,
        key="topic.tracking.enable",
        group=_REST,
        description="Track the topics each connector uses (GET /connectors/{name}/topics).",
    )
    topic_tracking_allow_reset: f.Bool = setting(
        True,
        key="topic.tracking.allow.reset",
        group=_REST,
        description="Allow PUT /connectors/{name}/topics/reset.",
    )
    listeners_https_ssl_keystore_type: StoreType = setting(
        "JKS",
        key="listeners.https.ssl.keystore.type",
        group=_REST,
        description="Format of the HTTPS key store: PEM, PKCS12 or JKS. Unset: JKS as in"
        " Connect, or PEM for a file of PEM text.",
    )
    listeners_https_ssl_keystore_location: f.FilePath | None = setting(
        None,
        key="listeners.https.ssl.keystore.location",
        example="/etc/connectd/rest.p12",
        group=_REST,
        description="For https:// listeners: the private key and certificate chain.",
    )
    listeners_https_ssl_keystore_password: f.Password | None = setting(
        None,
        key="listeners.https.ssl.keystore.password",
        group=_REST,
        description="Password of a PKCS12 or JKS HTTPS key store.",
    )
    listeners_https_ssl_key_password: f.Password | None = setting(
        None,
        key="listeners.https.ssl.key.password",
        group=_REST,
        description="Password of the HTTPS private key: of a PEM key if encrypted, of a JKS key"
        " if it differs from the store's.",
    )
    listeners_https_ssl_truststore_type: StoreType = setting(
        "JKS",
        key="listeners.https.ssl.truststore.type",
        group=_REST,
        description="Format of the HTTPS trust store: PEM, PKCS12 or JKS. Unset: JKS as in"
        " Connect, or PEM for a file of PEM text.",
    )
    listeners_https_ssl_truststore_location: f.FilePath | None = setting(
        None,
        key="listeners.https.ssl.truststore.location",
        example="/etc/connectd/clients-ca.p12",
        group=_REST,
        description="The CAs that sign client certificates (with client.auth).",
    )
    listeners_https_ssl_truststore_password: f.Password | None = setting(
        None,
        key="listeners.https.ssl.truststore.password",
        group=_REST,
        description="Password of a PKCS12 or JKS HTTPS trust store (JKS needs one).",
    )
    listeners_https_ssl_client_auth: ClientAuth = setting(
        "none",
        key="listeners.https.ssl.client.auth",
        expected="none, requested or required",
        group=_REST,
        description="Whether HTTPS clients must present a certificate: none, requested, required.",
    )
    listeners_https_ssl_protocol: f.Str = setting(
        tlsprotocols.DEFAULT_PROTOCOL,
        key="listeners.https.ssl.protocol",
        group=_REST,
        expected="TLSv1.3, TLSv1.2 or TLS",
        description="The HTTPS listeners' TLS protocol as Connect names it; on a server it caps"
        " nothing (listeners.https.ssl.enabled.protocols does).",
    )
    listeners_https_ssl_enabled_protocols: f.StrList = setting(
        tlsprotocols.DEFAULT_ENABLED,
        key="listeners.https.ssl.enabled.protocols",
        group=_REST,
        expected="a list of TLSv1.2 and TLSv1.3",
        description="TLS versions the HTTPS listeners accept.",
    )
    listeners_https_ssl_cipher_suites: f.StrList = setting(
        (),
        key="listeners.https.ssl.cipher.suites",
        group=_REST,
        expected="IANA cipher suite names",
        default_doc="OpenSSL's defaults",
        description="Cipher suites the HTTPS listeners accept, by IANA (Java) name; the rules"
        " of ssl.cipher.suites.",
    )
    ssl_client_auth: ClientAuth = setting(
        "none",
        key="ssl.client.auth",
        expected="none, requested or required",
        group=_REST,
        description="listeners.https.ssl.client.auth when no listeners.https.* setting is given:"
        " then, as in Connect, the HTTPS listeners take the worker's ssl.* settings.",
    )


def map_deprecated_rest(data: Any, info: ValidationInfo) -> Any:
    """``WorkerConfig``'s input with Connect's deprecated ``rest.host.name``/``rest.port``
    mapped to ``listeners`` (unless ``listeners`` is set), warning about each key used.

    Without ``rest.host.name`` the listener is the loopback address, as connectd's default
    ``listeners`` is (Connect would listen on every interface): a worker file from Connect does
    not open the REST API to the network unnoticed. The warning says how to do that on purpose.
    """
    if not isinstance(data, dict):
        return data

    def given(name: str, key: str) -> Any:
        return data.get(key, data.get(name))

    host, port = given("rest_host_name", "rest.host.name"), given("rest_port", "rest.port")
    if host is None and port is None:
        return data
    try:
        port_number = int(str(port).strip()) if port is not None else 8083
    except ValueError:
        return data  # rest.port's own validation reports it
    named = str(host or "").strip()
    listener = f"http://{named or LOOPBACK}:{port_number}"
    listeners_given = given("listeners", "listeners") is not None
    if listeners_given:
        outcome = "ignored: listeners is set"
    elif named:
        outcome = f"mapped to listeners={listener}; set listeners instead"
    else:
        outcome = (
            f"mapped to listeners={listener} (loopback only, as connectd's default; Connect"
            f" would listen on every interface): set listeners=http://0.0.0.0:{port_number}"
            " to listen on every interface"
        )
    for key, value in (("rest.host.name", host), ("rest.port", port)):
        if value is not None:
            f.report(info, warning(key, f"deprecated (removed in Kafka 4.0); {outcome}"))
    if listeners_given:
        return data
    return {**data, "listeners": listener}


def rest_problems(config: RestApiSettings) -> list[Problem]:
    """Problems of the CORS and response-header settings."""
    problems: list[Problem] = []
    try:
        Cors.parse(config.access_control_allow_origin, config.access_control_allow_methods)
        parse_header_rules(config.response_http_headers_config)
    except HttpSettingError as exc:
        problems.append(error(exc.key, exc.reason))
    return problems
