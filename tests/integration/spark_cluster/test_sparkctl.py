"""dev/spark/sparkctl.py (``make spark-up`` / ``make spark-down``) as a user runs it: up prints the
master URL and is idempotent, status says what runs, down ends every process it started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import procs
from support.kafka import free_port
from support.spark_cluster import SparkCluster, sparkctl

pytestmark = pytest.mark.integration

SPARKCTL = Path(sparkctl.__file__)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SPARKCTL), *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_up_again_reuses_the_running_cluster(spark_cluster: SparkCluster) -> None:
    before = spark_cluster.cluster
    again = sparkctl.up(
        before.port, before.ui_port, spark_cluster.run_dir, workers=spark_cluster.workers
    )
    assert again.pids() == before.pids()
    status = _run("status", "--port", str(before.port), "--dir", str(spark_cluster.run_dir))
    assert status.returncode == 0, status.stderr
    assert f"master pid {before.master_pid}" in status.stdout


def test_up_then_down_from_the_command_line_leaves_nothing(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    run_dir = tmp_path / "cluster"
    where = ["--port", str(port), "--ui-port", str(ui), "--dir", str(run_dir)]
    baseline = set(procs.live_descendants())
    try:
        up = _run("up", *where, "--workers", "1")
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"spark://127.0.0.1:{port}"
        status = sparkctl.master_status(ui)
        assert status["status"] == "ALIVE" and status["aliveworkers"] == 1
        pids = [int((run_dir / n).read_text()) for n in ("master.pid", "worker-1.pid")]
        assert all(sparkctl.is_alive(p) for p in pids)
    finally:
        down = _run("down", *where)
    assert down.returncode == 0, down.stderr
    assert not any(sparkctl.is_alive(p) for p in pids)
    assert _run("status", *where).returncode == 3
    # The launcher's and the daemons' processes were the CLI's children, now reaped.
    assert procs.wait_gone(baseline, 10.0) == {}
