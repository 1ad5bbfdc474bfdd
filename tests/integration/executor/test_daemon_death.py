"""A daemon killed outright (SIGKILL) takes its executors and their JVMs with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.spark import alive, reap, walk_tree

from daemon.executor import handoff

pytestmark = pytest.mark.integration

VICTIM = Path(__file__).with_name("daemon_victim.py")


def test_sigkilled_daemon_leaves_no_executor_or_jvm(tmp_path: Path) -> None:
    marker = tmp_path / "hanging"
    daemon = subprocess.Popen([sys.executable, str(VICTIM), str(marker), str(tmp_path)])
    try:
        deadline = time.monotonic() + 280
        while not marker.exists():
            assert daemon.poll() is None, f"the daemon exited: {daemon.returncode}"
            assert time.monotonic() < deadline, "the hung write never started"
            time.sleep(0.05)
        # Record every descendant of the daemon BEFORE killing it.
        tree = walk_tree(daemon.pid)
        tree.pop(daemon.pid)
        comms = sorted(s.comm for s in tree.values())
        assert comms.count("java") == 2, comms  # executor + spare
        assert int(marker.read_text()) in tree  # the UDF's Python worker

        os.kill(daemon.pid, signal.SIGKILL)
        killed = time.monotonic()
        daemon.wait()
        while (left := alive(tree.values())) and time.monotonic() - killed < 5.0:
            time.sleep(0.01)
        took = time.monotonic() - killed
        reap(tree.values())
        assert left == [], f"alive 5 s after the daemon died: {[(s.pid, s.comm) for s in left]}"
        print(f"\n{len(tree)} executor processes gone {took:.3f} s after the daemon's SIGKILL")
        # The daemon's hand-off directory stays behind; the next daemon sweeps it.
        stale = tmp_path / "shm" / f"connectd-{daemon.pid}"
        assert stale.exists()
        assert handoff.sweep_stale(tmp_path / "shm") == [stale]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
