"""Exactly once on a real Spark standalone cluster: the SIGKILL audit (``support.exactly_once``;
here 11,000 records, 3 partitions, the daemon SIGKILLed twice) with
``executor.spark.master=spark://...``, plus a driver JVM and a cluster executor JVM SIGKILLed
from outside. After each daemon SIGKILL its applications must
leave the master and the workers must end every process of theirs.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from support.daemon import DaemonProcess, ProcessFactory, wait_until
from support.exactly_once import (
    PARTITIONS,
    audit,
    executors_gone,
    jvm_fault,
)
from support.kafka_fixtures import TopicFactory
from support.spark_cluster import SparkCluster, cluster_worker_settings

pytestmark = pytest.mark.integration

#: Each kind of fault once (ParquetSink's local audit repeats them over 20,000 records).
RECORDS = 11_000
WINDOWS = [
    ("daemon", 1_000, 3_000),
    ("jvm", 3_500, 5_000),
    ("cluster", 5_500, 7_000),
    ("daemon", 7_500, 9_000),
]


async def test_exactly_once_on_the_cluster_through_kills(
    spark_cluster: SparkCluster,
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=PARTITIONS)
    ended: list[float] = []

    async def cluster_fault(p: DaemonProcess) -> str:
        """SIGKILL an executor JVM the cluster runs for one of the daemon's applications (a
        lost node): Spark runs that application's tasks again on a new executor."""
        executors = {
            pid: cmd
            for pid, cmd in spark_cluster.app_executors().items()
            if "CoarseGrainedExecutorBackend" in cmd
        }
        assert executors, "no cluster executor to kill"
        victim = min(executors)
        os.kill(victim, signal.SIGKILL)
        return f"cluster executor JVM {victim} SIGKILL"

    async def apps_ended(below: list[int]) -> None:
        began = time.monotonic()
        await executors_gone(below)
        await wait_until(lambda: not spark_cluster.active_apps(), 15, "its applications gone")
        await wait_until(
            lambda: not spark_cluster.app_executors(), 30, "their cluster processes gone"
        )
        ended.append(time.monotonic() - began)

    await audit(
        daemon_process,
        kafka_bootstrap,
        topic,
        tmp_path,
        worker_extra={
            **cluster_worker_settings(spark_cluster.url),
            "executor.spark.local.paths.shared": "true",  # the workers run on this host
        },
        sink_extra={"write.engine": "spark"},  # the writes run on the cluster's executors
        windows=WINDOWS,
        records=RECORDS,
        faults={"jvm": jvm_fault, "cluster": cluster_fault},
        after_daemon_kill=apps_ended,
    )
    print(
        "daemon SIGKILL → its applications and their cluster processes gone: "
        + ", ".join(f"{t:.2f} s" for t in ended)
    )
    assert not spark_cluster.active_apps()
