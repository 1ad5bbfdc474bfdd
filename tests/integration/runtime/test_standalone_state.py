"""Standalone state as a Kafka Connect user expects it, with real ``connectd standalone``
processes and their REST API (issue 13, items 2, 3 and 10):

- one daemon per ``state.dir``: a second daemon on the directory exits 75 at once, naming the
  directory and the first one's PID, having started nothing and changed no state; the first
  one's connectors (a REST-created one answered 201 included) are untouched and come back after
  its restart;
- the command line is the truth for file-defined connectors: ``standalone w a b`` (+ ``c`` by
  REST), stop, ``standalone w a``: ``a`` and ``c`` run, ``b`` is dropped with a line naming its
  file; ``c`` (REST) and ``a``'s PAUSED target state are restored, each logged with its origin;
- a REST listener whose port is in use: one line naming the listener, exit 69, no traceback,
  nothing left running.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from support import procs
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka import free_port
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

SMALL = {"executor.pool.spares": "0"}  # these tests write nothing: one executor is plenty


def _echo(name: str, topic: str) -> dict[str, str]:
    return {"name": name, "connector.class": "EchoSink", "topics": topic, "tasks.max": "1"}


def _state(state_dir: Path) -> dict[str, Any]:
    connectors: dict[str, Any] = json.loads(
        (state_dir / "standalone" / "connectors.json").read_text()
    )["connectors"]
    return connectors


def _names(p: DaemonProcess) -> list[str]:
    code, names = p.rest("GET", "/connectors")
    assert code == 200, names
    return sorted(names)


def _connector_state(p: DaemonProcess, name: str) -> str:
    code, body = p.rest("GET", f"/connectors/{name}/status")
    assert code == 200, body
    state: str = body["connector"]["state"]
    return state


async def test_one_daemon_per_state_dir_and_the_command_line_is_the_truth(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    state = tmp_path / "state"
    worker = worker_properties(kafka_bootstrap, state, **SMALL)
    first = daemon_process(worker, [_echo("a", topic), _echo("b", topic)])
    code, body = first.rest("POST", "/connectors", {"name": "c", "config": _echo("c", topic)})
    assert code == 201, body
    assert first.rest("PUT", "/connectors/a/pause")[0] == 202
    assert _names(first) == ["a", "b", "c"]
    before = (state / "standalone" / "connectors.json").read_bytes()

    # A second daemon on the same state.dir (its own REST port): refused before it starts
    # anything or reads any state.
    second = daemon_process(
        {**worker, "listeners": f"http://127.0.0.1:{free_port()}"},
        [_echo("a", topic), _echo("b", topic)],
        wait=False,
    )
    code = await asyncio.to_thread(second.wait, 60.0)
    refused = second.log()
    print(f"second daemon: exit {code}\n{refused}")
    assert code == 75, refused
    assert f"state.dir {state} is in use by another connectd daemon (pid {first.pid}" in refused
    assert "Traceback" not in refused
    assert "executor" not in refused.lower() and "Connector" not in refused, refused
    assert (state / "standalone" / "connectors.json").read_bytes() == before
    assert _names(first) == ["a", "b", "c"]  # the first one is untouched
    assert _connector_state(first, "a") == "PAUSED"

    first.signal(signal.SIGTERM)
    assert await asyncio.to_thread(first.wait, 60.0) == 0, first.log()

    # Restarted with only `a` on the command line (from another directory: other file paths).
    again = daemon_process(worker, [_echo("a", topic)])
    log = again.log()
    print(log)
    assert _names(again) == ["a", "c"]
    b_file = first.connector_files[1]
    assert f"Connector b (from file {b_file}) is not on the command line: not started" in log
    state_file = state / "standalone" / "connectors.json"
    assert f"Connector c restored from the state file {state_file}: created through the REST" in (
        log
    )
    a_file = again.connector_files[0]
    assert f"Connector a from file {a_file}, known to the state file {state_file}" in log
    assert "Connector a is PAUSED, as it was before the restart" in log
    assert "PUT /connectors/a/resume to run it" in log
    assert _connector_state(again, "a") == "PAUSED"
    code, info = again.rest("GET", "/connectors/c")
    assert code == 200 and info["config"]["connector.class"] == "EchoSink"
    stored = _state(state)
    assert sorted(stored) == ["a", "c"]
    assert stored["a"]["origin"] == "file" and stored["a"]["file"] == str(a_file)
    assert stored["a"]["target"] == "PAUSED"
    assert stored["c"]["origin"] == "rest" and "file" not in stored["c"]

    # Resumed as the log line says.
    assert again.rest("PUT", "/connectors/a/resume")[0] == 202
    await wait_until(lambda: _connector_state(again, "a") == "RUNNING", 30.0, "a RUNNING")
    assert _state(state)["a"]["target"] == "RUNNING"


async def test_rest_port_in_use_is_one_line_and_exit_69(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = worker_properties(
            kafka_bootstrap,
            tmp_path / "state",
            **SMALL,
            **{"listeners": f"http://127.0.0.1:{port}"},
        )
        baseline = set(procs.live_descendants())
        p = daemon_process(worker, [_echo("a", topic)], wait=False)
        code = await asyncio.to_thread(p.wait, 120.0)
    log = p.log()
    print(f"exit {code}\n{log}")
    assert code == 69, log
    line = (
        f"connectd: cannot listen on http://127.0.0.1:{port}: port {port} is in use (another"
        " connectd or Kafka Connect?)"
    )
    assert line in log
    assert "Traceback" not in log
    # Whatever it had started (its executor pool, the REST front) is gone and reaped.
    assert procs.wait_gone(baseline, 10.0) == {}
