"""pytest plugin: a real Spark standalone cluster (master + 2 workers on loopback) for the session.

Loaded from tests/conftest.py. The cluster is dev/spark/sparkctl.py's (Spark's own Master and
Worker classes from the pinned pyspark), on free ports in a temporary directory, stopped by PID
at session end. Its daemons and whatever they start (the applications' executor JVMs) are exempt
from the per-test leak check: tests that kill applications count those executors themselves
(``SparkCluster.app_executors``).

- ``spark_cluster`` (session): the running ``SparkCluster``; started on first use only.
- ``cluster_spark_conf()``: the Spark settings a test's executors need on it;
  ``cluster_worker_settings(url)``: the same as worker-config keys, with the master.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support import procs
from support.jvm import TEST_JAVA_OPTIONS
from support.kafka import free_port

_SPARKCTL_PATH = Path(__file__).resolve().parents[2] / "dev" / "spark" / "sparkctl.py"


def _load_sparkctl() -> ModuleType:
    name = "connectd_dev_sparkctl"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _SPARKCTL_PATH)
    assert spec is not None and spec.loader is not None, _SPARKCTL_PATH
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sparkctl = _load_sparkctl()


class SparkCluster:
    """A master and ``workers`` workers (1 core each) on free loopback ports, owned by this
    process; the daemons die with it (parent-death signal) if ``stop()`` is never called."""

    def __init__(
        self, workers: int = 2, worker_memory: str = "2g", spark_home: Path | None = None
    ) -> None:
        self.workers = workers
        self.worker_memory = worker_memory
        #: The Spark the cluster runs: the importable pyspark's unless given (another line's).
        self.spark_home = spark_home
        self.run_dir = Path(tempfile.mkdtemp(prefix="connectd-spark-"))
        self.cluster: Any = None

    @property
    def url(self) -> str:
        assert self.cluster is not None, "the cluster is not started"
        return str(self.cluster.url)

    @property
    def ui_url(self) -> str:
        """The master's web UI (its status JSON is under ``/json/``)."""
        assert self.cluster is not None, "the cluster is not started"
        return f"http://127.0.0.1:{self.cluster.ui_port}/"

    def pids(self) -> list[int]:
        return list(self.cluster.pids()) if self.cluster is not None else []

    def start(self) -> str:
        for attempt in range(3):
            try:
                self.cluster = sparkctl.up(
                    free_port(),
                    free_port(),
                    self.run_dir,
                    workers=self.workers,
                    worker_memory=self.worker_memory,
                    spark_home_dir=self.spark_home,
                    die_with_parent=True,
                )
                return self.url
            except sparkctl.SparkctlError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        try:
            sparkctl.down(self.run_dir)
        finally:
            self.cluster = None
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def halt_master(self) -> None:
        """Stop the master only (workers keep running and try to reconnect)."""
        pid = sparkctl.read_pid(self.run_dir / "master.pid", self.run_dir, "master")
        if pid is not None:
            sparkctl.kill_tree(pid, timeout=5.0)

    def resume_master(self) -> None:
        """Start the master again on the same ports; returns once every worker is back."""
        assert self.cluster is not None
        self.cluster = sparkctl.up(
            self.cluster.port,
            self.cluster.ui_port,
            self.run_dir,
            workers=self.workers,
            worker_memory=self.worker_memory,
            spark_home_dir=self.spark_home,
            die_with_parent=True,
        )

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, activeapps, completedapps)."""
        return dict(sparkctl.master_status(self.cluster.ui_port))

    def active_apps(self) -> dict[str, str]:
        """Running applications on the master: id -> name."""
        return {a["id"]: a["name"] for a in self.status().get("activeapps", ())}

    def app_executors(self, app_id: str | None = None) -> dict[int, str]:
        """Live processes the workers run for ``app_id`` (every application if None): the
        executor JVMs (their command line carries ``--app-id``) and what those started (the
        PySpark workers), as pid -> command line."""
        out: dict[int, str] = {}
        for worker in self.cluster.worker_pids:
            for pid in sparkctl.descendants(worker):
                cmd = _cmdline(pid)
                if cmd is not None and (app_id is None or app_id in cmd):
                    out[pid] = cmd
                    for below in sparkctl.descendants(pid):
                        if (text := _cmdline(below)) is not None:
                            out[below] = text
        return out


def _cmdline(pid: int) -> str | None:
    """The command line of a running process; None once it has ended (a zombie has none)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return argv.replace(b"\0", b" ").decode(errors="replace") or None


def cluster_spark_conf() -> dict[str, str]:
    """Spark settings of a test's executors on the session cluster: one core each (two
    applications fit the two workers: an executor and its spare), small memory, loopback."""
    return {
        "spark.ui.enabled": "false",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
        "spark.executor.extraJavaOptions": TEST_JAVA_OPTIONS,
    }


def cluster_worker_settings(master: str) -> dict[str, str]:
    """Worker-config keys of a test whose executors are drivers on ``master``:
    ``executor.spark.master``, a start timeout for slow starts on 2 cores, and
    ``cluster_spark_conf()`` as ``executor.spark.conf.*``."""
    conf = {f"executor.spark.conf.{k}": v for k, v in cluster_spark_conf().items()}
    return {"executor.spark.master": master, "executor.start.timeout.ms": "180000", **conf}


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    cluster = SparkCluster()
    unregister = procs.register_session_owner(cluster.pids)
    try:
        try:
            cluster.start()
        except sparkctl.ToolMissing as e:
            pytest.skip(f"no Spark cluster for this session: {e}")
        yield cluster
    finally:
        cluster.stop()
        unregister()
