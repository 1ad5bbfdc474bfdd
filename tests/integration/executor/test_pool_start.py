"""When a daemon's executors start (``executor.pool.start``), on real daemons, a real broker and
real Spark executors:

- ``auto`` (the default): a daemon whose connectors never call an executor (EchoSink), in
  standalone mode and in distributed mode, starts no executor process at all: its process tree,
  walked through /proc while its tasks consume records, has neither an executor nor a JVM, and
  its metrics say the pool has not started;
- ``auto``: a ParquetSink created through REST on a daemon that started with no connector
  starts the pool at once, so an executor is ready before the first record is even produced;
- ``on-demand``: a ParquetSink's task runs with no executor until its first write, which
  starts the pool and lands;
- ``executor.spark.session=on-demand`` (the default): a ParquetSink on a local path writes
  through executors without a JVM until a connector that needs Spark is added.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from support.cluster import (
    ClusterFactory,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
)
from support.daemon import (
    DaemonFactory,
    DaemonProcess,
    ProcessFactory,
    wait_until,
    worker_properties,
)
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import walk_tree
from support.tables import committed

from daemon.executor import ExecutorPool
from daemon.executor.info import PoolEventKind
from daemon.runtime.model import State

pytestmark = pytest.mark.integration

RECEIVED = re.compile(r": received \S+@\d+ key=")
#: How long a daemon that needs no executor is watched after its tasks consumed the records: an
#: ``auto`` start happens when a task is set up, long before.
QUIET = 3.0


def executor_processes(p: DaemonProcess) -> list[str]:
    """Executors (``daemon.executor.child``) and JVMs among ``p``'s descendants, from /proc."""
    found = []
    for pid in p.descendants():
        try:
            proc = psutil.Process(pid)
            name, cmd = proc.name(), " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if name == "java" or "daemon.executor.child" in cmd:
            found.append(f"{pid} {name}: {cmd[:100]}")
    return found


def metric(p: DaemonProcess, name: str) -> float | None:
    with urllib.request.urlopen(p.url + "/metrics", timeout=10.0) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found[1]) if found else None


def received(p: DaemonProcess) -> int:
    """Records the daemon's echo sinks logged (each logs every record it gets here)."""
    return len(RECEIVED.findall(p.log_path.read_text(errors="replace")))


async def watch_consumption(p: DaemonProcess, records: int, seen: list[str]) -> None:
    """Until the echo sinks logged ``records`` records, then ``QUIET`` seconds more, sampling
    ``p``'s process tree all along into ``seen``."""

    def consumed() -> bool:
        seen.extend(executor_processes(p))
        return received(p) >= records

    await wait_until(consumed, 120.0, f"{records} records echoed", interval=0.2)
    quiet_until = time.monotonic() + QUIET
    while time.monotonic() < quiet_until:
        seen.extend(await asyncio.to_thread(executor_processes, p))
        await asyncio.sleep(0.2)


def echo(name: str, topic: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "EchoSink",
        "topics": topic,
        "tasks.max": "2",
        "log.first.records": "1000",
    }


async def test_a_standalone_daemon_of_echo_sinks_starts_no_executor(
    daemon_process: ProcessFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=2)
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    assert "executor.pool.start" not in worker  # the default: auto
    p = daemon_process(worker, [echo("echo-a", topic), echo("echo-b", topic)])
    seen = executor_processes(p)
    config = {k: v for k, v in echo("echo-rest", topic).items() if k != "name"}
    code, body = p.rest("POST", "/connectors", {"name": "echo-rest", "config": config})
    assert code == 201, body
    sent = await produce(kafka_bootstrap, topic, 10)
    await watch_consumption(p, 3 * sent, seen)
    assert seen == [], f"executor processes under a daemon of echo sinks: {sorted(set(seen))}"
    assert metric(p, "connectd_executor_pool_started") == 0.0
    assert metric(p, 'connectd_executors{state="starting"}') == 0.0
    for name in ("echo-a", "echo-b", "echo-rest"):
        code, status = p.rest("GET", f"/connectors/{name}/status")
        assert code == 200 and [t["state"] for t in status["tasks"]] == ["RUNNING"] * 2, status
        assert all(t.get("executor_pid") is None for t in status["tasks"]), status
    assert "executor 1 started" not in p.log_path.read_text()
    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60.0) == 0, p.log()


async def test_a_distributed_worker_of_echo_sinks_starts_no_executor(
    cluster: ClusterFactory,  # noqa: F811
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
) -> None:
    topic = await kafka_topic(partitions=2)
    c = await cluster(1)
    (worker,) = c
    config = {k: v for k, v in echo("echo", topic).items() if k != "name"}
    code, body = await c.write(worker, "POST", "/connectors", {"name": "echo", "config": config})
    assert code == 201, body
    await c.task_owner("echo", 1)
    seen = executor_processes(worker)
    sent = await produce(kafka_bootstrap, topic, 10)
    await watch_consumption(worker, sent, seen)
    assert seen == [], f"executor processes under a worker of echo sinks: {sorted(set(seen))}"
    assert metric(worker, "connectd_executor_pool_started") == 0.0


