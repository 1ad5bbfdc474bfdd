"""daemon.kafkacheck: a closed port is "unavailable" once the deadline has passed, not before,
and the message names the servers, the deadline and what to do."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from daemon.errors import ServiceUnavailable
from daemon.kafkacheck import wait_for_kafka


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


async def test_unreachable_kafka_is_reported_at_the_deadline() -> None:
    servers = [f"127.0.0.1:{_closed_port()}", f"127.0.0.1:{_closed_port()}"]
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable) as caught:
        await wait_for_kafka(servers, 1.0)
    took = time.monotonic() - started
    assert 1.0 <= took < 1.5, took  # retried until the deadline, then gave up at once
    message = str(caught.value)
    assert f"bootstrap.servers={','.join(servers)}" in message
    assert "within 1 s (startup.kafka.timeout.ms=1000" in message
    assert "ConnectionRefusedError" in message
    assert caught.value.retriable


async def test_a_silent_broker_is_bounded_by_the_deadline_too() -> None:
    """A listener that accepts but never answers (a hung broker, a wrong port): the attempt's
    own timeout is cut to what is left of the deadline."""
    accepted: list[asyncio.StreamWriter] = []
    server = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match="TimeoutError"):
            await wait_for_kafka([f"127.0.0.1:{port}"], 0.8)
        assert time.monotonic() - started < 1.3
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
