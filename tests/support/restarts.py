"""Daemons whose automatic restarts run on a clock the test moves, and the restart counter
(``tests/integration/runtime/test_auto_restart.py``, ``test_spark_features.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from daemon.daemon import Daemon
from daemon.runtime.standalone import StandaloneHerder
from daemon.storage.standalone import MemoryStore
from support.clocks import ManualClock
from support.daemon import DaemonFactory, worker_properties
from support.spark import ThreadedPool


async def restart_daemon(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    tmp_path: Path,
    pool: ThreadedPool,
    *,
    store: MemoryStore | None = None,
    **props: str,
) -> tuple[Daemon, StandaloneHerder, ManualClock]:
    """An in-process daemon on ``pool`` whose connectors (created from now on) and their tasks
    take a ``ManualClock`` for their automatic restarts; the daemon, its herder, the clock."""
    properties = worker_properties(kafka_bootstrap, tmp_path / "state", **props)
    d = await run_daemon(properties, executors=pool, store=store)
    assert d.herder is not None
    # Connectors created from now on (and their tasks) take the test's clock.
    clock = ManualClock()
    d.herder.worker.env = replace(d.herder.worker.env, clock=clock)
    return d, d.herder, clock


def restart_metric(d: Daemon, name: str, cause: str) -> float:
    """``connectd_task_restarts_total`` of ``name`` for ``cause`` (0 if none yet)."""
    body, _ = d.metrics.render()
    for line in body.decode().splitlines():
        labels, _, value = line.partition("} ")
        if (
            labels.startswith("connectd_task_restarts_total{")
            and f'connector="{name}"' in labels
            and f'cause="{cause}"' in labels
        ):
            return float(value)
    return 0.0
