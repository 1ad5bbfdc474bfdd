"""Executors before work: a distributed worker about to join its group starts its executors
and waits until one can take a write, if the connectors the config log runs need them.

Without it a returning worker (a restart, a crash and its return) joined at once and the
assignor handed it tasks that then waited there for a JVM start (10-40 s here) with their
partitions, while the workers they came from had warm executors. A sink group whose member
waits for a JVM also rebalances around it. With it, the group's work goes on where it runs
until the worker can write; the worker's READY (systemd, ``GET /health``) comes that much later.
Past ``executor.start.timeout.ms`` it joins anyway and the first writes wait, as before.
``executor.pool.start=on-demand`` asks for no JVM before a write: nothing is waited for.
"""

from __future__ import annotations

import logging
import time

from daemon.config import WorkerConfig
from daemon.config.executors import PoolStart
from daemon.errors import ConnectdError
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.model import TargetState
from daemon.storage.kafka import ConfigSnapshot

log = logging.getLogger("connectd.herder")


def executor_needs(snapshot: ConfigSnapshot, env: RuntimeEnv) -> tuple[bool, frozenset[str], bool]:
    """Whether the connectors ``snapshot`` runs (not STOPPED) need executors, the table formats
    their sessions load, and whether they need a SparkSession from the start
    (``SinkConnector.needs_executors``, ``executor_formats``, ``executor_spark``)."""
    needs, formats, spark = False, frozenset[str](), False
    for name, config in snapshot.connectors.items():
        if snapshot.target_state(name) is TargetState.STOPPED:
            continue
        try:
            cls = env.registry.resolve(config.get("connector.class", ""))
        except ConnectdError:
            continue  # it fails where it runs, saying why
        if cls.needs_executors:
            needs, formats = True, formats | cls.executor_formats
            spark = spark or cls.executor_spark(config)
    return needs, formats, spark


async def warm_executors(config: WorkerConfig, snapshot: ConfigSnapshot, env: RuntimeEnv) -> None:
    """Start the executors and wait for one (see the module docstring); never raises for a
    start that fails or takes too long (the first write meets it)."""
    if config.executor_pool_start is PoolStart.ON_DEMAND:
        return
    needs, formats, spark = executor_needs(snapshot, env)
    if not needs:
        return
    began = time.monotonic()
    env.start_executors(formats, spark=spark)
    limit = config.executor_start_timeout.total_seconds()
    if await env.executors.ready(limit):
        log.info(
            "Executors ready in %.1f s; joining group %s", time.monotonic() - began, config.group_id
        )
    else:
        log.warning(
            "No executor ready after %.0f s (executor.start.timeout.ms); joining group %s"
            " anyway: the first writes of the tasks it takes wait for one",
            limit,
            config.group_id,
        )
