"""Kills on a real Spark standalone cluster: a write killed at its deadline or by a restart ends
its application on the master and every process the cluster ran for it.

Each executor is the driver of one application (client mode, ``connectd-executor-<pid>``). When
connectd kills the executor's tree, the driver is gone; the master must drop the application and
the workers must end its executor JVMs (and their Python workers). Counted here from the master's
JSON status and from the workers' process trees, within a bound measured and printed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

import aiohttp
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark_cluster import SparkCluster, cluster_worker_settings
from support.spark_sinks import (
    FirstIncarnationTask,
    exactly_once_rows,
    parquet_sink,
    staged_files,
)
from support.tables import committed

from daemon.connectors.api import SinkTask
from daemon.connectors.parquet import ParquetSinkConnector
from daemon.executor.process import read_stat

pytestmark = pytest.mark.integration

HERE = __name__

NAME = "sink-hang-connector"
#: Upper bounds asserted (measured here: see the printed timings and README).
APP_GONE_S = 10.0
EXECUTORS_GONE_S = 30.0


def cluster_worker(
    cluster: SparkCluster, bootstrap: str, state: Path, **extra: str
) -> dict[str, str]:
    return worker_properties(bootstrap, state, **{**cluster_worker_settings(cluster.url), **extra})


def app_of(cluster: SparkCluster, executor_pid: int) -> str | None:
    """The id of the running application whose driver is executor ``executor_pid``."""
    for app_id, name in cluster.active_apps().items():
        if name == f"connectd-executor-{executor_pid}":
            return app_id
    return None


async def wait_app_ended(cluster: SparkCluster, app_id: str) -> tuple[float, float]:
    """Seconds until ``app_id`` is no longer active on the master, and until none of its
    processes is left under the workers (both from now)."""
    began = time.monotonic()
    await wait_until(
        lambda: app_id not in cluster.active_apps(), APP_GONE_S, f"{app_id} gone from the master"
    )
    gone = time.monotonic() - began
    await wait_until(
        lambda: not cluster.app_executors(app_id),
        EXECUTORS_GONE_S,
        f"no process of {app_id} left on the workers",
    )
    return gone, time.monotonic() - began


@pytest.mark.spark_line
async def test_hang_demo_on_the_cluster_three_restarts(
    spark_cluster: SparkCluster,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    """The seed demo's hung task (HangSink) restarted 3 times through REST: after each 204
    the old executor is reaped, its application leaves the master and its cluster executors
    end; at most the new incarnation's application and the spare's stay."""
    topic = await kafka_topic(partitions=1)
    props = cluster_worker(
        spark_cluster,
        kafka_bootstrap,
        tmp_path / "state",
        **{"task.shutdown.graceful.timeout.ms": "1000", "task.write.timeout.ms": "600000"},
    )
    daemon = await run_daemon(props)
    base = daemon.rest_url
    assert base is not None
    timings: list[tuple[float, float, float]] = []
    async with aiohttp.ClientSession() as http:

        async def new_pid(old: int | None) -> int | None:
            """The task's executor once it runs and is not ``old``."""
            async with http.get(f"{base}/connectors/{NAME}/status") as resp:
                if resp.status != 200:
                    return None
                tasks = (await resp.json())["tasks"]
            pid = tasks[0].get("executor_pid") if tasks else None
            if tasks and tasks[0]["state"] == "RUNNING" and pid and pid != old:
                return int(pid)
            return None

        create = {
            "name": NAME,
            "config": {"connector.class": "HangSink", "tasks.max": "1", "topics": topic},
        }
        async with http.post(f"{base}/connectors", json=create) as resp:
            assert resp.status == 201, await resp.text()
        pid = await wait_until(lambda: new_pid(None), 240, "the hung task's executor")
        app = await wait_until(lambda: app_of(spark_cluster, pid), 60, "its application")
        assert spark_cluster.app_executors(app), "the application has no executor on a worker"
        for i in range(3):  # each checks the reap, the application and its processes gone
            began = time.monotonic()
            async with http.post(f"{base}/connectors/{NAME}/tasks/0/restart") as resp:
                assert resp.status == 204, await resp.text()
            took = time.monotonic() - began
            stat = read_stat(pid)
            assert stat is None, f"restart {i}: old executor {pid} not reaped: {stat}"
            gone, left = await wait_app_ended(spark_cluster, app)
            timings.append((took, gone, left))
            pid = await wait_until(lambda p=pid: new_pid(p), 240, f"restart {i}: the next executor")
            app = await wait_until(lambda p=pid: app_of(spark_cluster, p), 60, "its application")
            # The new incarnation's application and at most the pool's spare.
            assert len(spark_cluster.active_apps()) <= 2, spark_cluster.active_apps()
    print(
        "\nrestart → 204 / app gone from master / its cluster processes gone (s): "
        + "; ".join(f"{a:.2f}/{b:.2f}/{c:.2f}" for a, b, c in timings)
    )


