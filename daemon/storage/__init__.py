"""Durable state: the file sinks' exactly-once commit log, epochs, atomic file writes, the
standalone state file (``standalone``, ``statelock``), and distributed mode's Kafka-backed
stores (``daemon.storage.kafka``: internal topics, the config log, the status store; not yet
used by a running daemon).
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
