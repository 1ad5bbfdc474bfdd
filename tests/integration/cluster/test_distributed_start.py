"""``connectd distributed worker.properties`` at start: the files and topics it refuses (exit 78,
the message naming what is wrong), the internal topics it creates when missing (with Connect's
settings), and two workers of one group that see each other's connectors.

Real processes on the session's broker; each test has a group and topics of its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from support.cli import connectd
from support.cluster import (
    ClusterFactory,
    ClusterNames,
    ClusterWorker,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
    distributed_properties,
)
from support.daemon import wait_until, write_properties
from support.kafka import create_topic, free_port
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

EX_CONFIG = 78


@pytest.mark.parametrize(
    "key", ["group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"]
)
def test_a_file_without_a_required_key_exits_78_naming_it(
    key: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    names = ClusterNames.unique("missing", "0")
    props = distributed_properties(kafka_bootstrap, tmp_path / "state", free_port(), names)
    del props[key]
    done = connectd("distributed", write_properties(tmp_path / "worker.properties", props))
    assert done.returncode == EX_CONFIG, done.stderr
    assert f"{key}: required key is missing in distributed mode" in done.stderr


async def _exit_code(worker: ClusterWorker, within: float = 120.0) -> int:
    worker.start()
    try:
        return await asyncio.to_thread(worker.wait, within)
    except Exception as e:  # still running: the teardown ends it
        raise AssertionError(f"the worker did not exit within {within} s:\n{worker.log()}") from e


async def test_a_config_topic_with_three_partitions_is_refused(
    cluster: ClusterFactory,  # noqa: F811
    kafka_bootstrap: str,
) -> None:
    c = await cluster(1, start=False)
    topic = c.names.config_topic
    await create_topic(kafka_bootstrap, topic, 3, config={"cleanup.policy": "compact"})
    assert await _exit_code(c[0]) == EX_CONFIG, c[0].log()
    last = _last_word(c[0])
    assert f"config.storage.topic={topic}" in last, last
    assert "3 partitions" in last and "exactly 1" in last, last


async def test_a_config_topic_that_deletes_records_is_refused(
    cluster: ClusterFactory,  # noqa: F811
    kafka_bootstrap: str,
) -> None:
    c = await cluster(1, start=False)
    topic = c.names.config_topic
    await create_topic(kafka_bootstrap, topic, 1, config={"cleanup.policy": "delete"})
    assert await _exit_code(c[0]) == EX_CONFIG, c[0].log()
    last = _last_word(c[0])
    assert f"config.storage.topic={topic}" in last, last
    assert "cleanup.policy=delete" in last, last


def _last_word(worker: ClusterWorker) -> str:
    """The CLI's message at exit: the last line on stderr, which starts with "connectd:"."""
    lines = [ln for ln in worker.log_path.read_text().splitlines() if ln.startswith("connectd:")]
    assert lines, f"no 'connectd:' line at exit:\n{worker.log()}"
    return lines[-1]


async def _topics(bootstrap: str, names: list[str]) -> dict[str, tuple[int, int, str]]:
    """Each existing topic of ``names``: (partitions, replication factor, cleanup.policy)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = {}
        for meta in await admin.describe_topics(names):
            if meta["error_code"] != 0 or not meta["partitions"]:
                continue
            name = meta["topic"]
            (response,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name)]
            )
            (resource,) = response.to_object()["resources"]
            config = {e["config_names"]: e["config_value"] for e in resource["config_entries"]}
            parts = meta["partitions"]
            found[name] = (len(parts), len(parts[0]["replicas"]), config["cleanup.policy"])
        return found
    finally:
        await admin.close()


async def test_missing_internal_topics_are_created_compacted(
    cluster: ClusterFactory,  # noqa: F811
    kafka_bootstrap: str,
) -> None:
    c = await cluster(1, **{"offset.storage.partitions": "3", "status.storage.partitions": "2"})
    n = c.names
    want = {
        n.config_topic: (1, 1, "compact"),
        n.offset_topic: (3, 1, "compact"),
        n.status_topic: (2, 1, "compact"),
    }
    got = await wait_until(
        lambda: _all_there(kafka_bootstrap, list(want)), 30, "the three internal topics"
    )
    assert got == want


async def _all_there(bootstrap: str, names: list[str]) -> dict[str, tuple[int, int, str]] | None:
    found = await _topics(bootstrap, names)
    return found if len(found) == len(names) else None


async def test_two_workers_see_connectors_created_through_either(
    kafka_topic: TopicFactory,  # before the cluster: its topic outlives the workers
    cluster: ClusterFactory,  # noqa: F811
) -> None:
    topic = await kafka_topic(partitions=1)
    c = await cluster(2)
    for w in c:
        assert w.rest("GET", "/connectors") == (200, [])
    for name, via in (("echo-a", c[0]), ("echo-b", c[1])):
        config = {"connector.class": "EchoSink", "tasks.max": "1", "topics": topic}
        code, body = await c.write(via, "POST", "/connectors", {"name": name, "config": config})
        assert code == 201, body
        assert body["name"] == name and body["config"]["connector.class"] == "EchoSink"

    def both(w: ClusterWorker) -> bool:
        code, names = w.try_rest("GET", "/connectors")
        return code == 200 and sorted(names) == ["echo-a", "echo-b"]

    await c.wait(both, 60, "both connectors listed on every worker")
    for w in c:
        code, info = w.rest("GET", "/connectors/echo-a")
        assert code == 200 and info["config"]["topics"] == topic, info
    # Each task runs on one of the two, and both workers name the same one.
    ids = {w.worker_id for w in c}
    for name in ("echo-a", "echo-b"):
        owner, statuses = await c.task_owner(name, 0, 180)
        assert owner.worker_id in ids, statuses
