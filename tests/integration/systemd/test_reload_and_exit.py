"""A real ``connectd standalone`` process, a real NOTIFY_SOCKET:

- SIGHUP with a broken connector file (bad syntax, a missing required key, an unknown class, a
  transform setting Connect refuses) or
  a broken worker file: the error is logged naming the file and the key (or line), nothing of
  the running set changes (same connectors, configs, task incarnations), READY=1 follows
  RELOADING=1; a later SIGHUP with the file fixed applies it.
- Kafka unreachable at start: exit code 69 once ``startup.kafka.timeout.ms`` has passed, the
  message on stderr names the bootstrap servers and the deadline, READY=1 was never sent, no
  process is left behind.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from support import procs
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka import free_port
from support.kafka_fixtures import TopicFactory
from support.notify import Listener

pytestmark = pytest.mark.integration


def _snapshot(p: DaemonProcess) -> dict[str, Any]:
    """What must not change when a reload is rejected."""
    _, names = p.rest("GET", "/connectors")
    _, config = p.rest("GET", "/connectors/echo/config")
    _, status = p.rest("GET", "/connectors/echo/status")
    tasks = sorted((t["id"], t["state"], t["incarnation"]) for t in status["tasks"])
    return {"names": sorted(names), "config": config, "tasks": tasks}


async def _sighup(p: DaemonProcess, listener: Listener) -> list[str]:
    """SIGHUP, then wait for the READY=1 that ends the reload; the lifecycle messages since."""
    hup = time.monotonic()
    p.signal(signal.SIGHUP)
    await wait_until(
        lambda: [t for t in listener.stamps("READY=1") if t > hup], 30.0, "READY=1 after SIGHUP"
    )
    return listener.lifecycle(hup)


def _stamp(log: str, text: str) -> float:
    """The time stamp (seconds) of the first text-format log line containing ``text``."""
    line = next(x for x in log.splitlines() if text in x)
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _props(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


async def test_a_broken_file_on_sighup_keeps_the_running_set(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    listener: Listener,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    good = {"name": "echo", "connector.class": "EchoSink", "topics": topic, "tasks.max": "2"}
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    p = daemon_process(worker, [good], wait=False, env={"NOTIFY_SOCKET": listener.path})
    await wait_until(lambda: listener.stamps("READY=1"), 90.0, "READY=1")
    await wait_until(
        lambda: [t[1] for t in _snapshot(p)["tasks"]] == ["RUNNING", "RUNNING"],
        30.0,
        "two running tasks",
    )
    before = _snapshot(p)
    (connector_file,) = p.connector_files
    good_text, worker_text = connector_file.read_text(), p.worker_file.read_text()

    broken = {
        "bad syntax": (connector_file, good_text + "\\u12zz\n", f"{connector_file}:5: "),
        "missing required key": (
            connector_file,
            _props({k: v for k, v in good.items() if k != "connector.class"}),
            f"{connector_file}: connector.class: required key is missing",
        ),
        "unknown class": (
            connector_file,
            good_text.replace("EchoSink", "NoSuchSink"),
            f"{connector_file}: connector.class: no connector class 'NoSuchSink'",
        ),
        "a transform Connect would refuse": (
            connector_file,
            good_text
            + "transforms=cast\ntransforms.cast.type=Cast$Value\n"
            + "transforms.cast.spec=id:date\n",
            "transforms.cast.spec: 'id:date': 'date' is not a type Cast casts to",
        ),
        "broken worker file": (
            p.worker_file,
            worker_text + "offset.flush.interval.ms=often\n",
            f"{p.worker_file}:{worker_text.count(chr(10)) + 1}: offset.flush.interval.ms: ",
        ),
    }
    for case, (path, text, expected) in broken.items():
        log_mark = len(p.log_path.read_text())
        path.write_text(text)
        messages = await _sighup(p, listener)
        assert [m.split("\n")[0] for m in messages] == ["RELOADING=1", "READY=1"], (case, messages)
        assert messages[0].split("\n")[1].startswith("MONOTONIC_USEC="), messages
        logged = p.log_path.read_text()[log_mark:]
        assert "Reload rejected, the running connectors are kept as they were" in logged, (
            case,
            logged,
        )
        assert expected in logged, (case, expected, logged)
        assert _snapshot(p) == before, case  # nothing stopped, no new incarnation
        print(f"{case}: {next(x for x in logged.splitlines() if expected in x).strip()}")
        path.write_text(good_text if path == connector_file else worker_text)

    # Fixed, and changed: the next SIGHUP applies it (one task now, a new incarnation).
    connector_file.write_text(good_text.replace("tasks.max=2", "tasks.max=1"))
    messages = await _sighup(p, listener)
    assert [m.split("\n")[0] for m in messages] == ["RELOADING=1", "READY=1"], messages
    newest = max(t[2] for t in before["tasks"])
    after = await wait_until(
        lambda: (
            (s := _snapshot(p))["config"]["tasks.max"] == "1"
            and len(s["tasks"]) == 1
            and s["tasks"][0][1] == "RUNNING"
            and s
        ),
        30.0,
        "the fixed file applied",
    )
    assert after["tasks"][0][2] > newest, (before, after)
    assert "Reloaded the configuration (1 connector(s) from files)" in p.log_path.read_text()

    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60.0) == 0, p.log()


async def test_unreachable_kafka_at_start_exits_69(
    daemon_process: ProcessFactory, listener: Listener, tmp_path: Path
) -> None:
    deadline_ms = 3000
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    worker = worker_properties(
        bootstrap, tmp_path / "state", **{"startup.kafka.timeout.ms": str(deadline_ms)}
    )
    connector = {"name": "echo", "connector.class": "EchoSink", "topics": "t"}
    baseline = set(procs.live_descendants())
    began = time.monotonic()
    p = daemon_process(worker, [connector], wait=False, env={"NOTIFY_SOCKET": listener.path})
    code = await asyncio.to_thread(p.wait, deadline_ms / 1000 + 20.0)
    took = time.monotonic() - began
    log = p.log_path.read_text()
    print(f"exit {code} after {took:.2f} s (deadline {deadline_ms} ms); stderr:\n{log}")
    assert code == 69, log
    # Python's start-up and imports come first (seconds on a busy machine); the deadline runs
    # from the first attempt, which logs a warning: from it to the shutdown is the deadline.
    assert deadline_ms / 1000 <= took < deadline_ms / 1000 + 20.0, took
    first_try = _stamp(log, "Kafka not reachable yet")
    gave_up = _stamp(log, "connectd is shutting down")
    assert deadline_ms / 1000 - 0.3 <= gave_up - first_try <= deadline_ms / 1000 + 1.0, log
    assert f"bootstrap.servers={bootstrap}" in log, log
    assert f"startup.kafka.timeout.ms={deadline_ms}" in log, log
    assert "READY=1" not in listener.texts(), listener.texts()
    assert "STOPPING=1" in listener.texts(), listener.texts()
    assert procs.wait_gone(baseline, 5.0) == {}


async def test_a_sighup_while_the_files_load_is_one_reload_not_the_end(
    daemon_process: ProcessFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    """SIGHUP's default action ends a process; the daemon's loop handles it only once it runs.
    One sent while the files are still being read (here: the worker file is a FIFO, so the
    daemon is held inside its read until the test writes it) becomes a reload once it runs."""
    topic = await kafka_topic(partitions=1)
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    connector = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    p = daemon_process(worker, [connector], start=False)
    content = p.worker_file.read_bytes()
    regular = p.worker_file.with_suffix(".regular")
    regular.write_bytes(content)
    p.worker_file.unlink()
    os.mkfifo(p.worker_file)
    p.start()

    def reader_opened() -> int | None:
        try:
            return os.open(p.worker_file, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody reads it yet
            return None

    fd: int | None = None

    def opened() -> bool:
        nonlocal fd
        fd = reader_opened()
        return fd is not None

    await wait_until(opened, 60.0, "the daemon reading its worker file")
    assert fd is not None
    p.signal(signal.SIGHUP)  # the daemon is inside its read of worker.properties
    try:
        os.set_blocking(fd, True)
        os.write(fd, content)
    finally:
        os.close(fd)
    os.replace(regular, p.worker_file)  # the reload reads a plain file again
    await asyncio.to_thread(p.wait_rest, 90.0)
    await wait_until(
        lambda: "Reloaded the configuration" in p.log_path.read_text(), 60.0, "the reload"
    )
    assert p.proc is not None and p.proc.poll() is None, p.log()
    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60.0) == 0, p.log()
