"""Nothing but writers on a user's cluster: the class-data-sharing archive builder (JDK < 19)
runs in local mode, so the only application an executor pool registers on the master is its
writer's, ``connectd-executor-<pid>``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support.daemon import wait_until
from support.spark import spark_settings
from support.spark_cluster import SparkCluster, cluster_spark_conf

from daemon.executor import ExecutorPool, cds

pytestmark = [pytest.mark.integration, pytest.mark.spark_line]

T = "daemon.executor.testing"


@pytest.mark.timeout(600)
async def test_the_archive_builder_takes_nothing_on_the_cluster(
    spark_cluster: SparkCluster,
    make_pool: Callable[..., Awaitable[ExecutorPool]],
    tmp_path: Path,
) -> None:
    conf = cluster_spark_conf()
    cds_dir = tmp_path / "cds"
    plan = cds.plan(cds_dir, spark_settings(spark_conf=conf).base_conf())
    assert plan is not None, "no JDK found"
    if plan.auto:
        pytest.skip("JDK 19+ maintains its archive itself: no builder runs")
    before = {a["id"] for a in _apps(spark_cluster)}
    pool = await make_pool(
        spark_master=spark_cluster.url,
        spark_conf=conf,
        spares=0,
        cds_dir=cds_dir,
        cds_build=True,
    )
    writer = await pool.run("archive-0", f"{T}:whoami", timeout=240)
    # The warm pool builds the archive in the background; it is installed only once the
    # builder has exited (the JVM dumps it at its exit).
    await wait_until(plan.ready, 400, "the archive built", interval=0.5)
    apps = [a for a in _apps(spark_cluster) if a["id"] not in before]
    assert [a["name"] for a in apps] == [f"connectd-executor-{writer['pid']}"], apps


def _apps(cluster: SparkCluster) -> list[dict[str, Any]]:
    """Every application the master knows, running or ended."""
    status = cluster.status()
    return [*status.get("activeapps", ()), *status.get("completedapps", ())]
