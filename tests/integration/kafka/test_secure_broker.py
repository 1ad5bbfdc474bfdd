"""The worker's Kafka clients against a real broker with TLS and SASL, configured as a Kafka
Connect worker would be: key and trust stores made by keytool (JKS, PKCS12, PEM), SASL/PLAIN
and SCRAM over SASL_SSL, mutual TLS on an SSL listener that requires client certificates.

The broker (a second one, for this module) has a PLAINTEXT listener for the test's own
producer and admin, an SSL listener with ``ssl.client.auth=required`` and a SASL_SSL listener
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (SCRAM users added when its storage is formatted),
narrowed to TLSv1.2 and one cipher suite: the TLS versions and suites connectd's settings allow
are checked against Kafka's own TLS engine.
A connectd daemon (a subprocess, EchoSink) reads a topic through the secure listener; its
connector's consumer group reaching the end of the topic proves every fetch went through it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition
from support import procs
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.kafka import KafkaBroker, free_port, produce
from support.oidc import OidcProvider
from support.tls import STORE_PASS, TRUST_PASS, Stores, make_stores

from daemon.config.parse import parse_worker
from daemon.runtime.clients import security_settings
from daemon.tlsprotocols import TLS13_SUITES

pytestmark = pytest.mark.integration

USER, PASSWORD = "alice", "alice-secret"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
OAUTH_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
SCOPE = "kafka"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required"
    f' username="{USER}" password="{PASSWORD}";'
)
RECORDS = 200
NARROW_SUITE = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"  # the SASL_SSL listener's only suite


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return make_stores(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def oidc() -> Iterator[OidcProvider]:
    provider = OidcProvider()
    unregister = procs.register_session_owner(provider.pids)
    try:
        yield provider.start()
    finally:
        provider.stop()
        unregister()


@pytest.fixture(scope="module")
def secure_broker(stores: Stores, oidc: OidcProvider) -> Iterator[KafkaBroker]:
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    properties = {
        "ssl.keystore.type": "JKS",
        "ssl.keystore.location": str(stores.jks),
        "ssl.keystore.password": STORE_PASS,
        "ssl.key.password": STORE_PASS,
        "ssl.truststore.type": "JKS",
        "ssl.truststore.location": str(stores.trust_jks),
        "ssl.truststore.password": TRUST_PASS,
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        # OAUTHBEARER on SASL_SSL: Kafka's default, unsecured validator, requiring a scope.
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": (
            f'{OAUTH_MODULE} unsecuredLoginStringClaim_sub="broker"'
            f' unsecuredValidatorRequiredScope="{SCOPE}";'
        ),
        # OAUTHBEARER alone on SASL_PLAINTEXT: signed tokens of the OIDC provider, checked
        # against its keys (JWKS), issuer and audience.
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE};",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        "sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
        "sasl.oauthbearer.expected.issuer": oidc.issuer,
        "sasl.oauthbearer.expected.audience": SCOPE,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required"
            f' user_{USER}="{PASSWORD}";'
        ),
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
        # Kafka's own TLS engine narrowed on one listener: what connectd's ssl.protocol,
        # ssl.enabled.protocols and ssl.cipher.suites allow is checked against it.
        "listener.name.sasl_ssl.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.sasl_ssl.ssl.cipher.suites": NARROW_SUITE,
    }
    format_args = [
        arg
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        for arg in ("--add-scram", f"{mechanism}=[name={USER},password={PASSWORD}]")
    ]
    broker = KafkaBroker(
        listeners=("SSL", "SASL_SSL", "SASL_PLAINTEXT"),
        properties=properties,
        format_args=format_args,
        # Kafka 4 reaches only the URLs this allows (CVE-2025-27817).
        jvm_options=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={oidc.jwks_url}"],
    )
    unregister = procs.register_session_owner(broker.pids)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        unregister()


async def _topic_with_records(broker: KafkaBroker, name: str) -> str:
    await produce(broker.bootstrap, name, [(None, b"r%d" % i) for i in range(RECORDS)])
    return name


async def _group_offset(broker: KafkaBroker, group: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    except KafkaError as exc:
        if exc.retriable:  # the offsets topic still being created
            return -1
        raise
    finally:
        await admin.close()
    meta = offsets.get(TopicPartition(topic, 0))
    return meta.offset if meta is not None else -1


async def _reads_everything(
    broker: KafkaBroker,
    daemon_process: ProcessFactory,
    tmp_path: Path,
    name: str,
    security: dict[str, str],
) -> None:
    topic = await _topic_with_records(broker, f"secure-{name}")
    listener = security["security.protocol"]
    worker = worker_properties(
        f"127.0.0.1:{broker.listener_ports[listener]}", tmp_path / "state", **security
    )
    sink = {"name": name, "connector.class": "EchoSink", "topics": topic}
    p = daemon_process(worker, [sink])

    async def caught_up() -> bool:
        return await _group_offset(broker, f"connect-{name}", topic) == RECORDS

    try:
        await wait_until(caught_up, 60, f"{name}: the group at offset {RECORDS}", interval=0.5)
    except AssertionError:
        print(p.log()[-6000:])
        raise
    assert "Traceback" not in p.log()


async def test_sasl_ssl_with_scram_and_a_jks_trust_store(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    """A stock Connect worker file: JKS (Kafka's default type, left unset) and SCRAM-SHA-512."""
    await _reads_everything(
        secure_broker,
        daemon_process,
        tmp_path,
        "scram",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required"
                f' username="{USER}" password="{PASSWORD}";'
            ),
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
        },
    )


