"""Distributed mode's Kafka-backed stores: the internal topics, the config log, the statuses.

- ``topics``: create the config, offsets and status topics if missing, refuse unusable ones.
- ``configlog``: the config log every worker reads (``read_committed`` snapshots) and only the
  leader writes (one transaction per write, fenced when a newer leader starts).
- ``statusstore``: connector and task statuses under Connect's putSafe generation rule.

Nothing here imports the runtime or the connectors: the daemon wires these in.
"""

from __future__ import annotations

from daemon.storage.kafka.configlog import ConfigLogReader, ConfigLogWriter, transactional_id
from daemon.storage.kafka.configrecords import ConfigLogState, ConfigSnapshot, RestartRequest
from daemon.storage.kafka.errors import (
    ConfigWriteFailed,
    InternalTopicInvalid,
    LeaderFenced,
    StoreTimeout,
    WriteOutcomeUnknown,
)
from daemon.storage.kafka.statusstore import (
    Departure,
    Status,
    StatusReader,
    StatusSnapshot,
    StatusView,
    StatusWriter,
)
from daemon.storage.kafka.topics import (
    TopicSpec,
    config_topic,
    ensure_topics,
    offsets_topic,
    status_topic,
)

__all__ = [
    "ConfigLogReader",
    "ConfigLogState",
    "ConfigLogWriter",
    "ConfigSnapshot",
    "ConfigWriteFailed",
    "Departure",
    "InternalTopicInvalid",
    "LeaderFenced",
    "RestartRequest",
    "Status",
    "StatusReader",
    "StatusSnapshot",
    "StatusView",
    "StatusWriter",
    "StoreTimeout",
    "TopicSpec",
    "WriteOutcomeUnknown",
    "config_topic",
    "ensure_topics",
    "offsets_topic",
    "status_topic",
    "transactional_id",
]
