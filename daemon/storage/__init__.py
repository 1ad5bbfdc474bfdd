"""Durable state: the file sinks' exactly-once commit log, epochs, atomic file writes.

Later also the standalone state file and distributed mode's Kafka-backed stores.
"""

from __future__ import annotations

from daemon.storage.atomic import atomic_write, fsync_dir, publish_exclusive
from daemon.storage.commitlog import CommitLog, CommitRecord, DataFile
from daemon.storage.epochs import EpochStore

__all__ = [
    "CommitLog",
    "CommitRecord",
    "DataFile",
    "EpochStore",
    "atomic_write",
    "fsync_dir",
    "publish_exclusive",
]