class HangInUdfOnceTask(FirstIncarnationTask):
    """The first incarnation's write stages its files, then hangs in a UDF on the cluster."""

    first_write = "daemon.connectors.testing:write_staged_then_hang_in_udf"
    starts: ClassVar[dict[str, int]] = {}


class HangInUdfOnceSink(ParquetSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return HangInUdfOnceTask


async def test_parquet_write_hung_in_a_cluster_udf_is_killed_and_unpublished(
    spark_cluster: SparkCluster,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ParquetSink write stages its files, then hangs in a Python UDF on a cluster executor:
    at the write deadline the executor's tree is killed, the application and every process the
    cluster ran for it end (the UDF's Python worker too), nothing the write staged is published,
    and the restarted task writes each record exactly once."""
    n = 300
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, n)
    table = tmp_path / "table"
    marker = tmp_path / "udf.pid"
    monkeypatch.setenv("CONNECTD_HANG_MARKER", str(marker))  # executors inherit it
    props = cluster_worker(
        spark_cluster,
        kafka_bootstrap,
        tmp_path / "state",
        **{"task.write.timeout.ms": "30000", "executor.spark.local.paths.shared": "true"},
    )
    daemon = await run_daemon(props)
    worker = daemon.herder
    assert worker is not None
    name = "udf-hang"
    config = {
        **parquet_sink(topic, table, **{"errors.restart.max": "1"}),
        "flush.max.records": "100",
    }
    await worker.create_connector(name, {**config, "connector.class": f"{HERE}:HangInUdfOnceSink"})
    await wait_until(marker.exists, 240, "the UDF hanging on a cluster executor")
    udf_pid = int(marker.read_text())
    executor_pid = worker.task_status(name, 0).executor_pid
    assert executor_pid is not None
    app = app_of(spark_cluster, executor_pid)
    assert app is not None, spark_cluster.active_apps()
    assert udf_pid in spark_cluster.app_executors(app), "the UDF does not run on the cluster"
    assert staged_files(table), "the hung write staged nothing"
    assert committed(table) == 0
    # The deadline kills the executor: the application and its cluster processes end.
    await wait_until(lambda: read_stat(executor_pid) is None, 90, "the deadline's kill")
    gone, left = await wait_app_ended(spark_cluster, app)
    stat = read_stat(udf_pid)  # a zombie kept by its Spark worker (tests only) has ended
    assert stat is None or not stat.running, "the UDF's Python worker outlived its application"
    await wait_until(lambda: committed(table) >= n, 240, "the restarted task caught up")
    await exactly_once_rows(table, [(0, o) for o in range(n)])
    await wait_until(
        lambda: staged_files(table) == [], 30, "the killed write's staged files deleted"
    )
    print(f"\nafter the deadline: app gone {gone:.2f} s, its cluster processes gone {left:.2f} s")
