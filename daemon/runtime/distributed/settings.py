"""Distributed mode's settings, from the worker's: the internal topics to ensure and the
group member's (Connect's names in, milliseconds and URLs out)."""

from __future__ import annotations

from typing import Any

from daemon.cluster import MemberSettings, Policy
from daemon.config import WorkerConfig
from daemon.storage.kafka import TopicSpec, config_topic, offsets_topic, status_topic


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def topic_specs(c: WorkerConfig) -> tuple[TopicSpec, TopicSpec, TopicSpec]:
    """The config, offsets and status topics with the settings to create them with."""
    assert c.config_storage_topic and c.offset_storage_topic and c.status_storage_topic
    return (
        config_topic(c.config_storage_topic, c.config_storage_replication_factor),
        offsets_topic(
            c.offset_storage_topic, c.offset_storage_partitions, c.offset_storage_replication_factor
        ),
        status_topic(
            c.status_storage_topic, c.status_storage_partitions, c.status_storage_replication_factor
        ),
    )


def member_settings(
    c: WorkerConfig, bootstrap: str, url: str, client: dict[str, Any]
) -> MemberSettings:
    assert c.group_id and c.config_storage_topic
    return MemberSettings(
        group_id=c.group_id,
        bootstrap_servers=bootstrap,
        topic=c.config_storage_topic,
        url=url,
        session_timeout_ms=_ms(c.session_timeout.total_seconds()),
        heartbeat_interval_ms=_ms(c.heartbeat_interval.total_seconds()),
        rebalance_timeout_ms=_ms(c.rebalance_timeout.total_seconds()),
        policy=Policy(
            max_delay_ms=_ms(c.scheduled_rebalance_max_delay.total_seconds()),
            delay_crashed=c.scheduled_rebalance_delay_crashed,
        ),
        client=client,
        storage=storage_topics(c),
    )


def storage_topics(c: WorkerConfig) -> tuple[str, str, str]:
    """The config, offset and status topics a worker keeps its cluster's state in."""
    return (
        c.config_storage_topic or "",
        c.offset_storage_topic or "",
        c.status_storage_topic or "",
    )
