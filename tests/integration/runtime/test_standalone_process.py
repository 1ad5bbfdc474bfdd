"""``connectd standalone worker.properties hang-sink.properties`` as a real process, driven the
way the seed demo drives Kafka Connect: curl-like REST calls, then SIGTERM.

- ``POST /connectors/{c}/tasks/0/restart`` answers only after the old executor is reaped (its
  /proc entry gone; a zombie is not), and the status shows a larger ``incarnation`` and the new
  executor's pid; the daemon's log, whose pool lines carry monotonic times, shows for every
  restart the old executor reaped strictly before the next incarnation's executor was leased;
- a connector created at run time through REST is in the state file and comes back after a
  restart of the daemon, next to the one from the command line;
- SIGTERM, with a task hung in its write, ends the daemon within the graceful timeout (plus the
  kill and the pool's close) with exit code 0 and none of its processes left; a second SIGTERM
  during a shutdown forces the exit (code 1) after killing the executors.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

from daemon.executor.process import read_stat

pytestmark = pytest.mark.integration

BLOCK = re.compile(r"Starting to block in executor pid (\d+) for task sink-hang-connector-0")
NAME = "sink-hang-connector"
# The pool's lease and reap lines (``daemon.executor.supervisor``), with monotonic times.
POOL_EVENT = re.compile(
    r"executor \d+ \(pid (\d+)\) (reaped|leased to task (\S+)) at monotonic (\d+\.\d+)"
)
GRACEFUL_MS = 1000


def _blocks(p: DaemonProcess) -> list[int]:
    """Executor pids that blocked for task 0, in order (the executor and the daemon both log
    the line)."""
    found = [int(m) for m in BLOCK.findall(p.log_path.read_text(errors="replace"))]
    return list(dict.fromkeys(found))


def _more(p: DaemonProcess, seen: int) -> Callable[[], list[int]]:
    """A check for wait_until: the block pids once there are more than ``seen``."""

    def check() -> list[int]:
        found = _blocks(p)
        return found if len(found) > seen else []

    return check


def _gone(pid: int) -> bool:
    """Reaped: no /proc entry. A zombie (state Z) has ended but is not reaped: not gone."""
    return read_stat(pid) is None


def _orphan_gone(pid: int) -> bool:
    """For a daemon that exited: ``pid`` no longer runs. Its orphans were re-parented to this
    process (a subreaper), so a zombie among them is ours to reap, not the dead daemon's."""
    stat = read_stat(pid)
    if stat is not None and not stat.running and stat.ppid == os.getpid():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        stat = read_stat(pid)
    return stat is None


def _check_order(log: str, pids: list[int]) -> None:
    """From the daemon's log: task 0's leases and its executors' reaps alternate, lease(p0),
    reap(p0), lease(p1), ..., lease(pn), each reap strictly earlier than the next lease."""
    events: list[tuple[str, int, float]] = []
    for m in POOL_EVENT.finditer(log):
        pid, what, task, at = int(m[1]), m[2], m[3], float(m[4])
        if what == "reaped" and pid in pids:
            events.append(("reaped", pid, at))
        elif task == f"{NAME}-0":
            events.append(("leased", pid, at))
    want = [("leased", pids[0])]
    for old, new in itertools.pairwise(pids):
        want += [("reaped", old), ("leased", new)]
    assert [(kind, pid) for kind, pid, _ in events] == want, events
    for reap, lease in zip(events[1::2], events[2::2], strict=True):
        assert reap[2] < lease[2], f"executor {lease[1]} leased before {reap[1]} was reaped"


async def _sigterm(p: DaemonProcess, within: float) -> float:
    below = p.descendants()
    assert below, "the daemon has no executors"
    began = time.monotonic()
    p.signal(signal.SIGTERM)
    code = await asyncio.to_thread(p.wait, within)
    took = time.monotonic() - began
    assert code == 0, p.log()
    left = [pid for pid in below if not _gone(pid)]
    assert not left, f"processes left after SIGTERM: {left}"
    return took


async def test_rest_restart_of_a_hung_task_then_sigterm(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"task.shutdown.graceful.timeout.ms": str(GRACEFUL_MS)},
    )
    hang = {"name": NAME, "connector.class": "HangSink", "tasks.max": "1", "topics": topic}
    p = daemon_process(worker, [hang])

    pids = await wait_until(lambda: _blocks(p), 240, "task 0 blocked in its executor")
    for restart in range(2):
        old = pids[-1]
        status, body = p.rest("GET", f"/connectors/{NAME}/status")
        assert status == 200 and body["tasks"][0]["executor_pid"] == old
        incarnation = body["tasks"][0]["incarnation"]
        code, _ = await asyncio.to_thread(p.rest, "POST", f"/connectors/{NAME}/tasks/0/restart")
        assert code == 204
        assert _gone(old), f"restart {restart}: executor pid {old} not reaped: {read_stat(old)}"
        _, body = p.rest("GET", f"/connectors/{NAME}/status")
        assert body["tasks"][0]["incarnation"] > incarnation
        assert body["tasks"][0]["state"] == "RUNNING"
        pids = await wait_until(_more(p, len(pids)), 240, "the new incarnation blocked")
        assert pids[-1] != old
    log = p.log()
    _check_order(log, pids)
    assert f"timed out after {GRACEFUL_MS} ms; killed executor pid {pids[0]}" in log
    assert "reaped in" in log

    # A connector created at run time, then the daemon stopped while task 0 hangs.
    echo = {"connector.class": "EchoSink", "topics": topic}
    code, body = p.rest("POST", "/connectors", {"name": "echo", "config": echo})
    assert code == 201, body
    took = await _sigterm(p, within=30.0)
    assert took < GRACEFUL_MS / 1000 + 10.0, f"SIGTERM took {took:.1f} s"

    # Both connectors come back: the file's (re-applied) and the one created through REST.
    again = daemon_process(worker, [hang])
    code, names = again.rest("GET", "/connectors")
    assert code == 200 and sorted(names) == ["echo", NAME]
    code, info = again.rest("GET", "/connectors/echo")
    assert info["config"]["connector.class"] == "EchoSink"

    # A second SIGTERM during the shutdown forces the exit, executors killed first. (Task 0
    # hangs in its write, so the first SIGTERM's shutdown waits out the graceful timeout.)
    await wait_until(lambda: _blocks(again), 240, "task 0 blocked again")
    below = again.descendants()
    again.signal(signal.SIGTERM)
    # Signals of one kind coalesce until delivered: the second goes once the first was seen.
    await wait_until(lambda: "received: shutting down" in again.log(), 10, "the first SIGTERM")
    again.signal(signal.SIGTERM)
    assert await asyncio.to_thread(again.wait, 15.0) == 1
    await wait_until(
        lambda: all(map(_orphan_gone, below)), 10, "the forced daemon's processes gone"
    )
    assert "received again: killing every executor" in again.log()
