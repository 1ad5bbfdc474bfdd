"""A worker that joins a group with another ``config.storage.topic`` (issue 33): the group's
leader gives it no work and names the group's topics; it exits 78 naming both sets and the
group, in seconds, not after 60 s with a guess about the coordinator; the healthy worker's
tasks keep running, the same incarnations (nothing moved or restarted). Real processes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from support.cluster import (
    ClusterFactory,
    ClusterWorker,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
)
from support.kafka import delete_topic
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration


def _running(w: ClusterWorker) -> dict[str, Any] | None:
    s = w.status("echo")
    if s is None or s["connector"]["state"] != "RUNNING" or len(s["tasks"]) != 2:
        return None
    return s if all(t["state"] == "RUNNING" for t in s["tasks"]) else None


async def test_a_worker_keeping_other_topics_is_refused_by_the_group(
    cluster: ClusterFactory,  # noqa: F811
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
) -> None:
    topic = await kafka_topic(partitions=2)
    c = await cluster(n=1)
    config = {"connector.class": "EchoSink", "topics": topic, "tasks.max": "2"}
    code, body = await c.write(c[0], "POST", "/connectors", {"name": "echo", "config": config})
    assert code == 201, body
    [before] = await c.wait(_running, 90, "echo's tasks RUNNING")
    other = f"{c.names.config_topic}-other"
    odd = c.add(config_storage_topic=other)
    try:
        began = time.monotonic()
        odd.start()
        assert odd.proc is not None
        rc = await asyncio.to_thread(odd.proc.wait, 90)
        took = time.monotonic() - began
        log = odd.log()
        assert rc == 78, log
        assert f"group {c.names.group!r} keeps its configs" in log, log
        assert ", ".join(c.names.topics) in log and other in log, log
        assert took < 30, f"refused after {took:.1f} s"
        [after] = await c.wait(_running, 30, "echo's tasks RUNNING", workers=[c[0]])
        assert [t["incarnation"] for t in after["tasks"]] == [
            t["incarnation"] for t in before["tasks"]
        ], "the healthy worker's tasks were restarted"
        assert {t["worker_id"] for t in after["tasks"]} == {c[0].worker_id}
    finally:
        await delete_topic(kafka_bootstrap, other)