async def test_sasl_ssl_with_plain_and_a_pkcs12_trust_store(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    await _reads_everything(
        secure_broker,
        daemon_process,
        tmp_path,
        "plain",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(stores.trust_pkcs12),
            "ssl.truststore.password": TRUST_PASS,
        },
    )


async def test_sasl_ssl_with_oauthbearer_unsecured_tokens_that_carry_the_required_scope(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    """Kafka's default OAUTHBEARER login (unsigned tokens from the JAAS options) against the
    broker's default validator, which requires the scope ``kafka``."""
    await _reads_everything(
        secure_broker,
        daemon_process,
        tmp_path,
        "oauth-unsecured",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": (
                f'{OAUTH_MODULE} unsecuredLoginStringClaim_sub="{USER}"'
                f' unsecuredLoginListClaim_scope=",{SCOPE},other";'
            ),
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
        },
    )


async def test_sasl_plaintext_with_oauthbearer_tokens_from_an_oidc_provider(
    secure_broker: KafkaBroker, oidc: OidcProvider, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    """The client credentials grant against a real OIDC provider; the broker checks each
    token's signature against the provider's keys, its issuer and its audience."""
    await _reads_everything(
        secure_broker,
        daemon_process,
        tmp_path,
        "oauth-oidc",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": OAUTH_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
            "sasl.jaas.config": (
                f'{OAUTH_MODULE} clientId="connect-worker" clientSecret="s3cret" scope="{SCOPE}";'
            ),
        },
    )


def _plain_worker(broker: KafkaBroker, stores: Stores, tmp_path: Path) -> dict[str, str]:
    """A worker whose own clients log in with PLAIN on the SASL_SSL listener."""
    return worker_properties(
        f"127.0.0.1:{broker.listener_ports['SASL_SSL']}",
        tmp_path / "state",
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
        },
    )


