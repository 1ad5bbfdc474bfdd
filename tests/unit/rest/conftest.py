"""Fixtures of the REST tests: a worker, a real server over it on 127.0.0.1, a real client.

``worker`` is a ``FakeWorker``; a conftest closer to a test (e.g. for the real worker) may
override ``worker`` and ``rest_registry`` and every test here runs against it unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

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
