"""The status topic on a real broker: Connect's keys and values, and the putSafe rule that keeps
a zombie worker's late report from overwriting the current owner's."""

from __future__ import annotations

import json

import pytest
from support.kafka import consume_all
from support.kafka_fixtures import TopicFactory

from daemon.storage.kafka import Status, StatusReader, StatusWriter, StoreTimeout
from daemon.structs import State, TaskId

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


async def test_statuses_use_connects_keys_and_values(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(5, config=COMPACT)
    async with StatusWriter(topic, kafka_bootstrap) as writer:
        await writer.put_connector("s3", Status(State.RUNNING, "w1:8083", 3))
        await writer.put_task(TaskId("s3", 0), Status(State.FAILED, "w1:8083", 3, "Trace: boom"))
    raw = await consume_all(kafka_bootstrap, topic, 2)
    by_key = {r.key: json.loads(r.value) for r in raw if r.value is not None}
    assert by_key == {
        b"status-connector-s3": {
            "state": "RUNNING",
            "trace": None,
            "worker_id": "w1:8083",
            "generation": 3,
        },
        b"status-task-s3-0": {
            "state": "FAILED",
            "trace": "Trace: boom",
            "worker_id": "w1:8083",
            "generation": 3,
        },
    }


async def test_an_older_generation_from_another_worker_never_overwrites_a_newer_one(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(5, config=COMPACT)
    task = TaskId("s3", 0)
    async with (
        StatusWriter(topic, kafka_bootstrap) as writer,
        StatusReader(topic, kafka_bootstrap) as reader,
    ):
        await writer.put_task(task, Status(State.RUNNING, "w2", 7))  # the current owner
        await writer.put_task(task, Status(State.FAILED, "w1", 6, "zombie"))  # a late zombie
        snap = await reader.read_to_end(10)
        assert (snap.tasks[task].worker_id, snap.tasks[task].state) == ("w2", State.RUNNING)

        await writer.put_task(task, Status(State.PAUSED, "w2", 5))  # same worker: always applies
        snap = await reader.read_to_end(10)
        assert (snap.tasks[task].state, snap.tasks[task].generation) == (State.PAUSED, 5)

        await writer.put_task(task, Status(State.RUNNING, "w3", 8))  # a newer owner
        await writer.put_connector("s3", Status(State.RUNNING, "w3", 8))
        await writer.put_task(TaskId("s3", 1), Status(State.UNASSIGNED, "w1", 1))
        snap = await reader.read_to_end(10)
        assert snap.tasks[task].worker_id == "w3"
        assert set(snap.tasks_of("s3")) == {0, 1}
        assert snap.connectors["s3"].state is State.RUNNING

        await writer.put_connector("s3", None)  # a tombstone removes, whoever wrote last
        await writer.put_task(task, None)
        later = await reader.read_to_end(10)
        assert "s3" not in later.connectors and task not in later.tasks
        assert task in snap.tasks  # the older snapshot did not change


async def test_a_fresh_reader_applies_the_rule_to_the_whole_history(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    """A worker that starts later reads the same view as one that watched the records arrive."""
    topic = await kafka_topic(1, config=COMPACT)
    task = TaskId("c", 2)
    async with StatusWriter(topic, kafka_bootstrap) as writer:
        await writer.put_task(task, Status(State.RUNNING, "new", 10))
        await writer.put_task(task, Status(State.RUNNING, "zombie", 9))
    async with StatusReader(topic, kafka_bootstrap) as reader:
        snap = await reader.read_to_end(10)
        assert snap.tasks[task].worker_id == "new"
        with pytest.raises(StoreTimeout, match=topic):
            await reader.read_to_end(0)
