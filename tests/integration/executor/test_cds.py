"""The class-data-sharing archive on real JVMs: an archive the JVM rejects under the expected
name (it was built for jars since reinstalled, or is corrupt; the JVM falls back silently) is
noticed, replaced and then used; one rejected again is given up for the pool's lifetime."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from support.daemon import wait_until
from support.spark import spark_settings

from daemon.executor import ExecutorPool, cds

pytestmark = pytest.mark.integration

T = "daemon.executor.testing"
LOG = "connectd.executor"


def _plant_bad_archive(path: Path) -> None:
    """What the JVM rejects as it rejects an archive of other jars: no valid header."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # archives are installed read-only
    path.write_bytes(b"\0" * 65536)


async def test_a_rejected_archive_is_replaced_then_used_and_a_second_rejection_ends_its_use(
    make_pool: Callable[..., Awaitable[ExecutorPool]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cds_dir = tmp_path / "cds"
    plan = cds.plan(cds_dir, spark_settings().base_conf())
    assert plan is not None, "no JDK found"
    if plan.auto:
        pytest.skip("JDK 19+ maintains its archive itself (-XX:+AutoCreateSharedArchive)")
    _plant_bad_archive(plan.archive)
    caplog.set_level(logging.INFO, logger=LOG)
    pool = await make_pool(spares=0, cds_dir=cds_dir, cds_build=True)

    first = await pool.run("cds-0", f"{T}:whoami", timeout=240)
    [ex] = pool.snapshot()
    assert ex.pid == first["pid"] and not ex.uses_cds  # given the archive, started without it
    assert cds.mapped(first["java_pid"], str(plan.archive)) is False
    assert "rejected the class-data-sharing archive" in caplog.text

    # The pool, warm again, replaces the archive in the background.
    await wait_until(
        lambda: plan.ready() and plan.archive.stat().st_size > 1 << 20,
        400,
        "the replacement archive",
        interval=0.5,
    )
    assert [p for p in cds_dir.iterdir() if p.name.endswith(".tmp")] == []

    # An executor started now maps it.
    assert await pool.recycle_idle("test: use the new archive") == 1
    second = await pool.run("cds-0", f"{T}:whoami", timeout=240)
    [ex] = pool.snapshot()
    assert ex.pid == second["pid"] != first["pid"]
    assert ex.uses_cds and cds.mapped(second["java_pid"], str(plan.archive)) is True

    # The replacement rejected too: the pool stops giving executors an archive.
    _plant_bad_archive(plan.archive)
    assert await pool.recycle_idle("test: a bad archive again") == 1
    third = await pool.run("cds-0", f"{T}:whoami", timeout=240)
    [ex] = pool.snapshot()
    assert ex.pid == third["pid"] and not ex.uses_cds
    assert "rejected the rebuilt class-data-sharing archive" in caplog.text
    assert pool.status().cds_archive is None  # no executor is given one from now on
    assert os.path.getsize(plan.archive) == 65536  # nor is it rebuilt again and again