def post(url: str, body: object) -> int:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30.0) as response:
        return int(response.status)


def own_pool(d: object) -> ExecutorPool:
    pool = getattr(d, "executors", None)
    assert isinstance(pool, ExecutorPool), "the daemon runs on a pool of its own"
    return pool


async def test_auto_a_parquet_sink_created_through_rest_starts_the_pool_before_its_first_write(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"))
    pool = own_pool(d)
    assert not pool.status().started and pool.pids() == []
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
    }
    created = time.time()
    assert d.rest_url is not None
    code = await asyncio.to_thread(
        post, d.rest_url + "/connectors", {"name": "pq", "config": config}
    )
    assert code == 201
    # At once, with no record in the topic: the executors start (the first one alone).
    await wait_until(lambda: pool.status().idle >= 1, 240.0, "an executor ready")
    status = pool.status()
    assert status.started and status.writes_done == 0
    assert [e for e in pool.events.snapshot() if e.kind is PoolEventKind.LEASED] == []
    first = pool.snapshot()[0]
    assert created <= first.started_at
    produced = time.time()
    sent = await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: committed(table) == sent, 240.0, f"{sent} offsets committed")
    lease = next(e for e in pool.events.snapshot() if e.kind is PoolEventKind.LEASED)
    assert lease.task_id == "pq-0" and lease.executor == first.id
    assert first.startup_seconds is not None
    assert first.started_at + first.startup_seconds <= produced  # ready before any record


async def test_on_demand_the_first_write_starts_the_pool(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    props = worker_properties(
        kafka_bootstrap, tmp_path / "state", **{"executor.pool.start": "on-demand"}
    )
    parquet = {
        "name": "pq",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
    }
    d = await run_daemon(props, connectors=[parquet])
    pool = own_pool(d)
    herder = d.herder
    assert herder is not None
    await wait_until(
        lambda: herder.task_status("pq", 0).state is State.RUNNING, 60.0, "task pq-0 running"
    )
    await asyncio.sleep(QUIET)  # the task polls an empty topic: nothing needs an executor
    assert not pool.status().started and pool.pids() == []
    sent = await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: committed(table) == sent, 240.0, f"{sent} offsets committed")
    status = pool.status()
    assert status.started and status.writes_done >= 1
    leases = [e for e in pool.events.snapshot() if e.kind is PoolEventKind.LEASED]
    assert leases and leases[0].task_id == "pq-0" and leases[0].executor == 1


async def test_a_parquet_sink_writes_without_a_jvm_until_a_connector_needs_spark(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    """``executor.spark.session=on-demand`` (the default): a ParquetSink on a local path writes
    through executors that opened no SparkSession (each executor's tree is one Python process:
    no JVM, no PySpark worker); a ParquetSink added through REST whose files Spark writes
    (format json) makes the pool open sessions: the executors without one are recycled, and
    both connectors commit every record once."""
    first, second = await kafka_topic(partitions=1), await kafka_topic(partitions=1)
    arrow_table, spark_table = tmp_path / "arrow", tmp_path / "spark"
    parquet = {
        "name": "pq",
        "connector.class": "ParquetSink",
        "topics": first,
        "path": str(arrow_table),
        "flush.interval.ms": "500",
    }
    d = await run_daemon(
        worker_properties(kafka_bootstrap, tmp_path / "state"), connectors=[parquet]
    )
    pool = own_pool(d)
    sent = await produce(kafka_bootstrap, first, 200)
    await wait_until(lambda: committed(arrow_table) == sent, 120.0, f"{sent} offsets committed")
    light = pool.snapshot()
    assert light and all(not e.spark and e.java_pid is None for e in light)
    assert all(set(walk_tree(e.pid)) <= {e.pid} for e in light)
    assert pool.status().recycles == 0

    json_sink = {
        "connector.class": "ParquetSink",
        "topics": second,
        "path": str(spark_table),
        "format": "json",
        "flush.interval.ms": "500",
    }
    assert d.rest_url is not None
    code = await asyncio.to_thread(
        post, d.rest_url + "/connectors", {"name": "js", "config": json_sink}
    )
    assert code == 201
    more = await produce(kafka_bootstrap, first, 200)
    other = await produce(kafka_bootstrap, second, 200)
    await wait_until(lambda: committed(spark_table) == other, 240.0, f"{other} JSON offsets")
    await wait_until(lambda: committed(arrow_table) == sent + more, 120.0, "the rest committed")
    assert all(e.pid not in {x.pid for x in pool.snapshot()} for e in light)  # all replaced
    recycled = [e for e in pool.events.snapshot() if e.kind is PoolEventKind.RECYCLED]
    assert {e.pid for e in recycled} >= {e.pid for e in light}
    await wait_until(
        lambda: any(e.spark and e.java_pid for e in pool.snapshot()), 60.0, "a session open"
    )
    assert all(e.spark for e in pool.snapshot() if e.state in ("idle", "busy"))
