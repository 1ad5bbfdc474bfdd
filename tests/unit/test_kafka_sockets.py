"""Only an unclosed socket to a broker of the session is let through (``support.kafka_sockets``)."""

from __future__ import annotations

import socket
import sys
from types import SimpleNamespace
from typing import Any

from support import kafka_sockets


def test_only_a_socket_to_a_session_broker_is_tolerated() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    other = socket.create_server(("127.0.0.1", 0))
    saved = set(kafka_sockets.BROKERS)
    try:
        kafka_sockets.register(f"127.0.0.1:{listener.getsockname()[1]}")
        with (
            socket.create_connection(listener.getsockname()) as to_broker,
            socket.create_connection(other.getsockname()) as elsewhere,
        ):
            warning = ResourceWarning("unclosed")

            def leak(obj: object, exc: BaseException) -> SimpleNamespace:
                return SimpleNamespace(object=obj, exc_value=exc)

            assert kafka_sockets.is_broker_socket_leak(leak(to_broker, warning))
            assert not kafka_sockets.is_broker_socket_leak(leak(elsewhere, warning))
            assert not kafka_sockets.is_broker_socket_leak(leak(to_broker, ValueError()))
            assert not kafka_sockets.is_broker_socket_leak(leak(object(), warning))
    finally:
        kafka_sockets.BROKERS.clear()
        kafka_sockets.BROKERS.update(saved)
        listener.close()
        other.close()


def _leak_a_connection(port: int) -> None:
    """Open a stream to 127.0.0.1:port on a loop of its own and close the loop, not the stream
    (what a connect cancelled inside aiokafka leaves behind)."""
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        _reader, writer = loop.run_until_complete(asyncio.open_connection("127.0.0.1", port))
        leaked.append(writer)
    finally:
        loop.close()


leaked: list[object] = []


def test_a_leaked_stream_to_a_broker_is_recognised_and_one_elsewhere_is_not() -> None:
    import gc

    listener = socket.create_server(("127.0.0.1", 0))
    other = socket.create_server(("127.0.0.1", 0))
    broker = ("127.0.0.1", listener.getsockname()[1])
    elsewhere = ("127.0.0.1", other.getsockname()[1])
    saved = set(kafka_sockets.BROKERS)
    seen: list[Any] = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        kafka_sockets.BROKERS.add(broker)
        _leak_a_connection(broker[1])
        _leak_a_connection(elsewhere[1])
        leaked.clear()
        gc.collect()
        verdicts = [(kafka_sockets._peer(u), kafka_sockets.is_broker_socket_leak(u)) for u in seen]
    finally:
        sys.unraisablehook = previous
        kafka_sockets.BROKERS.clear()
        kafka_sockets.BROKERS.update(saved)
        listener.close()
        other.close()
    # Each warning (the stream writer's "loop is closed", its transport's, its socket's) is
    # traced to its connection's peer, and only the broker's are tolerated.
    assert {peer for peer, _ in verdicts} == {broker, elsewhere}
    assert all(tolerated == (peer == broker) for peer, tolerated in verdicts), verdicts


def test_aiokafkas_own_unclosed_connection_warning_is_traced_to_its_broker() -> None:
    saved = set(kafka_sockets.BROKERS)
    try:
        kafka_sockets.BROKERS.add(("127.0.0.1", 38679))

        def warning(port: int) -> SimpleNamespace:
            text = f"Unclosed AIOKafkaConnection <AIOKafkaConnection host=127.0.0.1 port={port}>"
            return SimpleNamespace(object=None, exc_value=ResourceWarning(text))

        assert kafka_sockets.is_broker_socket_leak(warning(38679))
        assert not kafka_sockets.is_broker_socket_leak(warning(1))
    finally:
        kafka_sockets.BROKERS.clear()
        kafka_sockets.BROKERS.update(saved)
