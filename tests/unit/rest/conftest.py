"""Fixtures of the REST tests: a worker, a real server over it on 127.0.0.1, a real client.

``worker`` is a ``FakeWorker``; a conftest closer to a test (e.g. for the real worker) may
override ``worker`` and ``rest_registry`` and every test here runs against it unchanged.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from support.fake_worker import Client, FakeWorker, local_settings, serve

from daemon.connectors.api import ConnectorRegistry
from daemon.rest import RestServer, RestSettings


@pytest.fixture
def worker() -> FakeWorker:
    return FakeWorker()


@pytest.fixture
def rest_registry(worker: FakeWorker) -> ConnectorRegistry:
    return worker.registry


@pytest.fixture
def rest_settings() -> RestSettings:
    return local_settings()


@pytest.fixture
async def server(
    worker: FakeWorker, rest_settings: RestSettings, rest_registry: ConnectorRegistry
) -> AsyncIterator[RestServer]:
    async with serve(worker, rest_settings, registry=rest_registry) as running:
        yield running


@pytest.fixture
async def client(server: RestServer) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession(server.url) as session:
        yield Client(session)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (key store: key + chain, CA file)."""
    directory = tmp_path_factory.mktemp("tls")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    keystore = directory / "keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return keystore, cert
