"""Every worker answers the same status (issue 33 item 1): asked of a worker that does not run a
task, ``GET /connectors/{c}/status`` and ``/tasks/{n}/status`` carry the owner's live fields
(incarnation, epoch, executor pid, auto-restart) as the owner reports them, not nulls; in
Connect the status is the same from every worker. Real worker processes."""

from __future__ import annotations

from typing import Any

import pytest
from support.cluster import (
    ClusterFactory,
    ClusterWorker,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
)
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration


def _spread(w: ClusterWorker) -> dict[str, Any] | None:
    """The status once both tasks are RUNNING, one on each worker, with their incarnations."""
    s = w.status("echo")
    if s is None or len(s["tasks"]) != 2:
        return None
    tasks = s["tasks"]
    if any(t["state"] != "RUNNING" for t in tasks) or len({t["worker_id"] for t in tasks}) != 2:
        return None
    return s


async def test_every_worker_answers_the_same_status(
    cluster: ClusterFactory,  # noqa: F811
    kafka_topic: TopicFactory,
) -> None:
    topic = await kafka_topic(partitions=2)
    c = await cluster(n=2)
    config = {"connector.class": "EchoSink", "topics": topic, "tasks.max": "2"}
    code, body = await c.write(c[0], "POST", "/connectors", {"name": "echo", "config": config})
    assert code == 201, body

    def same(w: ClusterWorker) -> dict[str, Any] | None:
        mine = _spread(w)
        others = [_spread(o) for o in c if o is not w]
        if mine is None or any(o != mine for o in others):
            return None
        return mine

    [status, _] = await c.wait(same, 120, "both workers answering the same status")
    for task in status["tasks"]:
        assert isinstance(task["incarnation"], int) and isinstance(task["epoch"], int), task
        assert "auto_restart" in task, task
    for w in c:
        for task in status["tasks"]:
            code, one = w.rest("GET", f"/connectors/echo/tasks/{task['id']}/status")
            assert code == 200 and one == task, (w.worker_id, one, task)
