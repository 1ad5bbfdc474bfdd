"""The three internal topics of distributed mode: created if missing, refused if unusable.

As Connect does at start (``TopicAdmin.createOrFindTopics`` and
``KafkaTopicBasedBackingStore``'s cleanup-policy check):

- a missing topic is created compacted, with its partition count (the config topic always
  one; offsets 25 and status 5 by default) and replication factor; ``-1`` for either means the
  broker's default (``num.partitions`` / ``default.replication.factor``, read from a broker:
  aiokafka speaks CreateTopics v3, which predates ``-1``);
- an existing topic is checked, never changed: a ``cleanup.policy`` other than exactly
  ``compact`` (the log would lose configs, statuses or offsets to retention), or a config topic
  with more than one partition (the log's order would be lost), raises
  ``InternalTopicInvalid`` naming the topic, the worker setting that names it and the fix.

Two workers creating the same topic at once is fine: the loser sees TOPIC_ALREADY_EXISTS and
validates the winner's topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import for_code

from daemon.storage.kafka.errors import InternalTopicInvalid, StoreTimeout
from daemon.storage.kafka.tail import client_options

TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC = 3
BROKER_DEFAULT = -1


@dataclass(frozen=True)
class TopicSpec:
    """One internal topic: its name, the worker setting that names it (for messages), the
    partitions and replication factor to create it with (``-1``: the broker's default), and
    whether an existing topic must have exactly that partition count (the config topic)."""

    name: str
    setting: str
    partitions: int
    replication_factor: int
    exact_partitions: bool = False

    @property
    def setting_prefix(self) -> str:
        return self.setting.removesuffix(".topic")


def config_topic(name: str, replication_factor: int = 3) -> TopicSpec:
    return TopicSpec(name, "config.storage.topic", 1, replication_factor, exact_partitions=True)


def offsets_topic(name: str, partitions: int = 25, replication_factor: int = 3) -> TopicSpec:
    return TopicSpec(name, "offset.storage.topic", partitions, replication_factor)


def status_topic(name: str, partitions: int = 5, replication_factor: int = 3) -> TopicSpec:
    return TopicSpec(name, "status.storage.topic", partitions, replication_factor)


async def ensure_topics(
    bootstrap_servers: str | list[str],
    specs: Sequence[TopicSpec],
    *,
    timeout: float = 60.0,
    client_settings: Mapping[str, Any] | None = None,
) -> dict[str, bool]:
    """Create the missing topics of ``specs`` and validate the existing ones, within
    ``timeout`` seconds. Returns ``{name: created}``. Raises ``InternalTopicInvalid`` for an
    unusable existing topic, ``StoreTimeout`` past the deadline, aiokafka's error for a
    creation the broker refused (e.g. a replication factor above the number of brokers)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        request_timeout_ms=int(timeout * 1000),
        client_id="connectd-topics",
        **client_options(client_settings),
    )
    try:
        async with asyncio.timeout(timeout):
            await admin.start()
            created: dict[str, bool] = {}
            for spec in specs:
                created[spec.name] = await _ensure(admin, spec, time.monotonic() + timeout)
            return created
    except TimeoutError:
        names = ", ".join(s.name for s in specs)
        raise StoreTimeout(
            f"internal topics {names}: not created or checked within {timeout:g}s; is the "
            "broker up?"
        ) from None
    finally:
        await admin.close()


async def topic_settings(admin: AIOKafkaAdminClient, topic: str) -> dict[str, str] | None:
    """The topic's configuration as the broker reports it; ``None`` if it does not exist.
    (DescribeConfigs, unlike a Metadata request, never auto-creates the topic.)"""
    (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    (resource,) = response.to_object()["resources"]
    if resource["error_code"] == UNKNOWN_TOPIC:
        return None
    if resource["error_code"] != 0:
        raise for_code(resource["error_code"])(f"describing topic {topic!r}")
    return {e["config_names"]: e["config_value"] for e in resource["config_entries"]}


async def _ensure(admin: AIOKafkaAdminClient, spec: TopicSpec, deadline: float) -> bool:
    settings = await topic_settings(admin, spec.name)
    created = False
    if settings is None:
        created = await _create(admin, spec)
        settings = await topic_settings(admin, spec.name)
        while settings is None:  # created, not yet known to the broker we asked
            if time.monotonic() > deadline:
                raise TimeoutError
            await asyncio.sleep(0.1)
            settings = await topic_settings(admin, spec.name)
    partitions = await _wait_for_leaders(admin, spec.name, deadline)
    _validate(spec, settings, partitions)
    return created


async def _create(admin: AIOKafkaAdminClient, spec: TopicSpec) -> bool:
    partitions, replication = spec.partitions, spec.replication_factor
    if BROKER_DEFAULT in (partitions, replication):
        defaults = await _broker_defaults(admin)
        if partitions == BROKER_DEFAULT:
            partitions = int(defaults["num.partitions"])
        if replication == BROKER_DEFAULT:
            replication = int(defaults["default.replication.factor"])
    topic = NewTopic(
        spec.name, partitions, replication, topic_configs={"cleanup.policy": "compact"}
    )
    response = await admin.create_topics([topic])
    for _name, code, *rest in response.topic_errors:
        if code == TOPIC_ALREADY_EXISTS:  # another worker was first: validate its topic
            return False
        if code != 0:
            detail = rest[0] if rest and rest[0] else ""
            raise for_code(code)(
                f"{spec.setting}={spec.name}: creating it with {partitions} partition(s) and "
                f"replication factor {replication} failed: {detail} (set "
                f"{spec.setting_prefix}.replication.factor to at most the number of brokers)"
            )
    return True


async def _broker_defaults(admin: AIOKafkaAdminClient) -> dict[str, str]:
    cluster = await admin.describe_cluster()
    broker = str(cluster["brokers"][0]["node_id"])
    wanted: dict[str, Any] = {"num.partitions": None, "default.replication.factor": None}
    (response,) = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, broker, wanted)]
    )
    (resource,) = response.to_object()["resources"]
    return {e["config_names"]: e["config_value"] for e in resource["config_entries"]}


async def _wait_for_leaders(admin: AIOKafkaAdminClient, topic: str, deadline: float) -> int:
    """The partition count, once every partition has a leader (the topic exists: asking its
    metadata cannot auto-create it)."""
    while True:
        (meta,) = await admin.describe_topics([topic])
        parts = meta["partitions"]
        if meta["error_code"] == 0 and parts and all(p["leader"] >= 0 for p in parts):
            return len(parts)
        if time.monotonic() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.1)


def _validate(spec: TopicSpec, settings: Mapping[str, str], partitions: int) -> None:
    policy = settings.get("cleanup.policy", "")
    if {p.strip() for p in policy.split(",")} != {"compact"}:
        raise InternalTopicInvalid(
            spec.name,
            spec.setting,
            f"the topic has cleanup.policy={policy}, but it must be compact only, or records"
            " are lost to retention",
            f"Fix: kafka-configs.sh --alter --entity-type topics --entity-name {spec.name}"
            f" --add-config cleanup.policy=compact, or set {spec.setting} to a new topic name",
        )
    if spec.exact_partitions and partitions != spec.partitions:
        raise InternalTopicInvalid(
            spec.name,
            spec.setting,
            f"the topic has {partitions} partitions, but the config topic must have exactly"
            f" {spec.partitions}, so that every worker reads the configs in one order",
            "Kafka cannot remove partitions. Fix: set config.storage.topic to a new topic name"
            " (connectd creates it), or delete this topic and restart",
        )
