"""daemon.systemd.Notifier against real AF_UNIX datagram sockets (a path and an abstract name):
the messages, the environment parsing, the no-op without NOTIFY_SOCKET, the watchdog's rate,
and the point of pinging from the loop: a blocked loop stops the pings."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.runtime.model import ConnectorStatus, State, TaskStatus
from daemon.systemd import Notifier, socket_address, status_line


class Receiver:
    """A bound datagram socket: ``receive`` returns (arrival time, text) pairs."""

    def __init__(self, address: str | bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)

    def receive(self, timeout: float = 2.0) -> tuple[float, str]:
        self.sock.settimeout(timeout)
        data = self.sock.recv(4096)
        return time.monotonic(), data.decode()

    def drain(self) -> list[str]:
        out = []
        self.sock.setblocking(False)
        try:
            while True:
                out.append(self.sock.recv(4096).decode())
        except BlockingIOError:
            return out


@pytest.fixture
def path_socket(tmp_path: Path) -> Iterator[tuple[str, Receiver]]:
    path = str(tmp_path / "notify.sock")
    r = Receiver(path)
    yield path, r
    r.sock.close()


@pytest.fixture
def abstract_socket() -> Iterator[tuple[str, Receiver]]:
    name = f"@connectd-test-{os.getpid()}-{time.monotonic_ns()}"
    r = Receiver(socket_address(name))
    yield name, r
    r.sock.close()


def test_messages_reach_a_path_socket(path_socket: tuple[str, Receiver]) -> None:
    path, r = path_socket
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert n.enabled and n.watchdog_interval is None
    assert n.ready("1 connectors, 1/1 tasks running, 0 failed")
    assert n.status("2 connectors")
    assert n.reloading()
    assert n.stopping()
    got = [r.receive()[1] for _ in range(4)]
    assert got[0] == "READY=1\nSTATUS=1 connectors, 1/1 tasks running, 0 failed"
    assert got[1] == "STATUS=2 connectors"
    reloading, monotonic = got[2].split("\n")
    assert reloading == "RELOADING=1"
    usec = int(monotonic.removeprefix("MONOTONIC_USEC="))
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert 0 <= now - usec < 2_000_000
    assert got[3] == "STOPPING=1"


def test_messages_reach_an_abstract_socket(abstract_socket: tuple[str, Receiver]) -> None:
    name, r = abstract_socket
    n = Notifier.from_env({"NOTIFY_SOCKET": name})
    assert n.address == b"\0" + name[1:].encode()
    assert n.notify_text("READY=1\nSTATUS=up")
    assert n.stopping()
    assert [r.receive()[1], r.receive()[1]] == ["READY=1\nSTATUS=up", "STOPPING=1"]


def test_without_notify_socket_everything_is_a_no_op() -> None:
    n = Notifier.from_env({"WATCHDOG_USEC": "400000"})
    assert not n.enabled and n.watchdog_interval is None
    assert not n.ready() and not n.watchdog() and not n.stopping()


def test_watchdog_settings_from_the_environment() -> None:
    env = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "400000"}
    assert Notifier.from_env(env).watchdog_interval == pytest.approx(0.2)
    mine = env | {"WATCHDOG_PID": "123"}
    assert Notifier.from_env(mine, pid=123).watchdog_interval == pytest.approx(0.2)
    assert Notifier.from_env(mine, pid=124).watchdog_interval is None  # meant for another pid
    assert Notifier.from_env(env | {"WATCHDOG_USEC": "soon"}).watchdog_interval is None
    assert Notifier.from_env(env | {"WATCHDOG_USEC": "0"}).watchdog_interval is None


def test_a_missing_receiver_is_logged_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    n = Notifier(str(tmp_path / "nobody-listens.sock"))
    assert not n.ready()
    assert not n.watchdog()
    warnings = [r for r in caplog.records if "systemd notify" in r.getMessage()]
    assert len(warnings) == 1


def _statuses(*tasks: State, connector: State = State.RUNNING) -> ConnectorStatus:
    return ConnectorStatus(
        "c", connector, "w", tuple(TaskStatus(i, s, "w") for i, s in enumerate(tasks))
    )


class _Worker:
    def __init__(self, statuses: dict[str, ConnectorStatus]) -> None:
        self.statuses = statuses

    def connector_names(self) -> list[str]:
        return [*self.statuses, "deleted-meanwhile"]

    def connector_status(self, name: str) -> ConnectorStatus:
        return self.statuses[name]


def test_status_line_counts_connectors_and_tasks() -> None:
    worker = _Worker(
        {
            "a": _statuses(State.RUNNING, State.RUNNING, State.FAILED),
            "b": _statuses(connector=State.FAILED),
        }
    )
    assert status_line(worker) == "2 connectors, 2/3 tasks running, 2 failed"
    assert status_line(None) == "starting"


async def test_watchdog_pings_at_half_the_timeout(path_socket: tuple[str, Receiver]) -> None:
    path, r = path_socket
    n = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
    n.start(lambda: "ok", status_interval=60.0)
    try:
        await asyncio.sleep(1.0)
    finally:
        await n.stop()
    got = r.drain()
    pings = got.count("WATCHDOG=1")
    assert 4 <= pings <= 7, got
    assert got.count("STATUS=ok") == 1


async def test_status_is_refreshed(path_socket: tuple[str, Receiver]) -> None:
    path, r = path_socket
    n = Notifier.from_env({"NOTIFY_SOCKET": path})
    counter = iter(range(100))
    n.start(lambda: f"n={next(counter)}", status_interval=0.1)
    try:
        await asyncio.sleep(0.45)
    finally:
        await n.stop()
    got = r.drain()
    assert got[:4] == ["STATUS=n=0", "STATUS=n=1", "STATUS=n=2", "STATUS=n=3"], got


async def test_a_blocked_loop_stops_the_pings(path_socket: tuple[str, Receiver]) -> None:
    path, r = path_socket
    n = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})  # every 0.1 s

    async def misbehaving_connector() -> None:
        time.sleep(1.0)  # a synchronous call on the loop: exactly what the watchdog must catch

    # Arrival times are taken on a thread of the test: the loop under test is the one blocked.
    stamps: list[float] = []
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                arrived, text = r.receive(timeout=0.05)
            except TimeoutError:
                continue
            if text == "WATCHDOG=1":
                stamps.append(arrived)

    listener = threading.Thread(target=listen)
    listener.start()
    n.start(lambda: "ok", status_interval=60.0)
    try:
        await asyncio.sleep(0.35)
        blocked_at = time.monotonic()
        await misbehaving_connector()
        await asyncio.sleep(0.35)
    finally:
        await n.stop()
        stop.set()
        listener.join()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    before = [t for t in stamps if t < blocked_at]
    assert len(before) >= 3, stamps
    assert max(gaps) >= 0.9, gaps  # no ping while the loop was blocked
    assert sorted(gaps)[-2] < 0.3, gaps  # and only that one gap