async def test_each_connector_reads_with_its_own_consumer_override_credentials(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    """Connect's consumer.override.sasl.* (what the Principal policy exists for): the worker's
    own clients log in with PLAIN, one connector's consumers with an OAUTHBEARER token that has
    the scope the broker requires, another's with one that lacks it. The first reads the whole
    topic, the second nothing: each task consumer used its connector's settings."""
    topic = await _topic_with_records(secure_broker, "secure-overrides")
    worker = _plain_worker(secure_broker, stores, tmp_path)

    def sink(name: str, scope: str) -> dict[str, str]:
        jaas = f'{OAUTH_MODULE} unsecuredLoginStringClaim_sub="{name}"'
        jaas += f' unsecuredLoginListClaim_scope=",{scope}";'
        return {
            "name": name,
            "connector.class": "EchoSink",
            "topics": topic,
            "consumer.override.sasl.mechanism": "OAUTHBEARER",
            "consumer.override.sasl.jaas.config": jaas,
        }

    p = daemon_process(worker, [sink("tenant-ok", SCOPE), sink("tenant-denied", "other")])

    async def offsets() -> tuple[int, int]:
        return (
            await _group_offset(secure_broker, "connect-tenant-ok", topic),
            await _group_offset(secure_broker, "connect-tenant-denied", topic),
        )

    async def ok_caught_up() -> bool:
        return (await offsets())[0] == RECORDS

    await wait_until(ok_caught_up, 60, "tenant-ok's group at the end", interval=0.5)
    assert (await offsets())[1] == -1, p.log()[-4000:]
    log = p.log_path.read_text(errors="replace")
    refused = [line for line in log.splitlines() if "refused the OAUTHBEARER token" in line]
    assert refused and all("[tenant-denied|" in line for line in refused), log[-4000:]
    assert "insufficient_scope" in refused[0], log[-4000:]
    assert "Did we not perform bootstrap" not in log


async def _end_offset(broker: KafkaBroker, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
    await consumer.start()
    try:
        if topic not in await consumer.topics():
            return -1
        tp = TopicPartition(topic, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


async def test_each_connectors_dead_letters_go_with_its_own_producer_and_admin_credentials(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    """Connect's producer.override.* and admin.override.* for a sink: its dead-letter queue's
    producer and admin client. The worker and the task consumers log in with PLAIN; one
    connector's dead-letter clients with OAUTHBEARER tokens that have the broker's scope,
    another's producer, a third one's admin client with one that lacks it. The first writes a
    dead letter for each record (none is JSON); the second's producer and the third's admin
    client are refused, and only theirs: the third's topic is never created."""
    topic = await _topic_with_records(secure_broker, "secure-dead-letters")
    worker = _plain_worker(secure_broker, stores, tmp_path)

    def sink(name: str, producer: str, admin: str) -> dict[str, str]:
        def token(who: str, scope: str) -> str:
            return (
                f'{OAUTH_MODULE} unsecuredLoginStringClaim_sub="{who}"'
                f' unsecuredLoginListClaim_scope=",{scope}";'
            )

        return {
            "name": name,
            "connector.class": "EchoSink",
            "topics": topic,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": f"{name}-dlq",
            "errors.deadletterqueue.topic.replication.factor": "1",
            "producer.override.sasl.mechanism": "OAUTHBEARER",
            "producer.override.sasl.jaas.config": token(f"{name}-producer", producer),
            "admin.override.sasl.mechanism": "OAUTHBEARER",
            "admin.override.sasl.jaas.config": token(f"{name}-admin", admin),
        }

    sinks = [
        sink("letters-ok", SCOPE, SCOPE),
        sink("letters-denied", "other", SCOPE),
        sink("letters-no-admin", SCOPE, "other"),
    ]
    p = daemon_process(worker, sinks)

    async def dead_letters() -> int:
        return await _end_offset(secure_broker, "letters-ok-dlq")

    def refusals() -> list[str]:
        log = p.log_path.read_text(errors="replace").splitlines()
        return [line for line in log if "refused the OAUTHBEARER token" in line]

    async def all_dead() -> bool:
        return await dead_letters() == RECORDS

    try:
        await wait_until(all_dead, 90, "a dead letter for each record", interval=0.5)
        for name in ("letters-denied", "letters-no-admin"):
            await wait_until(
                lambda name=name: f"[{name}|" in "\n".join(refusals()),
                60,
                f"{name}'s client refused",
                interval=0.5,
            )
    except AssertionError:
        print(p.log()[-6000:])
        raise
    refused = refusals()
    assert not [line for line in refused if "[letters-ok|" in line], refused
    assert "insufficient_scope" in refused[0], refused[0]
    # The denied producer's admin client (its own, good token) created its topic; the producer
    # wrote nothing. The refused admin client created none.
    assert await _end_offset(secure_broker, "letters-denied-dlq") == 0
    assert await _end_offset(secure_broker, "letters-no-admin-dlq") == -1


async def test_an_unreachable_token_endpoint_is_named_when_the_daemon_cannot_start(
    secure_broker: KafkaBroker, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/token"
    worker = worker_properties(
        f"127.0.0.1:{secure_broker.listener_ports['SASL_PLAINTEXT']}",
        tmp_path / "state",
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": OAUTH_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.login.retry.backoff.max.ms": "500",
            "sasl.jaas.config": f'{OAUTH_MODULE} clientId="c" clientSecret="s";',
            "startup.kafka.timeout.ms": "5000",
        },
    )
    p = daemon_process(worker, [], wait=False)
    code = await asyncio.to_thread(p.wait, 90.0)
    log = p.log()
    assert code == 69, log
    assert f"token endpoint {url} could not be reached" in log, log[-3000:]


async def _login(broker: KafkaBroker, listener: str, worker: dict[str, str]) -> Exception | None:
    """What stopped an admin client with ``worker``'s security settings from getting an answer
    through ``listener``, or None if it got one."""
    config, _ = parse_worker(
        {"bootstrap.servers": f"127.0.0.1:{broker.listener_ports[listener]}", **worker}
    )
    admin = AIOKafkaAdminClient(
        **security_settings(config),
        bootstrap_servers=list(config.bootstrap_servers),
        request_timeout_ms=10_000,
    )
    try:  # a request answered, not only a started client
        await asyncio.wait_for(admin.start(), 30)
        await asyncio.wait_for(admin.list_topics(), 30)
    except (KafkaError, TimeoutError) as exc:
        return exc
    else:
        return None
    finally:
        await admin.close()


async def _verdict(
    broker: KafkaBroker, listener: str, worker: dict[str, str], allowed: bool
) -> None:
    """``worker``'s settings get through ``listener`` (tried again for a while: a slow first
    token under load is no refusal), or are refused."""
    if not allowed:
        assert await _login(broker, listener, worker) is not None, worker
        return

    async def passes() -> bool:
        return await _login(broker, listener, worker) is None

    await wait_until(passes, 60, f"an answer through {listener} for {worker}", interval=1.0)


async def test_the_broker_refuses_oauthbearer_tokens_without_its_scope_or_audience(
    secure_broker: KafkaBroker, stores: Stores, oidc: OidcProvider
) -> None:
    """The checks the broker makes are real: a token short of them is refused, so the two
    tests above prove connectd's tokens carry what they must."""
    trust = {
        "ssl.truststore.location": str(stores.trust_jks),
        "ssl.truststore.password": TRUST_PASS,
    }
    unsecured = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", **trust}
    for scope, allowed in (("other", False), (SCOPE, True)):
        jaas = f'{OAUTH_MODULE} unsecuredLoginStringClaim_sub="u"'
        jaas += f' unsecuredLoginListClaim_scope=",{scope}";'
        worker = {**unsecured, "sasl.jaas.config": jaas}
        await _verdict(secure_broker, "SASL_SSL", worker, allowed)
    signed = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": OAUTH_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": oidc.token_url,
    }
    for scope, allowed in (("other", False), (SCOPE, True)):
        jaas = f'{OAUTH_MODULE} clientId="c{scope}" clientSecret="s" scope="{scope}";'
        worker = {**signed, "sasl.jaas.config": jaas}
        await _verdict(secure_broker, "SASL_PLAINTEXT", worker, allowed)


async def test_mutual_tls_with_a_jks_key_store(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    """The SSL listener requires a client certificate: the worker presents its JKS key store's."""
    await _reads_everything(
        secure_broker,
        daemon_process,
        tmp_path,
        "mtls",
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "JKS",
            "ssl.keystore.location": str(stores.jks),
            "ssl.keystore.password": STORE_PASS,
            "ssl.key.password": STORE_PASS,
            "ssl.truststore.type": "JKS",
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
        },
    )


async def test_a_wrong_key_store_password_is_exit_78_naming_it(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    worker = worker_properties(
        f"127.0.0.1:{secure_broker.listener_ports['SSL']}",
        tmp_path / "state",
        **{
            "security.protocol": "SSL",
            "ssl.keystore.location": str(stores.jks),
            "ssl.keystore.password": "wrong",
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
        },
    )
    p = daemon_process(worker, [], wait=False)
    code = await asyncio.to_thread(p.wait, 60.0)
    log = p.log()
    assert code == 78, log
    assert f"ssl.keystore.location: {stores.jks} cannot be read as JKS" in log
    assert "check ssl.keystore.password" in log
    assert "Traceback" not in log


# -- ssl.protocol, ssl.enabled.protocols, ssl.cipher.suites against Kafka's TLS engine ------


def _handshake(port: int, ctx: ssl.SSLContext) -> tuple[str | None, str | None]:
    """``(version, OpenSSL suite name)`` of a TLS handshake with the broker's listener."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
        ctx.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        cipher = tls.cipher()
        return tls.version(), cipher[0] if cipher else None


def _client_context(stores: Stores, worker: dict[str, str]) -> ssl.SSLContext:
    """The context connectd's Kafka clients get from a worker file with ``worker``'s keys."""
    config, _ = parse_worker(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SSL",
            "ssl.keystore.location": str(stores.pkcs12),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": STORE_PASS,
            "ssl.truststore.location": str(stores.trust_pkcs12),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": TRUST_PASS,
            **worker,
        }
    )
    return security_settings(config)["ssl_context"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("worker", "version", "suite"),
    [
        ({}, "TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"),  # Kafka's defaults downgrade to 1.2
        ({"ssl.cipher.suites": NARROW_SUITE}, "TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256"),
        ({"ssl.enabled.protocols": "TLSv1.3"}, None, None),
        ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, None, None),
        ({"ssl.cipher.suites": ",".join(sorted(TLS13_SUITES))}, None, None),
    ],
    ids=["defaults", "its-suite", "tls13-only", "another-suite", "tls13-suites-only"],
)
async def test_versions_and_suites_as_kafkas_own_engine_negotiates_them(
    secure_broker: KafkaBroker,
    stores: Stores,
    worker: dict[str, str],
    version: str | None,
    suite: str | None,
) -> None:
    """The SASL_SSL listener takes TLSv1.2 with one suite only (a TLS handshake needs no SASL
    yet): connectd's client gets that or no connection, as a Java client would."""
    ctx = _client_context(stores, worker)
    port = secure_broker.listener_ports["SASL_SSL"]
    if version is None:
        with pytest.raises(ssl.SSLError):
            await asyncio.to_thread(_handshake, port, ctx)
    else:
        assert await asyncio.to_thread(_handshake, port, ctx) == (version, suite)


@pytest.mark.parametrize(
    ("worker", "version"),
    [({}, "TLSv1.3"), ({"ssl.protocol": "TLSv1.2"}, "TLSv1.2")],
    ids=["defaults", "protocol-TLSv1.2"],
)
async def test_ssl_protocol_caps_the_version_on_an_open_listener(
    secure_broker: KafkaBroker, stores: Stores, worker: dict[str, str], version: str
) -> None:
    """The SSL listener takes Kafka's defaults: TLSv1.3 unless ssl.protocol=TLSv1.2 caps it."""
    ctx = _client_context(stores, worker)
    got, _ = await asyncio.to_thread(_handshake, secure_broker.listener_ports["SSL"], ctx)
    assert got == version


async def test_a_daemon_with_the_listeners_one_suite_reads_everything(
    secure_broker: KafkaBroker, stores: Stores, daemon_process: ProcessFactory, tmp_path: Path
) -> None:
    await _reads_everything(
        secure_broker,
        daemon_process,
        tmp_path,
        "narrow",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": PLAIN_JAAS,
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
            "ssl.protocol": "TLSv1.2",
            "ssl.enabled.protocols": "TLSv1.2,TLSv1.1",  # TLSv1.1 left out with a warning
            "ssl.cipher.suites": f"{NARROW_SUITE},TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        },
    )
