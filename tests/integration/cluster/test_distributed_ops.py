"""Distributed mode, what an operator sees: a worker that leaves on purpose keeps its work
reserved (Connect's scheduled rebalance delay) and gets it back when it returns in time; a
worker that crashes has its work moved as soon as its session expires (connectd's difference
from Connect); every worker's /metrics and /health speak for the group.

Real ``connectd distributed`` processes on the session's broker; EchoSink tasks (no Spark write).
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from support.cluster import (
    Cluster,
    ClusterFactory,
    ClusterWorker,
    cluster,  # noqa: F401 (the fixture)
)

pytestmark = pytest.mark.integration

NAME = "echo"
SESSION_MS = 6000
DELAY_MS = 120_000  # long: a loaded machine restarts a worker slowly
GROUP = {  # echo sinks only: no worker starts an executor (executor.pool.start=auto)
    "session.timeout.ms": str(SESSION_MS),
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": str(DELAY_MS),
}


def _owners(worker: ClusterWorker) -> dict[int, tuple[str, str]] | None:
    code, body = worker.try_rest("GET", f"/connectors/{NAME}/status")
    if code != 200:
        return None
    return {t["id"]: (t["state"], t["worker_id"]) for t in body["tasks"]}


def _metric(worker: ClusterWorker, name: str) -> float | None:
    code, _ = worker.try_rest("GET", "/health")
    if code != 200:
        return None
    import urllib.request

    with urllib.request.urlopen(worker.url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


async def _spread(c: Cluster, tasks: int) -> dict[int, tuple[str, str]]:
    """Until every live worker shows all ``tasks`` RUNNING, on every live worker's id."""
    live = {w.worker_id for w in c if w.alive}

    def spread(w: ClusterWorker) -> Any:
        owners = _owners(w)
        if not owners or len(owners) != tasks:
            return None
        if any(state != "RUNNING" for state, _ in owners.values()):
            return None
        return owners if {o for _, o in owners.values()} == live else None

    values = await c.wait(spread, 120, f"{tasks} tasks RUNNING on every live worker")
    return dict(values[0])


async def test_leaving_on_purpose_reserves_work_and_a_crash_moves_it_at_once(
    cluster: ClusterFactory,  # noqa: F811
) -> None:
    c = await cluster(3, **GROUP)
    code, answer = await c.write(
        c[0],
        "POST",
        "/connectors",
        {"name": NAME, "config": {"connector.class": "EchoSink", "topics": NAME, "tasks.max": "6"}},
    )
    assert code == 201, answer
    owners = await _spread(c, 6)
    leaders = [w for w in c if _metric(w, "connectd_cluster_leader") == 1.0]
    assert len(leaders) == 1, [(_metric(w, "connectd_cluster_leader"), w.worker_id) for w in c]
    leader = leaders[0]
    follower = next(w for w in c if w is not leader)
    mine = sorted(t for t, (_, o) in owners.items() if o == follower.worker_id)
    assert mine, owners

    # A SIGTERM: its tasks stay reserved (UNASSIGNED) for the delay, nothing moves.
    follower.signal(signal.SIGTERM)
    follower.wait(60)
    left_at = time.monotonic()
    others = [w for w in c if w is not follower]

    def reserved(w: ClusterWorker) -> Any:
        o = _owners(w)
        return o if o and all(o[t][0] == "UNASSIGNED" for t in mine) else None

    await c.wait(reserved, 30, "the leaving worker's tasks UNASSIGNED", workers=others)
    # Still reserved well into the delay (polled: any move before then fails the test).
    while time.monotonic() - left_at < 5.0:
        for w in others:
            o = _owners(w)
            assert o is not None and all(o[t][0] == "UNASSIGNED" for t in mine), o
        await _pause()

    # Back within the delay: it gets exactly its tasks back.
    await c.start(follower)
    back = await _spread(c, 6)
    assert time.monotonic() - left_at < DELAY_MS / 1000, "came back too late to judge"
    assert sorted(t for t, (_, o) in back.items() if o == follower.worker_id) == mine, back

    # A SIGKILL of another non-leader: its tasks run elsewhere after the session timeout,
    # not after the delay.
    victim = next(w for w in c if w is not leader and w is not follower)
    theirs = sorted(t for t, (_, o) in back.items() if o == victim.worker_id)
    victim.signal(signal.SIGKILL)
    killed = time.monotonic()
    survivors = [w for w in c if w is not victim]

    def moved(w: ClusterWorker) -> Any:
        o = _owners(w)
        return (
            o
            if o and all(o[t][0] == "RUNNING" and o[t][1] != victim.worker_id for t in theirs)
            else None
        )

    await c.wait(moved, 60, "the crashed worker's tasks RUNNING elsewhere", workers=survivors)
    took = time.monotonic() - killed
    print(f"crash → tasks RUNNING elsewhere: {took:.1f} s (session {SESSION_MS} ms)")
    assert took < SESSION_MS / 1000 + 30, f"{took:.1f} s: the crashed worker's work waited"

    # Every worker's metrics speak for the group: one leader, the same generation.
    generations = {_metric(w, "connectd_cluster_generation") for w in survivors}
    assert len(generations) == 1 and None not in generations, generations
    assert sum(_metric(w, "connectd_cluster_leader") or 0 for w in survivors) == 1
    assert sum(_metric(w, "connectd_cluster_tasks") or 0 for w in survivors) == 6
    # Connect's worker-rebalance-metrics say the same.
    for w in survivors:
        epoch = _metric(w, "kafka_connect_worker_rebalance_epoch")
        assert epoch == _metric(w, "connectd_cluster_generation")
        completed = _metric(w, "kafka_connect_worker_rebalance_completed_rebalances_total")
        assert completed is not None and completed >= 2  # joined, then the crash's
        assert _metric(w, "kafka_connect_worker_rebalance_rebalancing") == 0
        since = _metric(w, "kafka_connect_worker_rebalance_time_since_last_rebalance_ms")
        assert since is not None and 0 <= since < 300_000
        longest = _metric(w, "kafka_connect_worker_rebalance_rebalance_max_time_ms")
        average = _metric(w, "kafka_connect_worker_rebalance_rebalance_avg_time_ms")
        assert longest is not None and average is not None and 0 <= average <= longest


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.2)  # the polling interval of the check above, not a synchronisation


