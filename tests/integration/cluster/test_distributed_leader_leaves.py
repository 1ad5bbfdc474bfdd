"""A leader that leaves on purpose keeps its work reserved, as a follower does (issue 33 item 2):
its ``status-left-`` record says what it ran, so the new leader holds that work for
``scheduled.rebalance.max.delay.ms`` instead of moving it at once, and gives it back when the
worker returns (a rolling restart moves nothing). Real worker processes; EchoSink tasks."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest
from support.cluster import (
    ClusterFactory,
    ClusterWorker,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
)
from support.cluster_audit import leader
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

DELAY_MS = 20_000


def _tasks(w: ClusterWorker) -> list[dict[str, Any]] | None:
    s = w.status("echo")
    return s["tasks"] if s is not None and len(s["tasks"]) == 3 else None


async def test_a_leaving_leaders_work_is_reserved_and_comes_back(
    cluster: ClusterFactory,  # noqa: F811
    kafka_topic: TopicFactory,
) -> None:
    topic = await kafka_topic(partitions=3)
    c = await cluster(n=3, scheduled_rebalance_max_delay_ms=str(DELAY_MS))
    config = {"connector.class": "EchoSink", "topics": topic, "tasks.max": "3"}
    code, body = await c.write(c[0], "POST", "/connectors", {"name": "echo", "config": config})
    assert code == 201, body

    def spread(w: ClusterWorker) -> list[dict[str, Any]] | None:
        tasks = _tasks(w)
        ok = tasks and all(t["state"] == "RUNNING" for t in tasks)
        return tasks if ok and len({t["worker_id"] for t in tasks}) == 3 else None

    await c.wait(spread, 120, "one task RUNNING on each worker")
    boss = await leader(c)
    others = [w for w in c if w is not boss]
    [tasks, _] = await c.wait(spread, 30, "the placement", workers=others)
    theirs = sorted(t["id"] for t in tasks if t["worker_id"] == boss.worker_id)
    assert theirs
    boss.signal(signal.SIGTERM)
    assert boss.proc is not None
    assert await asyncio.to_thread(boss.proc.wait, 60) == 0
    left = time.monotonic()

    def held(w: ClusterWorker) -> list[dict[str, Any]] | None:
        tasks = _tasks(w)
        if tasks is None:
            return None
        mine = [t for t in tasks if t["id"] in theirs]
        rest = [t for t in tasks if t["id"] not in theirs]
        if any(t["state"] != "RUNNING" for t in rest):
            return None
        return tasks if all(t["state"] == "UNASSIGNED" for t in mine) else None

    await c.wait(held, 30, "the leader's tasks UNASSIGNED, the others RUNNING", workers=others)
    # Reserved, not moved: they stay unassigned for as long as the delay runs (checked on
    # every poll; a move would show them RUNNING on another worker).
    while time.monotonic() - left < DELAY_MS / 2000:
        for w in others:
            tasks = _tasks(w)
            assert tasks is not None
            moved = [t for t in tasks if t["id"] in theirs and t["state"] == "RUNNING"]
            assert not moved, f"the leader's tasks moved at once: {moved}"
        await asyncio.sleep(0.5)
    boss.start()  # back on the same URL within the delay: its work comes back to it
    await c.ready(boss)

    def back(w: ClusterWorker) -> list[dict[str, Any]] | None:
        tasks = spread(w)
        if tasks is None:
            return None
        mine = {t["id"] for t in tasks if t["worker_id"] == boss.worker_id}
        return tasks if mine == set(theirs) else None

    await c.wait(back, DELAY_MS / 1000 + 30, "the leader's tasks back on it")
