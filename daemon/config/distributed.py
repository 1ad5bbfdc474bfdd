"""Distributed mode's part of ``WorkerConfig``: Connect's keys for the group, its internal
topics and its rebalances (``group.id``, ``config.storage.topic`` …); each is required or
meaningful in distributed mode only."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict

from daemon.config import fields as f
from daemon.config.fields import setting

_GROUP = "Distributed mode"
_DISTRIBUTED_ONLY = "; distributed mode only, required there"


class DistributedSettings(BaseModel):
    """The distributed-mode part of ``WorkerConfig``."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    group_id: f.OptStr = setting(
        None,
        key="group.id",
        example="connect-cluster",
        group=_GROUP,
        description="The cluster this worker joins: workers with one group.id share the work"
        + _DISTRIBUTED_ONLY
        + ".",
    )
    config_storage_topic: f.OptStr = setting(
        None,
        key="config.storage.topic",
        example="connect-configs",
        group=_GROUP,
        description="Compacted one-partition topic of connector configs" + _DISTRIBUTED_ONLY + ".",
    )
    config_storage_replication_factor: f.TopicSetting = setting(
        3,
        key="config.storage.replication.factor",
        group=_GROUP,
        description="Replication factor if connectd creates the config topic.",
    )
    offset_storage_topic: f.OptStr = setting(
        None,
        key="offset.storage.topic",
        example="connect-offsets",
        group=_GROUP,
        description="Compacted topic of committed offsets" + _DISTRIBUTED_ONLY + ".",
    )
    offset_storage_replication_factor: f.TopicSetting = setting(
        3,
        key="offset.storage.replication.factor",
        group=_GROUP,
        description="Replication factor if connectd creates the offsets topic.",
    )
    offset_storage_partitions: f.TopicSetting = setting(
        25,
        key="offset.storage.partitions",
        group=_GROUP,
        description="Partitions if connectd creates the offsets topic.",
    )
    status_storage_topic: f.OptStr = setting(
        None,
        key="status.storage.topic",
        example="connect-status",
        group=_GROUP,
        description="Compacted topic of connector and task states" + _DISTRIBUTED_ONLY + ".",
    )
    status_storage_replication_factor: f.TopicSetting = setting(
        3,
        key="status.storage.replication.factor",
        group=_GROUP,
        description="Replication factor if connectd creates the status topic.",
    )
    status_storage_partitions: f.TopicSetting = setting(
        5,
        key="status.storage.partitions",
        group=_GROUP,
        description="Partitions if connectd creates the status topic.",
    )
    heartbeat_interval: f.Millis = setting(
        timedelta(milliseconds=3000),
        key="heartbeat.interval.ms",
        group=_GROUP,
        description="Heartbeat to the group coordinator.",
    )
    session_timeout: f.Millis = setting(
        timedelta(milliseconds=10000),
        key="session.timeout.ms",
        group=_GROUP,
        description="A worker silent for this long leaves the group; its work is reassigned.",
    )
    rebalance_timeout: f.Millis = setting(
        timedelta(milliseconds=60000),
        key="rebalance.timeout.ms",
        group=_GROUP,
        description="How long workers have to stop their tasks and rejoin during a rebalance.",
    )
    scheduled_rebalance_max_delay: f.Millis = setting(
        timedelta(milliseconds=300000),
        key="scheduled.rebalance.max.delay.ms",
        group=_GROUP,
        description="How long the work of a worker that left on purpose (SIGTERM, a rolling"
        " restart) stays reserved for it before it moves to the others.",
    )
    scheduled_rebalance_delay_crashed: f.Bool = setting(
        False,
        key="scheduled.rebalance.delay.crashed",
        group=_GROUP,
        description="true: a crashed worker's work waits scheduled.rebalance.max.delay.ms too,"
        " exactly as in Kafka Connect; false: it moves as soon as the group notices the crash.",
    )
    worker_sync_timeout: f.Millis = setting(
        timedelta(milliseconds=3000),
        key="worker.sync.timeout.ms",
        group=_GROUP,
        description="How long a worker tries to read the config log to its end before it gives"
        " up its work and rejoins.",
    )
    worker_unsync_backoff: f.Millis = setting(
        timedelta(milliseconds=300000),
        key="worker.unsync.backoff.ms",
        group=_GROUP,
        description="How long a worker that could not read the config log waits before it"
        " rejoins the group.",
    )
