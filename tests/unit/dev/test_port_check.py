"""The dev tools' port check (``dev/proctools.py``) as the servers bind: a port whose only user
is a connection a stopped server left in TIME_WAIT is free for a JVM (which binds with
SO_REUSEADDR), and a port a live server listens on is not (issue 33: ``make kafka-up`` right
after ``make kafka-down``)."""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "dev"))
spec = importlib.util.spec_from_file_location("proctools", ROOT / "dev" / "proctools.py")
assert spec is not None and spec.loader is not None
proctools = importlib.util.module_from_spec(spec)
spec.loader.exec_module(proctools)


def _time_wait_port() -> int:
    """A port left with a TIME_WAIT connection on the server's side, as a stopped broker leaves
    its clients' connections: the server closes first, the client answers."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = int(server.getsockname()[1])
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()
    client.settimeout(5)
    assert client.recv(1) == b""  # the server's FIN
    client.close()
    server.close()
    return port


def test_a_time_wait_connection_does_not_take_the_port() -> None:
    port = _time_wait_port()
    deadline = time.monotonic() + 5
    while proctools.port_is_free(port) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the kernel shows the TIME_WAIT to a plain bind
    assert not proctools.port_is_free(port), "a plain bind refuses a TIME_WAIT port"
    assert proctools.port_is_free(port, reuse=True), "the JVM's bind (SO_REUSEADDR) takes it"


def test_a_listening_server_takes_the_port_either_way() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = int(server.getsockname()[1])
        assert not proctools.port_is_free(port)
        assert not proctools.port_is_free(port, reuse=True)


def test_every_dev_server_checks_its_port_as_the_jvm_binds() -> None:
    for tool in ("kafka/kafkactl.py", "spark/sparkctl.py", "registry/registryctl.py"):
        source = (ROOT / "dev" / tool).read_text()
        calls = source.count("port_is_free(")
        assert calls and calls == source.count("reuse=True)"), tool
