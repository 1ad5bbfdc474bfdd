"""A Spark master of another line than the installed pyspark's: refused at the daemon's start
(exit 69) and at each executor's start, naming both versions, instead of Spark's minute of
registration retries ending in "All masters are unresponsive! Giving up." and a stack trace.

The master here is a real one of another line: a pyspark of that line from another of the
project's venvs (make test-spark builds .venv-spark35 and .venv-spark40; .venv holds 4.1), so
these tests run under ``make test-spark`` (marker ``cross_line``), not ``make test``."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from support import procs
from support.daemon import ProcessFactory, worker_properties
from support.kafka_fixtures import TopicFactory
from support.spark_cluster import SparkCluster, cluster_spark_conf

from daemon import sparklines
from daemon.errors import ExecutorError
from daemon.executor import ExecutorPool

pytestmark = [pytest.mark.integration, pytest.mark.cross_line]

ROOT = Path(__file__).resolve().parents[3]
VENVS = (".venv", ".venv-spark35", ".venv-spark40")


def other_line() -> tuple[Path, str]:
    """A pyspark of another line than the installed one: its Spark home and version."""
    mine = sparklines.current().name
    for venv in VENVS:
        for home in sorted((ROOT / venv / "lib").glob("python3*/site-packages/pyspark")):
            found = re.search(
                r'__version__[^"\']*["\']([^"\']+)', (home / "version.py").read_text()
            )
            if found and sparklines.line_of(found.group(1)) != mine:
                return home, found.group(1)
    pytest.fail(
        f"no pyspark of a Spark line other than {mine} in {', '.join(VENVS)}:"
        " make spark-venv SPARK=3.5 builds one (make test-spark runs these tests)"
    )


@pytest.fixture(scope="module")
def other_cluster() -> Iterator[tuple[SparkCluster, str]]:
    home, version = other_line()
    cluster = SparkCluster(workers=1, worker_memory="512m", spark_home=home)
    unregister = procs.register_session_owner(cluster.pids)
    try:
        cluster.start()
        yield cluster, version
    finally:
        cluster.stop()
        unregister()


async def test_the_daemon_refuses_a_master_of_another_line_with_exit_69(
    other_cluster: tuple[SparkCluster, str],
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    cluster, version = other_cluster
    topic = await kafka_topic(partitions=1)
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "executor.spark.master": cluster.url,
            "executor.spark.master.ui.url": cluster.ui_url,
            "executor.start.timeout.ms": "30000",
        },
    )
    sink = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    baseline = set(procs.live_descendants())
    began = time.monotonic()
    p = daemon_process(worker, [sink], wait=False)
    code = await asyncio.to_thread(p.wait, 90.0)
    took = time.monotonic() - began
    log = p.log()
    assert code == 69, log
    assert f"Spark line mismatch: executor.spark.master={cluster.url} runs Spark {version}" in log
    assert f"pyspark {sparklines.installed_version()}" in log
    assert "Traceback" not in log
    assert procs.wait_gone(baseline, 10.0) == {}
    assert not cluster.active_apps()
    print(f"\nmaster of Spark {version}: exit 69 after {took:.1f} s")


async def test_an_executor_start_fails_at_once_naming_both_versions(
    other_cluster: tuple[SparkCluster, str],
    make_pool: Callable[..., Awaitable[ExecutorPool]],
) -> None:
    """The master of another line met by an executor (the master replaced under a running
    daemon): its start fails before any JVM, and a write waiting for it fails naming both."""
    cluster, version = other_cluster
    pool = await make_pool(
        spark_master=cluster.url,
        spark_master_ui=(cluster.ui_url,),
        spark_conf=cluster_spark_conf(),
        spares=0,
        acquire_timeout=20.0,
    )
    began = time.monotonic()
    with pytest.raises(ExecutorError) as info:
        await pool.run("mismatch-0", "daemon.executor.testing:whoami", timeout=60)
    took = time.monotonic() - began
    message = str(info.value)
    assert f"runs Spark {version}" in message, message
    assert f"pyspark {sparklines.installed_version()}" in message, message
    assert "Traceback" not in message
    assert not cluster.active_apps()  # it never registered
    status = pool.status()
    assert status.start_failures >= 1
    print(f"\nwrite failed after {took:.1f} s ({status.start_failures} failed start(s))")
