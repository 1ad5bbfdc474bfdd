"""Issue 13 against real ``connectd standalone`` processes, the broker and Spark:

- item 12: a worker file with Connect's deprecated ``rest.port`` and no ``listeners`` listens on
  127.0.0.1 only (the kernel's table of listening sockets says so), and the log's warning says
  how to listen on every interface;
- item 8: a REST create whose ``consumer.override.*`` value is bad answers 400 naming the key;
- item 13: ``DELETE /connectors/{c}/offsets`` after a ParquetSink committed rows says that the
  table already holds them and that resuming writes them again;
- item 14: from the moment the port opens until the file's connectors are loaded, ``GET
  /connectors`` answers 503 with Connect's error body, never ``200 []``; the worker's start is
  stretched to two seconds (``support.slow_start``) so the window is there to look at.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.daemon import DaemonProcess, wait_until, worker_properties, write_properties
from support.kafka import free_port, produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

from daemon.rest.context import STILL_STARTING
from daemon.rest.offsets import RESET

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

RECORDS = 40
EXECUTOR_READY = re.compile(r"executor \d+ ready in")


class RestPortDaemon(DaemonProcess):
    """A daemon whose worker file has ``rest.port=PORT`` and no ``listeners``."""

    def __init__(
        self,
        worker: Mapping[str, str],
        connectors: Sequence[Mapping[str, str]],
        workdir: Path,
        port: int,
    ) -> None:
        super().__init__({**worker, "listeners": f"http://127.0.0.1:{port}"}, connectors, workdir)
        legacy = {k: v for k, v in worker.items() if k != "listeners"}
        write_properties(self.worker_file, {**legacy, "rest.port": str(port)})


class SlowStartDaemon(DaemonProcess):
    """A daemon whose worker loads its connectors ``delay`` seconds after REST listens."""

    delay = 2.0

    def start(self) -> DaemonProcess:
        args = [sys.executable, "-m", "support.slow_start", str(self.delay), "standalone"]
        args += [str(self.worker_file), *map(str, self.connector_files)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args, cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.starts += 1
        return self


@pytest.fixture
def daemons() -> Iterator[list[DaemonProcess]]:
    """The daemons a test started: SIGTERM, then their whole trees killed, by PID."""
    made: list[DaemonProcess] = []
    yield made
    for p in made:
        p.signal(signal.SIGTERM)
    for p in made:
        with contextlib.suppress(subprocess.TimeoutExpired, AssertionError):
            p.wait(30)
        p.kill_all()


def _listening(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on ``port`` (IPv4 and IPv6), from the
    kernel's tables (/proc/net/tcp, tcp6): state 0A is LISTEN."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for line in f:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state != "0A" or int(hex_port, 16) != port:
                    continue
                assert len(address) == width
                if width == 8:
                    found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
                else:
                    found.add("ipv6:" + address)
    return found


async def test_rest_port_listens_on_loopback_bad_override_is_400_and_reset_warns(
    daemons: list[DaemonProcess],
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    await produce(kafka_bootstrap, topic, [(None, b"record-%03d" % i) for i in range(RECORDS)])
    table = tmp_path / "table"
    sink = {
        "name": "table-sink",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
    }
    port = free_port()
    worker = worker_properties(kafka_bootstrap, tmp_path / "state", executor_pool_spares="0")
    p = RestPortDaemon(worker, [sink], tmp_path / "daemon", port)
    daemons.append(p)
    p.start().wait_rest()

    # Item 12: loopback only, and the warning says how to open it on purpose.
    assert _listening(port) == {"127.0.0.1"}
    assert f"set listeners=http://0.0.0.0:{port} to listen on every interface" in p.log()

    # Item 8: a bad consumer override is refused at create, naming the key and the type.
    bad = {
        "name": "bad-override",
        "config": {
            "connector.class": "EchoSink",
            "topics": topic,
            "consumer.override.max.poll.records": "abc",
        },
    }
    status, body = p.rest("POST", "/connectors", bad)
    assert status == 400, body
    assert (
        "consumer.override.max.poll.records: 'abc' is not a number; expected an integer ≥ 1"
        in body["message"]
    )
    assert p.rest("GET", "/connectors")[1] == ["table-sink"]

    # Item 13: rows in the table, then a reset: the answer says resuming writes them again.
    await wait_until(lambda: committed(table) >= RECORDS, 300, "every record in the table")
    assert p.rest("PUT", "/connectors/table-sink/stop")[0] == 204
    status, held = p.rest("GET", "/connectors/table-sink/offsets")
    assert status == 200 and sum(o["offset"]["kafka_offset"] for o in held["offsets"]) == RECORDS

    async def reset() -> dict[str, Any] | None:
        status, body = p.rest("DELETE", "/connectors/table-sink/offsets")
        return body if status == 200 else None  # 400 until the stop has taken effect

    body = await wait_until(reset, 60, "the reset")
    message = body["message"]
    assert message.startswith(RESET + ". Warning: the sink already holds the records")
    for o in held["offsets"]:
        partition, offset = o["partition"]["kafka_partition"], o["offset"]["kafka_offset"]
        assert f"{topic}-{partition} before offset {offset}" in message
    assert "writes those records into the table a second time" in message
    assert p.rest("GET", "/connectors/table-sink/offsets") == (200, {"offsets": []})


def _answer(p: DaemonProcess, path: str) -> tuple[int, Any] | None:
    try:
        return p.rest("GET", path, timeout=5.0)
    except (OSError, urllib.error.URLError):
        return None  # not listening yet


async def test_connectors_answer_503_from_port_open_until_loaded(
    daemons: list[DaemonProcess],
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    sink = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    worker = worker_properties(kafka_bootstrap, tmp_path / "state", executor_pool_spares="0")
    p = SlowStartDaemon(worker, [sink], tmp_path / "daemon")
    daemons.append(p)
    p.start()

    lists: list[tuple[int, Any]] = []
    statuses: list[tuple[int, Any]] = []
    deadline = time.monotonic() + 120
    while not lists or lists[-1][0] != 200:
        assert p.proc is not None and p.proc.poll() is None, p.log()
        assert time.monotonic() < deadline, f"no 200 from GET /connectors: {lists[-3:]}"
        answer = _answer(p, "/connectors")
        if answer is not None:
            lists.append(answer)
            status = _answer(p, "/connectors/echo/status")
            assert status is not None
            statuses.append(status)

    starting = {"error_code": 503, "message": STILL_STARTING}
    assert lists[-1] == (200, ["echo"])
    assert all(answer == (503, starting) for answer in lists[:-1]), lists
    assert len(lists) > 5, "the start-up window was not seen"  # two seconds of 503s
    assert {s for s, _ in statuses} <= {503, 200}, statuses  # never 404 for a file connector
    assert statuses[0] == (503, starting)
    # An echo sink needs no executor (executor.pool.start=auto): none started, none to wait for.
    assert not EXECUTOR_READY.search(p.log_path.read_text(errors="replace"))
