"""Forwarding between workers on a real HTTP server on loopback: the other worker's error comes
back with its status and message, an unreachable one is a 409 to retry, and a request that was
forwarded once is marked so the receiver never forwards it again."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from daemon.errors import RemoteError
from daemon.rest.context import forwarded_request
from daemon.rest.errors import status_of
from daemon.runtime.distributed.forward import FORWARDED, HEADER, Forwarder


async def _handler(request: web.Request) -> web.Response:
    if request.path == "/seen":
        return web.json_response({"forwarded": FORWARDED.get()})
    if request.path == "/missing":
        return web.json_response(
            {"error_code": 404, "message": "Connector x not found"}, status=404
        )
    return web.json_response({"name": "x", "tasks": []}, status=201)


@pytest.fixture
async def other_worker() -> AsyncIterator[str]:
    app = web.Application(middlewares=[forwarded_request])
    app.router.add_route("*", "/{tail:.*}", _handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_answers_and_errors_pass_through(other_worker: str) -> None:
    f = Forwarder(timeout=5.0)
    try:
        status, body = await f.request("POST", other_worker, "/connectors", {"name": "x"})
        assert (status, body) == (201, {"name": "x", "tasks": []})
        with pytest.raises(RemoteError) as caught:
            await f.request("GET", other_worker, "/missing")
        assert status_of(caught.value) == (404, "Connector x not found")
        _, seen = await f.request("GET", other_worker, "/seen")
        assert seen == {"forwarded": True}, "the receiver must know the request was forwarded"
    finally:
        await f.close()
    assert FORWARDED.get() is False


async def test_an_unreachable_worker_is_a_conflict_to_retry() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    f = Forwarder(timeout=5.0)
    try:
        with pytest.raises(RemoteError) as caught:
            await f.request("PUT", f"http://127.0.0.1:{port}", "/connectors/x/pause")
    finally:
        await f.close()
    status, message = status_of(caught.value)
    assert status == 409 and "retry" in message and f"127.0.0.1:{port}" in message
    assert HEADER == "X-Connectd-Forwarded"
