"""The internal topics on a real broker: created with Connect's settings when missing, refused
with a message that says what to fix when an existing one is unusable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from support.kafka import delete_topic, unique_topic_name
from support.kafka_fixtures import TopicFactory

from daemon.errors import ConfigError
from daemon.storage.kafka import (
    InternalTopicInvalid,
    config_topic,
    ensure_topics,
    offsets_topic,
    status_topic,
)
from daemon.storage.kafka.topics import topic_settings

pytestmark = pytest.mark.integration


@pytest.fixture
async def fresh_names(
    kafka_bootstrap: str, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[[str], str]]:
    """Names of topics that do not exist yet; whatever got created under them is deleted."""
    names: list[str] = []

    def make(hint: str) -> str:
        names.append(unique_topic_name(f"{request.node.name}-{hint}"))
        return names[-1]

    yield make
    for name in names:
        await delete_topic(kafka_bootstrap, name)


async def _describe(bootstrap: str, topic: str) -> tuple[int, dict[str, str]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        settings = await topic_settings(admin, topic)
        assert settings is not None, f"{topic} does not exist"
        (meta,) = await admin.describe_topics([topic])
        return len(meta["partitions"]), settings
    finally:
        await admin.close()


async def test_missing_topics_are_created_compacted_with_connects_partition_counts(
    kafka_bootstrap: str, fresh_names: Callable[[str], str]
) -> None:
    config, offsets, status = fresh_names("config"), fresh_names("offsets"), fresh_names("status")
    specs = [
        config_topic(config, replication_factor=1),
        offsets_topic(offsets, replication_factor=-1),  # -1: the broker's default (here 1)
        status_topic(status, replication_factor=1),
    ]
    created = await ensure_topics(kafka_bootstrap, specs, timeout=30)
    assert created == {config: True, offsets: True, status: True}
    for name, partitions in ((config, 1), (offsets, 25), (status, 5)):
        count, settings = await _describe(kafka_bootstrap, name)
        assert (name, count, settings["cleanup.policy"]) == (name, partitions, "compact")
    # A second worker starting finds them in order and creates nothing.
    again = await ensure_topics(kafka_bootstrap, specs, timeout=30)
    assert again == {config: False, offsets: False, status: False}


async def test_a_config_topic_with_three_partitions_is_refused(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(3, config={"cleanup.policy": "compact"})
    with pytest.raises(InternalTopicInvalid) as info:
        await ensure_topics(kafka_bootstrap, [config_topic(topic, 1)], timeout=30)
    message = str(info.value)
    assert isinstance(info.value, ConfigError)  # the CLI's exit 78
    assert f"config.storage.topic={topic}" in message
    assert "3 partitions" in message and "exactly 1" in message
    assert "new topic name" in message  # how to fix it
    # Offsets and status topics may have any number of partitions.
    assert await ensure_topics(kafka_bootstrap, [status_topic(topic, 5, 1)], timeout=30) == {
        topic: False
    }


@pytest.mark.parametrize("spec", [config_topic, offsets_topic, status_topic])
async def test_a_topic_with_cleanup_policy_delete_is_refused(
    kafka_bootstrap: str, kafka_topic: TopicFactory, spec: Callable[..., object]
) -> None:
    topic = await kafka_topic(1, config={"cleanup.policy": "delete"})
    made = spec(topic, replication_factor=1)
    with pytest.raises(InternalTopicInvalid) as info:
        await ensure_topics(kafka_bootstrap, [made], timeout=30)  # type: ignore[list-item]
    message = str(info.value)
    assert f"{info.value.setting}={topic}" in message
    assert info.value.setting.endswith(".storage.topic")
    assert "cleanup.policy=delete" in message and "compact" in message
    assert f"--entity-name {topic} --add-config cleanup.policy=compact" in message
    _, settings = await _describe(kafka_bootstrap, topic)
    assert settings["cleanup.policy"] == "delete"  # checked, never changed


async def test_compact_and_delete_together_is_refused_as_connect_does(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(5, config={"cleanup.policy": "compact,delete"})
    with pytest.raises(InternalTopicInvalid, match=r"cleanup\.policy=compact,delete"):
        await ensure_topics(kafka_bootstrap, [status_topic(topic, 5, 1)], timeout=30)
