"""Only an unclosed socket to a broker of the session is let through (``support.kafka_sockets``)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

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