LOGGER = "connectd.scopetest"


def _level(worker: ClusterWorker) -> str | None:
    code, body = worker.try_rest("GET", f"/admin/loggers/{LOGGER}")
    return body["level"] if code == 200 else None


async def test_a_cluster_scoped_log_level_reaches_every_worker_but_not_a_later_one(
    cluster: ClusterFactory,  # noqa: F811
) -> None:
    """``PUT /admin/loggers/{logger}?scope=cluster`` on any worker is Connect's 204 and a
    ``logger-cluster-`` record in the config topic: every worker sets the level when it reads
    it (the namespace and the loggers below it), the one that took the request included. As in
    Connect, a worker started afterwards does not apply levels written before it started."""
    c = await cluster(2, **GROUP)
    a, b = c[0], c[1]
    code, answer = await c.write(
        b, "PUT", f"/admin/loggers/{LOGGER}?scope=cluster", {"level": "trace"}
    )
    assert code == 204, answer
    await c.wait(lambda w: _level(w) == "TRACE", 30, f"{LOGGER} at TRACE on both workers")
    code, answer = await c.write(
        a, "PUT", f"/admin/loggers/{LOGGER}?scope=cluster", {"level": "LOUD"}
    )
    assert code == 404 and answer["message"] == "invalid log level 'LOUD'.", answer
    code, answer = await c.write(
        a, "PUT", f"/admin/loggers/{LOGGER}?scope=cluster", {"level": "ERROR"}
    )
    assert code == 204, answer
    await c.wait(lambda w: _level(w) == "ERROR", 30, f"{LOGGER} at ERROR on both workers")

    later = c.add(**GROUP)
    await c.start(later)
    # A level written once it runs reaches it too: it has read the log past its start.
    other = f"{LOGGER}.other"
    code, answer = await c.write(
        a, "PUT", f"/admin/loggers/{other}?scope=cluster", {"level": "WARN"}
    )
    assert code == 204, answer

    def warn(w: ClusterWorker) -> bool:
        code, body = w.try_rest("GET", f"/admin/loggers/{other}")
        return code == 200 and body["level"] == "WARN"

    await c.wait(warn, 60, f"{other} at WARN on all three workers")
    assert _level(later) != "ERROR"  # its own configuration's level, not the cluster's
    for w in (a, b):
        assert f"Logger {LOGGER} set to ERROR cluster-wide" in w.log_path.read_text()
    assert f"Logger {LOGGER} set to" not in later.log_path.read_text()
