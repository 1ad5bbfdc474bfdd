"""The Spark master's own failures: down when the daemon starts (exit 69 naming
``executor.spark.master`` within ``executor.start.timeout.ms``, nothing left running), and down
for a while under a streaming connector (no record lost or doubled once it is back).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from support import procs
from support.daemon import DaemonFactory, ProcessFactory, wait_until, worker_properties
from support.kafka import free_port, produce
from support.kafka_fixtures import TopicFactory
from support.spark_cluster import SparkCluster, cluster_worker_settings
from support.spark_sinks import exactly_once_rows, parquet_sink
from support.tables import committed

from daemon.runtime.model import State

pytestmark = pytest.mark.integration


async def test_a_master_down_at_start_is_exit_69_naming_the_setting(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    master = f"spark://127.0.0.1:{free_port()}"  # nothing listens there
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"executor.spark.master": master, "executor.start.timeout.ms": "4000"},
    )
    sink = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    baseline = set(procs.live_descendants())
    began = time.monotonic()
    p = daemon_process(worker, [sink], wait=False)
    code = await asyncio.to_thread(p.wait, 60.0)
    took = time.monotonic() - began
    log = p.log()
    assert code == 69, log
    assert f"Spark master unreachable: executor.spark.master={master}" in log
    assert "executor.start.timeout.ms=4000" in log
    assert "Traceback" not in log
    # The deadline, plus the interpreter's start and the Kafka check; no executor was started.
    assert took < 4.0 + 20.0, took
    assert procs.wait_gone(baseline, 10.0) == {}
    print(f"\nmaster down: exit 69 after {took:.1f} s (deadline 4 s)")


@pytest.mark.timeout(600)
async def test_a_master_that_dies_under_a_stream_loses_nothing(
    spark_cluster: SparkCluster,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    """The master stops while a ParquetSink streams: the running application keeps writing.
    Then the executor is killed mid-write (a lost driver), so the task fails and is restarted
    on the schedule, and its new executor needs a new application the master is not there to
    grant. Once the master is back the stream resumes; every record is in the table once."""
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            **cluster_worker_settings(spark_cluster.url),
            "executor.pool.spares": "0",
            "executor.start.timeout.ms": "45000",
            "task.write.timeout.ms": "20000",
            "executor.spark.local.paths.shared": "true",
        },
    )
    daemon = await run_daemon(props)
    worker = daemon.herder
    assert worker is not None
    name = "through-master-loss"
    # Spark writes: they run on the cluster and last long enough to be caught in flight (a
    # pyarrow write, write.engine=auto's, takes milliseconds and needs no cluster).
    config = parquet_sink(
        topic, table, **{"errors.restart.backoff.max.ms": "2000", "write.engine": "spark"}
    )
    await worker.create_connector(name, config)
    await produce(kafka_bootstrap, topic, [(None, b"a%05d" % i) for i in range(300)])
    await wait_until(lambda: committed(table) >= 300, 240, "the first records committed")

    spark_cluster.halt_master()
    try:
        await produce(kafka_bootstrap, topic, [(None, b"b%05d" % i) for i in range(300)])
        # The running application keeps its executors while the master is away.
        await wait_until(lambda: committed(table) >= 600, 120, "writes while the master is down")
        await produce(kafka_bootstrap, topic, [(None, b"c%05d" % i) for i in range(300)])
        # SIGKILL the executor in the middle of a write: its task fails (ExecutorDied).
        pid = await wait_until(
            lambda: worker.task_status(name, 0).executor_pid, 60, "a write in flight", 0.005
        )
        os.kill(pid, signal.SIGKILL)

        def failed() -> object:
            status = worker.task_status(name, 0)
            restarted = status.auto_restart is not None and status.auto_restart.count >= 1
            return restarted and status

        status = await wait_until(failed, 200, "the task failed and restarted without a master")
        # A new incarnation needs an executor, and an executor a new application: none yet.
        assert committed(table) < 900
        print(f"\nwithout a master: task {status.state}, restarts {status.auto_restart}")
    finally:
        spark_cluster.resume_master()
    began = time.monotonic()
    await wait_until(lambda: committed(table) >= 900, 300, "caught up once the master is back")
    print(f"caught up {time.monotonic() - began:.1f} s after the master came back")
    assert worker.task_status(name, 0).state is State.RUNNING
    await exactly_once_rows(table, [(0, o) for o in range(900)])
