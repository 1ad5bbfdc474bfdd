"""``RestServer``: listeners (several, port 0, https from PEM files), bind failures, close."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import aiohttp
import pytest
from support.fake_worker import Client, FakeWorker, local_settings, serve
from support.tls import STORE_PASS, TRUST_PASS, Stores, make_stores

from daemon.config import Listener, WorkerConfig
from daemon.errors import ConfigError
from daemon.rest import RestServer, RestSettings, TlsSettings, create_app


def _listener(scheme: str = "http", port: int = 0, host: str = "127.0.0.1") -> Listener:
    return Listener(scheme=scheme, host=host, port=port)  # type: ignore[arg-type]


def test_defaults_are_safe() -> None:
    settings = RestSettings()
    assert settings.listeners == (_listener(port=8083),)
    assert settings.max_body_bytes == 1 << 20
    assert settings.credentials_file is None and settings.tls is None
    assert RestSettings.from_worker_config(WorkerConfig()).listeners == settings.listeners


async def test_port_zero_is_reported_and_reachable() -> None:
    async with serve(FakeWorker()) as server:
        (bound,) = server.bound
        assert bound.port > 0
        assert server.url == f"http://127.0.0.1:{bound.port}"
        async with aiohttp.ClientSession() as session, session.get(server.url + "/") as answer:
            assert answer.status == 200


async def test_several_listeners_serve_the_same_app() -> None:
    settings = local_settings(listeners=(_listener(), _listener()))
    async with serve(FakeWorker(), settings) as server:
        urls = [b.url for b in server.bound]
        assert len(set(urls)) == 2
        async with aiohttp.ClientSession() as session:
            await Client(session).call("POST", urls[0] + "/connectors", json={
                "name": "c", "config": {"connector.class": "HangSink", "topics": "t"},
            })  # fmt: skip
            answer = await Client(session).get(urls[1] + "/connectors")
            assert answer.json == ["c"]


async def test_https_listener_from_pem_files(pem: tuple[Path, Path]) -> None:
    keystore, ca = pem
    settings = local_settings(
        listeners=(_listener("https"), _listener("http")), tls=TlsSettings(keystore)
    )
    async with serve(FakeWorker(), settings) as server:
        https, http = server.bound
        assert https.url.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cafile=str(ca))
        async with aiohttp.ClientSession() as session:
            async with session.get(https.url + "/health", ssl=trust) as answer:
                assert answer.status == 200
            async with session.get(http.url + "/health") as answer:
                assert answer.status == 200
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(https.url + "/health", ssl=ssl.create_default_context())


async def test_https_client_certificates_required(pem: tuple[Path, Path]) -> None:
    keystore, ca = pem
    tls = TlsSettings(keystore, truststore_location=ca, client_auth="required")
    settings = local_settings(listeners=(_listener("https"),), tls=tls)
    async with serve(FakeWorker(), settings) as server:
        with_cert = ssl.create_default_context(cafile=str(ca))
        with_cert.load_cert_chain(keystore)
        without = ssl.create_default_context(cafile=str(ca))
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url + "/health", ssl=with_cert) as answer:
                assert answer.status == 200
            with pytest.raises(aiohttp.ClientError):
                async with session.get(server.url + "/health", ssl=without) as answer:
                    await answer.read()


def test_https_without_a_key_store_is_a_config_error() -> None:
    settings = local_settings(listeners=(_listener("https"),))
    with pytest.raises(ConfigError, match=r"listeners\.https\.ssl\.keystore\.location"):
        create_app(FakeWorker(), settings=settings)


async def test_unreadable_key_store_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a pem\n")
    settings = local_settings(
        listeners=(_listener("https"),), tls=TlsSettings(tmp_path / "bad.pem")
    )
    server = RestServer(create_app(FakeWorker(), settings=local_settings()), settings)
    with pytest.raises(ConfigError, match="PEM"):
        await server.start()


async def test_a_taken_port_fails_naming_the_listener_and_binds_nothing() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = local_settings(listeners=(_listener(), _listener(port=port)))
        server = RestServer(create_app(FakeWorker(), settings=settings), settings)
        with pytest.raises(OSError, match=f"cannot listen on http://127.0.0.1:{port}"):
            await server.start()
        assert server.bound == ()
        await server.close()


async def test_close_finishes_requests_in_flight_then_refuses() -> None:
    worker = FakeWorker()
    original = worker.pause_connector
    in_flight = asyncio.Event()
    finished: list[str] = []

    async def slow_pause(name: str) -> None:
        in_flight.set()
        await asyncio.sleep(0.3)  # the slow request that close must wait for (not a sync)
        await original(name)
        finished.append(name)

    worker.pause_connector = slow_pause  # type: ignore[method-assign]
    settings = local_settings()
    server = RestServer(create_app(worker, settings=settings, registry=worker.registry), settings)
    await server.start()
    url = server.url
    async with aiohttp.ClientSession(url) as session:
        client = Client(session)
        await client.create("c")
        pending = asyncio.create_task(client.call("PUT", "/connectors/c/pause"))
        await asyncio.wait_for(in_flight.wait(), 10)  # the request is being handled
        await server.close()
        # close returned only after the handler finished, and its answer was sent.
        assert finished == ["c"]
        assert (await asyncio.wait_for(pending, 10)).status == 202
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError):
            await session.get(url + "/health")
    await server.close()  # idempotent


async def test_ipv6_loopback_when_available() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("IPv6 loopback ::1 cannot be bound here")
    async with serve(FakeWorker(), local_settings(listeners=(_listener(host="::1"),))) as server:
        assert server.url.startswith("http://[::1]:")
        async with aiohttp.ClientSession() as session, session.get(server.url + "/health") as r:
            assert r.status == 200


@pytest.fixture(scope="module")
def java_stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return make_stores(tmp_path_factory.mktemp("java-stores"))


async def test_https_from_a_jks_key_store_with_a_pkcs12_trust_store(java_stores: Stores) -> None:
    """Connect's listeners.https.ssl.* with Java stores: the key store JKS, client certificates
    required and checked against a PKCS12 trust store."""
    tls = TlsSettings(
        java_stores.jks,
        key_password=STORE_PASS,
        truststore_location=java_stores.trust_pkcs12,
        client_auth="required",
        keystore_type="JKS",
        keystore_password=STORE_PASS,
        truststore_type="PKCS12",
        truststore_password=TRUST_PASS,
    )
    settings = local_settings(listeners=(_listener("https"),), tls=tls)
    async with serve(FakeWorker(), settings) as server:
        with_cert = ssl.create_default_context(cafile=str(java_stores.ca_pem))
        with_cert.load_cert_chain(java_stores.pem)
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url + "/health", ssl=with_cert) as answer:
                assert answer.status == 200
            without = ssl.create_default_context(cafile=str(java_stores.ca_pem))
            with pytest.raises(aiohttp.ClientError):
                async with session.get(server.url + "/health", ssl=without) as answer:
                    await answer.read()
