"""daemon.sparkcheck: which masters are probed, and a master that is down is "unavailable" at
the deadline, naming executor.spark.master; one that listens passes at once."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from daemon.errors import ServiceUnavailable
from daemon.sparkcheck import master_addresses, wait_for_master


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("local[*]", []),
        ("local[2]", []),
        ("yarn", []),
        ("spark://10.0.0.1:7077", [("10.0.0.1", 7077)]),
        ("spark://a:7077,b:7078", [("a", 7077), ("b", 7078)]),  # standby masters (ZooKeeper HA)
        ("spark://host", [("host", 7077)]),
        ("k8s://https://api.example:6443", [("api.example", 6443)]),
    ],
)
def test_master_addresses(master: str, expected: list[tuple[str, int]]) -> None:
    assert master_addresses(master) == expected


async def test_a_master_that_is_down_is_reported_at_the_deadline() -> None:
    master = f"spark://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable) as caught:
        await wait_for_master(master, 1.0)
    assert 1.0 <= time.monotonic() - started < 1.5
    message = str(caught.value)
    assert f"executor.spark.master={master}" in message
    assert "executor.start.timeout.ms=1000" in message
    assert "ConnectionRefusedError" in message


async def test_a_listening_master_passes_and_local_needs_nothing() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        started = time.monotonic()
        # The second address is down: one master of an HA list answering is enough.
        await wait_for_master(f"spark://127.0.0.1:{port},127.0.0.1:{_closed_port()}", 5.0)
        await wait_for_master("local[*]", 0.001)
        assert time.monotonic() - started < 1.0
    finally:
        server.close()
        await server.wait_closed()
