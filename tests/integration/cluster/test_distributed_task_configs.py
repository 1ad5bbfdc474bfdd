"""Task configurations a connector changes while it runs reach every worker through the leader
(issue 33 item 2): the worker running the connector instance calls ``task_configs`` again when
the connector asks (``ConnectorContext.request_task_reconfiguration``), sends the new ones to
the leader (Connect's ``POST /connectors/{name}/tasks``), the leader writes them to the config
log with their commit record, and every worker runs its tasks with them: more tasks (a
rebalance spreads them), fewer, or the same count with new content. Real worker processes,
real broker; the connector (``support.reconfiguring.FileTasksSink``) needs no executor."""

from __future__ import annotations

from pathlib import Path
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


def _connector(topic: str, watched: Path) -> dict[str, str]:
    return {
        "connector.class": "support.reconfiguring:FileTasksSink",
        "topics": topic,
        "tasks.max": "4",
        "tasks.file": str(watched),
    }


def _running(w: ClusterWorker, name: str, n: int, generation: str) -> dict[str, Any] | None:
    """``name``'s status as ``w`` answers it once ``n`` tasks run with ``generation``."""
    status = w.status(name)
    code, tasks = w.try_rest("GET", f"/connectors/{name}/tasks")
    if status is None or code != 200:
        return None
    states = [t.get("state") for t in status.get("tasks", [])]
    generations = [t["config"].get("tasks.generation") for t in tasks]
    if states == ["RUNNING"] * n and generations == [generation] * n:
        return status
    return None


async def test_changed_task_configurations_go_through_the_leader_to_every_worker(
    kafka_topic: TopicFactory,
    cluster: ClusterFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=4)
    c = await cluster(2)
    names = ("grows-a", "grows-b")
    files = {name: tmp_path / name for name in names}
    for name in names:
        files[name].write_text("1")
        code, body = await c.write(
            c[0], "POST", "/connectors", {"name": name, "config": _connector(topic, files[name])}
        )
        assert code == 201, body
    seen = {
        name: (await c.wait(lambda w, n=name: _running(w, n, 1, "1"), 60, f"{name}: 1 task"))[0]
        for name in names
    }
    lead = await leader(c)
    # The assignor spreads connectors by count: one instance runs on the worker that does not
    # lead, and its configurations must travel through the leader.
    away = [n for n in names if seen[n]["connector"]["worker_id"] != lead.worker_id]
    assert away, f"both connector instances run on the leader {lead.worker_id}: {seen}"
    name = away[0]
    owner = c.by_id(seen[name]["connector"]["worker_id"])

    files[name].write_text("4")
    statuses = await c.wait(lambda w: _running(w, name, 4, "4"), 90, f"{name}: 4 tasks")
    workers = {t["worker_id"] for t in statuses[0]["tasks"]}
    assert workers == {w.worker_id for w in c}, statuses[0]  # spread over both workers
    assert "sending them to the leader" in owner.log(tail=None)
    assert f"Connector {name}: 4 task configuration(s) written" in lead.log()

    files[name].write_text("3")
    await c.wait(lambda w: _running(w, name, 3, "3"), 90, f"{name}: 3 tasks")
    # The other connector was not touched.
    other = next(n for n in names if n != name)
    await c.wait(lambda w: _running(w, other, 1, "1"), 10, f"{other} as it was")
    # Its instance may run on the leader, which writes its own request.
    files[other].write_text("2")
    await c.wait(lambda w: _running(w, other, 2, "2"), 90, f"{other}: 2 tasks")

    # The endpoint refuses what it cannot apply: an unknown connector; a body not a list.
    code, answer = lead.try_rest("POST", "/connectors/nope/tasks", [])
    assert code == 404, answer
    code, answer = lead.try_rest("POST", f"/connectors/{name}/tasks", {"a": "b"})
    assert code == 400 and "JSON array" in answer["message"], answer
