"""Issue 29 item 5: ``make demo`` never leaves its connectd running. SIGKILL to the demo (the
daemon's parent) kills the daemon with it (its parent-death signal), and with the daemon its
executors and REST front; SIGKILL to the ``make`` above the demo (a shell stands in for make
here) ends the demo as Ctrl-C does (its own parent-death signal is SIGTERM), which stops the
daemon cleanly. Either way nothing is left running (the leak check), and the REST port is free.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from support.daemon import ROOT
from support.kafka import free_port

pytestmark = pytest.mark.integration


def _daemon_of(demo: psutil.Process, deadline: float) -> psutil.Process:
    while time.monotonic() < deadline:
        for child in demo.children(recursive=True):
            try:
                if child.cmdline()[1:4] == ["-m", "daemon", "standalone"]:
                    return child
            except psutil.Error:
                continue
        time.sleep(0.1)
    raise AssertionError("the demo started no connectd")


def _answers(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/connectors", timeout=2) as r:
                if json.loads(r.read()) == ["parquet-sink"]:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"connectd's REST API at {url} never listed the demo's connector")


def _reap_orphans_since(since: float, deadline_s: float) -> None:
    """Reap this process's children started after ``since`` (``time.time()``) as each ends:
    a SIGKILLed daemon's descendants come to this test, a subreaper, including one it was
    still starting when it died; they end by their own parent-death signals."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        late = [c for c in psutil.Process().children() if c.create_time() >= since - 1.0]
        if not late:
            return
        for child in late:
            with contextlib.suppress(psutil.Error, ChildProcessError):
                if child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, 0)
        time.sleep(0.05)


@pytest.mark.parametrize("killed", ["demo", "its parent"])
def test_a_killed_demo_ends_its_daemon(kafka_bootstrap: str, tmp_path: Path, killed: str) -> None:
    port = free_port()
    demo_cmd = [
        sys.executable,
        str(ROOT / "dev" / "demo.py"),
        "--bootstrap",
        kafka_bootstrap,
        "--rest-port",
        str(port),
        "--records",
        "10",
        "--dir",
        str(tmp_path / "demo"),
    ]
    # "its parent": a shell that stays (it has a command after the demo), as make does.
    command = demo_cmd if killed == "demo" else ["sh", "-c", '"$@"; true', "sh", *demo_cmd]
    started = time.time()
    top = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        daemon = _daemon_of(psutil.Process(top.pid), deadline)
        demo = daemon.parent()
        assert demo is not None
        _answers(f"http://127.0.0.1:{port}", deadline)
        top.send_signal(signal.SIGKILL)
        top.wait(10)
        if killed == "demo":
            # Killed outright with the demo (its parent-death signal is SIGKILL): re-parented
            # to this test (a subreaper), it is reaped here, and so are its executors and REST
            # front, which die with it by their own parent-death signals.
            assert daemon.wait(60) == -signal.SIGKILL
            _reap_orphans_since(started, deadline_s=30)
        else:
            # The demo ends as on Ctrl-C: connectd stops cleanly on SIGTERM, and the demo
            # (re-parented to this test) reaps it.
            assert demo.wait(60) == 128 + signal.SIGTERM
            log = (tmp_path / "demo" / "connectd.log").read_text()
            assert "SIGTERM received: shutting down" in log, log[-3000:]
            assert "connectd stopped in" in log, log[-3000:]
        # The port is free again: a listener can bind it.
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as connectd's listener
            s.bind(("127.0.0.1", port))
    finally:
        for p in (top,):
            if p.poll() is None:
                p.kill()
                p.wait()
