"""How a Kafka client of the worker connects: its aiokafka arguments (brokers, client id,
security), from the worker's settings with a client's own security settings applied as Connect
applies them (``consumer.*``/``consumer.override.*``, ``producer.*``..., ``admin.*``...), and the
OAUTHBEARER token source every client with the same settings shares."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from daemon.config import ConnectorConfig, WorkerConfig
from daemon.config.clients import KafkaClient
from daemon.config.oauth import OAuthSettings, jaas_tls_protocols
from daemon.config.parse import security_overrides
from daemon.config.values import SaslMechanism
from daemon.errors import ConfigError
from daemon.kafka.oauthbearer import TokenSource

log = logging.getLogger("connectd.consumer")

_STORE_FIELDS = {
    "ssl_keystore": ("ssl_keystore_type", "ssl_keystore_password", "ssl_key_password"),
    "ssl_truststore": ("ssl_truststore_type", "ssl_truststore_password"),
}


def client_security(
    worker: WorkerConfig, connector: ConnectorConfig, client: KafkaClient, what: str
) -> WorkerConfig:
    """The worker's settings with the security settings (``security.protocol``, ``ssl.*``,
    ``sasl.*``) of the worker's ``<client>.*`` and then the connector's ``<client>.override.*``
    applied, as Connect applies them to that client. ``ConfigError`` names a value that is
    wrong once resolved, or settings that do not fit together (``what``: whose they are)."""
    update: dict[str, object] = {}
    problems = []
    for prefix, settings in (
        (f"{client}.", worker.client_settings()[f"{client}."]),
        (f"{client}.override.", connector.client_overrides()[f"{client}.override."]),
    ):
        fields, found = security_overrides(prefix, settings)
        update.update(fields)
        problems += found
    if not update and not problems:
        return worker
    # A store of the client's own takes none of the worker's store's type or passwords.
    unset = [
        name
        for store, own in _STORE_FIELDS.items()
        if f"{store}_location" in update
        for name in own
        if name not in update
    ]
    defaults = {name: type(worker).model_fields[name].default for name in unset}
    effective = worker.model_copy(update={**update, **defaults})
    effective.model_fields_set.difference_update(unset)  # as if never given
    problems += effective.kafka_problems()
    errors = [str(p) for p in problems if p.is_error]
    if errors:
        raise ConfigError(f"{what}'s security settings: {'; '.join(errors)}")
    return effective


def client_settings(worker: WorkerConfig, purpose: str) -> dict[str, Any]:
    """A side client's arguments (admin, dead-letter producer, offsets reader): the worker's
    brokers and security, ``client_id`` ``<client.id or connectd>-<purpose>``."""
    return {
        "bootstrap_servers": list(worker.bootstrap_servers),
        "client_id": f"{worker.client_id or 'connectd'}-{purpose}",
        **security_settings(worker),
    }


def security_settings(worker: WorkerConfig) -> dict[str, Any]:
    """aiokafka's security arguments from the worker's settings (shared by every client)."""
    out: dict[str, Any] = {"security_protocol": worker.security_protocol.value}
    if worker.security_protocol.value in ("SASL_PLAINTEXT", "SASL_SSL"):
        out["sasl_mechanism"] = worker.sasl_mechanism.value
        if worker.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            out["sasl_oauth_token_provider"] = token_source(worker)
        elif (credentials := worker.sasl_credentials()) is not None:
            out["sasl_plain_username"], out["sasl_plain_password"] = credentials
    if worker.security_protocol.value in ("SSL", "SASL_SSL"):
        from daemon.tlsstores import client_context

        keystore, truststore = worker.tls_stores()
        check_hostname = worker.ssl_endpoint_identification_algorithm != ""
        # Built once per process for the same stores (a JKS store costs a keytool run): the
        # daemon builds it at start, off the event loop (``Daemon._wait_for_kafka``).
        out["ssl_context"] = client_context(
            keystore, truststore, check_hostname, worker.tls_protocols()
        )
    return out


#: One token source per process for the same OAUTHBEARER settings: every client with those
#: shares it.
_TOKEN_SOURCES: dict[OAuthSettings, TokenSource] = {}


def token_source(worker: WorkerConfig) -> TokenSource:
    """The OAUTHBEARER token source of the worker's settings, shared by its clients. A token
    endpoint on https is checked, as Kafka's client checks it, against the TLS options of the
    JAAS line (``ssl.truststore.*``, ``ssl.keystore.*``, ``ssl.key.password``,
    ``ssl.endpoint.identification.algorithm``), the system's CAs without a trust store there;
    never against the worker's own ``ssl.*`` settings, which are the brokers'."""
    settings = worker.oauth_settings()
    found = _TOKEN_SOURCES.get(settings)
    if found is None:
        endpoint = settings.endpoint
        if endpoint is not None and endpoint.url.lower().startswith("https:"):
            tls = dict(endpoint.tls)
            if "ssl.truststore.location" not in tls and worker.ssl_truststore_location:
                log.warning(
                    "The token endpoint %s is checked against the system's CAs, as Kafka's"
                    " client checks it: ssl.truststore.location is the brokers' trust store."
                    " If the endpoint's certificate is signed by another CA, give its trust"
                    ' store in sasl.jaas.config (ssl.truststore.location="...")',
                    endpoint.url,
                )
            endpoint = replace(endpoint, ssl_context=_endpoint_context(tls))
        found = TokenSource(
            dict(settings.jaas),
            endpoint=endpoint,
            principal_claim=settings.principal_claim,
            scope_claim=settings.scope_claim,
            refresh=settings.refresh,
        )
        _TOKEN_SOURCES[settings] = found
    return found


def _endpoint_context(tls: Mapping[str, str]) -> Any:
    """The https token endpoint's ``SSLContext`` from the JAAS line's TLS options (a store
    that is wrong raises ``StoreError`` naming the option)."""
    from daemon.tlsstores import client_context, configured

    def store(name: str, key_password: str | None) -> Any:
        location, kind = tls.get(f"ssl.{name}.location"), tls.get(f"ssl.{name}.type")
        return configured(
            f"sasl.jaas.config ssl.{name}",
            Path(location) if location else None,
            kind.upper() if kind else None,
            tls.get(f"ssl.{name}.password"),
            key_password,
        )

    check_hostname = tls.get("ssl.endpoint.identification.algorithm", "https") != ""
    keystore = store("keystore", tls.get("ssl.key.password"))
    protocols = jaas_tls_protocols(tls)
    return client_context(keystore, store("truststore", None), check_hostname, protocols)
