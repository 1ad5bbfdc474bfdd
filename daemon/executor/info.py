"""What the pool shows about itself: per-executor records and a pool summary.

Plain frozen dataclasses, cheap to take from the event loop (``ExecutorPool.snapshot()``,
``ExecutorPool.status()``); the REST status API and the metrics exporter read them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ExecutorState(enum.StrEnum):
    STARTING = "starting"  # spawned; its SparkSession is not ready yet
    IDLE = "idle"  # ready, no write
    BUSY = "busy"  # leased to a write
    KILLED = "killed"  # the pool is killing and reaping its tree
    DEAD = "dead"  # ended on its own; the pool is reaping what is left of its tree


@dataclass(frozen=True)
class ExecutorInfo:
    """One executor process as the pool sees it.

    ``rss_bytes`` and ``tree_pids`` cover the whole tree (Python child, JVM, PySpark workers)
    and come from the last /proc sample (every ``sample_interval``), so they may lag.
    """

    id: int
    pid: int
    state: ExecutorState
    task_id: str | None
    writes_done: int
    last_write_seconds: float | None
    rss_bytes: int | None
    tree_pids: tuple[int, ...]
    java_pid: int | None
    started_at: float  # Unix time of the spawn
    startup_seconds: float | None  # spawn → ready
    uses_cds: bool
    reason: str | None = None  # why it is being killed, or how it died


@dataclass(frozen=True)
class PoolStatus:
    """The pool as a whole; ``problem`` says in words why it is short of executors, if it is."""

    size: int
    spares: int
    closed: bool
    starting: int
    idle: int
    busy: int
    stopping: int
    writes_done: int
    kills: int
    deaths: int
    start_failures: int
    failure_streak: int
    backoff_seconds: float
    problem: str | None
    cds_archive: str | None
