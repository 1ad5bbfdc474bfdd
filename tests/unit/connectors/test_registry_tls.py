"""The Schema Registry client over TLS, against a real HTTPS server on loopback: the PEM trust
store, the host name check (``schema.registry.ssl.endpoint.identification.algorithm``), a
client certificate from the PEM key store, and Java stores (PKCS12, JKS) made by keytool, each
observed by the server answering or not."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web
from support.tls import STORE_PASS, TRUST_PASS, make_stores

from daemon.connectors.converters.registry import (
    RegistryClient,
    RegistrySettings,
    RegistryUnavailable,
)
from daemon.errors import ConfigError


def _cert(directory: Path, name: str, cn: str, san: str) -> tuple[Path, Path]:
    """A self-signed certificate: (key store: key + chain, certificate)."""
    key, cert = directory / f"{name}-key.pem", directory / f"{name}.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", f"/CN={cn}", "-addext", f"subjectAltName={san}",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    keystore = directory / f"{name}-keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return keystore, cert


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("registry-tls")
    return {
        "loopback": _cert(d, "loopback", "127.0.0.1", "IP:127.0.0.1"),
        "other": _cert(d, "other", "other.example", "DNS:other.example"),
        "client": _cert(d, "client", "connectd", "DNS:connectd"),
    }


@asynccontextmanager
async def _https(
    server_cert: tuple[Path, Path], client_ca: Path | None = None, newest: str = "TLSv1_3"
) -> AsyncIterator[str]:
    async def by_id(request: web.Request) -> web.Response:
        return web.json_response({"schema": json.dumps("string")})

    app = web.Application()
    app.router.add_get("/schemas/ids/{id}", by_id)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(server_cert[0])
    ctx.maximum_version = ssl.TLSVersion[newest]
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cafile=client_ca)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _fetch(url: str, **options: str) -> None:
    client = RegistryClient(RegistrySettings.parse({"schema.registry.url": url, **options}, ""))
    try:
        await client.fetch([1])
        assert client.cached(1) is not None
    finally:
        await client.close()


async def test_the_pem_trust_store_is_what_the_server_is_checked_against(
    certs: dict[str, tuple[Path, Path]],
) -> None:
    async with _https(certs["loopback"]) as url:
        trust = {"schema.registry.ssl.truststore.location": str(certs["loopback"][1])}
        await _fetch(url, **trust)
        with pytest.raises(RegistryUnavailable, match="certificate verify failed"):
            await _fetch(url)  # the system's CAs do not know this certificate


async def test_the_host_name_check_can_be_turned_off(certs: dict[str, tuple[Path, Path]]) -> None:
    async with _https(certs["other"]) as url:
        trust = {"schema.registry.ssl.truststore.location": str(certs["other"][1])}
        with pytest.raises(RegistryUnavailable, match="certificate verify failed"):
            await _fetch(url, **trust)  # a certificate for other.example, not 127.0.0.1
        await _fetch(url, **trust, **{"schema.registry.ssl.endpoint.identification.algorithm": ""})


async def test_a_client_certificate_from_the_pem_key_store(
    certs: dict[str, tuple[Path, Path]],
) -> None:
    async with _https(certs["loopback"], client_ca=certs["client"][1]) as url:
        trust = {"schema.registry.ssl.truststore.location": str(certs["loopback"][1])}
        with pytest.raises(RegistryUnavailable):
            await _fetch(url, **trust)  # the server asks for a certificate and gets none
        keystore = {"schema.registry.ssl.keystore.location": str(certs["client"][0])}
        await _fetch(url, **trust, **keystore)


async def test_java_key_and_trust_stores(tmp_path: Path) -> None:
    """Confluent's client settings with Java stores: a PKCS12 trust store of the CA that signed
    the server's certificate, and the client's certificate from a JKS key store."""
    stores = make_stores(tmp_path / "stores")
    server = (stores.pem, stores.ca_pem)
    async with _https(server, client_ca=stores.ca_pem) as url:
        options = {
            "schema.registry.ssl.truststore.type": "PKCS12",
            "schema.registry.ssl.truststore.location": str(stores.trust_pkcs12),
            "schema.registry.ssl.truststore.password": TRUST_PASS,
        }
        with pytest.raises(RegistryUnavailable):
            await _fetch(url, **options)  # no client certificate
        await _fetch(
            url,
            **options,
            **{
                "schema.registry.ssl.keystore.type": "JKS",
                "schema.registry.ssl.keystore.location": str(stores.jks),
                "schema.registry.ssl.keystore.password": STORE_PASS,
                "schema.registry.ssl.key.password": STORE_PASS,
            },
        )


async def test_tls_versions_and_suites_as_the_kafka_clients_take_them(
    certs: dict[str, tuple[Path, Path]],
) -> None:
    """schema.registry.ssl.protocol, .enabled.protocols and .cipher.suites: a server of TLS 1.2
    only is reached by the defaults and by an ECDSA suite of its key; TLSv1.3 alone, or an RSA
    suite alone, reaches nothing."""
    trust = {"schema.registry.ssl.truststore.location": str(certs["loopback"][1])}
    suites = "schema.registry.ssl.cipher.suites"
    async with _https(certs["loopback"], newest="TLSv1_2") as url:
        await _fetch(url, **trust)
        await _fetch(url, **trust, **{suites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"})
        for refused in (
            {"schema.registry.ssl.enabled.protocols": "TLSv1.3"},
            {suites: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
        ):
            with pytest.raises(RegistryUnavailable):
                await _fetch(url, **trust, **refused)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ssl.protocol", "SSLv3", "ssl.protocol: 'SSLv3' is not a TLS protocol"),
        ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "cannot narrow TLS 1.3"),
        ("ssl.engine.factory.class", "x.Y", "ssl.engine.factory.class"),
    ],
)
def test_tls_settings_connectd_cannot_honour_are_refused(
    key: str, value: str, message: str
) -> None:
    options = {"schema.registry.url": "https://127.0.0.1:1", f"schema.registry.{key}": value}
    with pytest.raises(ConfigError, match=message):
        RegistrySettings.parse(options, "value.converter.")
