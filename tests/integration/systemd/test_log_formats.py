"""The daemon's stderr as log shippers and journald read it, from a real process:

- ``log.format=json``: every line parses as one JSON object (the executors' Spark/JVM output is
  relayed through logging too), and the task's lines carry ``connector`` and ``task``;
- ``$JOURNAL_STREAM`` naming stderr: the text lines carry no time stamp (the journal adds its
  own), and start with the syslog priority.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

#: The executors' output is part of what these tests check, and an echo sink needs none: they
#: start with the daemon.
EAGER = {"executor.pool.start": "eager"}
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|\d\d/\d\d/\d\d \d\d:\d\d:\d\d")


def _executors_idle(p: DaemonProcess) -> bool:
    """The executor has started its JVM, so its output is in the log."""
    try:
        with urllib.request.urlopen(p.url + "/metrics", timeout=5.0) as response:
            text = response.read().decode()
    except OSError:
        return False
    found = re.findall(r'^connectd_executors\{state="idle"\} (\S+)$', text, re.M)
    return bool(found) and float(found[0]) >= 1


async def _run_echo(p: DaemonProcess, kafka_bootstrap: str, topic: str) -> str:
    """Records through an EchoSink (it logs them from its task), then SIGTERM; the log."""
    await asyncio.to_thread(p.wait_rest, 90.0)
    await produce(kafka_bootstrap, topic, 3)
    await wait_until(lambda: p.log_path.read_text().count("received") >= 3, 30.0, "3 records")
    # The executors' JVMs have started: their own output is part of what is checked.
    await wait_until(
        lambda: asyncio.to_thread(_executors_idle, p), 120.0, "an idle executor", interval=0.5
    )
    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60.0) == 0, p.log()
    return p.log_path.read_text()


async def test_json_lines_parse_and_name_the_task(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    worker = worker_properties(
        kafka_bootstrap, tmp_path / "state", **EAGER, **{"log.format": "json"}
    )
    connector = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    p = daemon_process(worker, [connector], wait=False)
    log = await _run_echo(p, kafka_bootstrap, topic)
    docs: list[dict[str, Any]] = []
    for n, line in enumerate(log.splitlines(), 1):
        try:
            docs.append(json.loads(line))
        except ValueError:
            pytest.fail(f"line {n} is not JSON: {line!r}\n{log[-3000:]}")
    assert all({"time", "level", "logger", "message"} <= d.keys() for d in docs)
    # The task's lines: the connector's own code (EchoSink logs each record) and the runtime's.
    received = [d for d in docs if d["logger"] == "connectd.connectors.testing"]
    assert len([d for d in received if "received" in d["message"]]) >= 3, docs
    task_lines = received + [d for d in docs if d["logger"] == "connectd.task"]
    unnamed = [d for d in task_lines if (d.get("connector"), d.get("task")) != ("echo", 0)]
    assert not unnamed, unnamed
    print(f"\n{len(docs)} lines, all JSON; e.g.\n{json.dumps(received[0])}")
    executor_lines = [d for d in docs if d["logger"] == "connectd.executor"]
    print(f"{len(executor_lines)} relayed executor line(s)")


async def test_under_the_journal_text_lines_have_no_time_stamp(
    kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    worker = worker_properties(kafka_bootstrap, tmp_path / "state", **EAGER)
    connector = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    p = DaemonProcess(worker, [connector], tmp_path / "daemon")
    try:
        # journald hands a service its stream socket and names it in JOURNAL_STREAM; here the
        # log file stands in for it: same check (device and inode of stderr).
        p.log_path.touch()
        st = os.stat(p.log_path)
        p.env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        p.start()
        log = await _run_echo(p, kafka_bootstrap, topic)
    finally:
        p.kill_all()
    lines = log.splitlines()
    stamped = [x for x in lines if TIMESTAMP.search(x[:40])]
    assert not stamped, stamped
    ours = [x for x in lines if re.match(r"<[0-7]>(DEBUG|INFO|WARNING|ERROR|CRITICAL) ", x)]
    assert any("[echo|task-0]" in x and "received" in x for x in ours), lines
    print(f"\n{len(lines)} lines, {len(ours)} from connectd's logging, none stamped; e.g.")
    print("\n".join(ours[:3]))
