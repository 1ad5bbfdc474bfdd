"""A daemon whose REST listener is HTTPS from a Connect worker file's Java key stores: the
key store JKS (Connect's default type, left unset), client certificates required and checked
against a PKCS12 trust store. The listener is served by the REST front process, which reads the
stores itself."""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.kafka import free_port
from support.tls import STORE_PASS, TRUST_PASS, make_stores

pytestmark = pytest.mark.integration


def _get(url: str, ctx: ssl.SSLContext) -> int:
    with urllib.request.urlopen(url, context=ctx, timeout=5) as answer:
        return int(answer.status)


async def test_https_listener_from_a_jks_key_store(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path
) -> None:
    stores = await asyncio.to_thread(make_stores, tmp_path / "tls")
    port = free_port()
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "listeners": f"https://127.0.0.1:{port}",
            "listeners.https.ssl.keystore.location": str(stores.jks),
            "listeners.https.ssl.keystore.password": STORE_PASS,
            "listeners.https.ssl.key.password": STORE_PASS,
            "listeners.https.ssl.truststore.type": "PKCS12",
            "listeners.https.ssl.truststore.location": str(stores.trust_pkcs12),
            "listeners.https.ssl.truststore.password": TRUST_PASS,
            "listeners.https.ssl.client.auth": "required",
        },
    )
    p = daemon_process(worker, [], wait=False)
    url = f"https://localhost:{port}/"
    with_cert = ssl.create_default_context(cafile=str(stores.ca_pem))
    with_cert.load_cert_chain(stores.pem)

    def answers() -> bool:
        assert p.proc is not None and p.proc.poll() is None, p.log()
        try:
            return _get(url, with_cert) == 200
        except (OSError, urllib.error.URLError):
            return False

    await wait_until(answers, 60, "GET / over HTTPS", interval=0.2)
    without = ssl.create_default_context(cafile=str(stores.ca_pem))
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        await asyncio.to_thread(_get, url, without)
    assert "Traceback" not in p.log()


async def test_without_listeners_https_settings_the_workers_ssl_settings_serve_https(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Connect's all-or-nothing rule: no listeners.https.* key, so the HTTPS listener takes the
    worker's ssl.* settings (here only the REST listener's: the broker is PLAINTEXT), with
    ssl.client.auth and ssl.enabled.protocols."""
    stores = await asyncio.to_thread(make_stores, tmp_path / "tls")
    port = free_port()
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "listeners": f"https://127.0.0.1:{port}",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(stores.pkcs12),
            "ssl.keystore.password": STORE_PASS,
            "ssl.truststore.location": str(stores.trust_jks),
            "ssl.truststore.password": TRUST_PASS,
            "ssl.client.auth": "required",
            "ssl.enabled.protocols": "TLSv1.3",
        },
    )
    p = daemon_process(worker, [], wait=False)
    url = f"https://localhost:{port}/"

    def client(newest: ssl.TLSVersion, cert: bool = True) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(stores.ca_pem))
        ctx.maximum_version = newest
        if cert:
            ctx.load_cert_chain(stores.pem)
        return ctx

    def answers() -> bool:
        assert p.proc is not None and p.proc.poll() is None, p.log()
        try:
            return _get(url, client(ssl.TLSVersion.TLSv1_3)) == 200
        except (OSError, urllib.error.URLError):
            return False

    await wait_until(answers, 60, "GET / over HTTPS (TLSv1.3)", interval=0.2)
    for refused in (client(ssl.TLSVersion.TLSv1_2), client(ssl.TLSVersion.TLSv1_3, cert=False)):
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            await asyncio.to_thread(_get, url, refused)
    assert "Traceback" not in p.log()
