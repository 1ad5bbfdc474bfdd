"""Changing a STOPPED connector's offsets while its consumer group still has a member (real broker).

A stopped connector's tasks may still be leaving the group (finishing a last write on another
worker), and while a member remains only members may commit: Connect then fails the request at
once. connectd waits for the group to empty, then changes the offsets; a member that never
leaves (a zombie) ends the wait at its deadline with Connect's message, naming the member, and
nothing is changed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from support.daemon import wait_until
from support.kafka_fixtures import TopicFactory

from daemon.config import WorkerConfig
from daemon.connectors.testing import EchoSinkConnector
from daemon.errors import Conflict
from daemon.runtime import offsets as offsets_api
from daemon.runtime.model import SinkOffset

pytestmark = pytest.mark.integration


@asynccontextmanager
async def _member(bootstrap: str, name: str, topic: str) -> AsyncIterator[AIOKafkaConsumer]:
    """A consumer in the connector's group, as a task that has not left yet."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=offsets_api.group_id(name),
        client_id=f"lingering-{name}",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        await wait_until(lambda: bool(consumer.assignment()), 60, "the member's assignment")
        yield consumer
    finally:
        await consumer.stop()


async def _members(worker: WorkerConfig, name: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=list(worker.bootstrap_servers))
    await admin.start()
    try:
        return await offsets_api._group_members(admin, offsets_api.group_id(name))
    finally:
        await admin.close()


async def test_an_alter_waits_for_the_last_member_then_commits(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(partitions=1)
    name = f"leaving-{uuid.uuid4().hex[:8]}"  # the broker is the session's: a group of its own
    worker = WorkerConfig.model_validate({"bootstrap.servers": kafka_bootstrap})
    wanted = [SinkOffset(topic, 0, 7)]
    async with _member(kafka_bootstrap, name, topic) as consumer:
        assert await _members(worker, name) == [f"lingering-{name}"]
        alter = asyncio.ensure_future(
            offsets_api.alter_offsets(worker, name, EchoSinkConnector(), {}, wanted)
        )
        done, _ = await asyncio.wait({alter}, timeout=2.0)
        assert not done, "the alter went ahead while a member was in the group"
        assert consumer.assignment()
    await asyncio.wait_for(alter, 60)
    found = await offsets_api.group_offsets(worker, name)
    assert {(tp.topic, tp.partition): o for tp, o in found.items()} == {(topic, 0): 7}


async def test_a_member_that_stays_ends_the_wait_with_connects_message_and_nothing_changes(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(partitions=1)
    name = f"zombie-{uuid.uuid4().hex[:8]}"
    worker = WorkerConfig.model_validate({"bootstrap.servers": kafka_bootstrap})
    async with _member(kafka_bootstrap, name, topic):
        with pytest.raises(Conflict) as caught:
            await offsets_api.wait_until_group_empty(worker, name, "alter", timeout=2.0)
        assert caught.value.status == 500
        message = str(caught.value)
        assert message.startswith(
            f"Failed to alter consumer group offsets for connector {name} either because its"
            " tasks haven't stopped completely yet"
        )
        assert f"lingering-{name}" in message and "safely retried" in message
        with pytest.raises(Conflict, match="Failed to reset consumer group offsets"):
            await offsets_api.wait_until_group_empty(worker, name, "reset", timeout=0.5)
    assert await offsets_api.group_offsets(worker, name) == {}
    # Once the member has left, the same request goes through.
    await offsets_api.reset_offsets(worker, name, EchoSinkConnector(), {})
