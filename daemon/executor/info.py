"""What the pool shows about itself: per-executor records and a pool summary.

Plain frozen dataclasses, cheap to take from the event loop (``ExecutorPool.snapshot()``,
``ExecutorPool.status()``); the REST status API and the metrics exporter read them.

``PoolEvents`` (``ExecutorPool.events``) records, with monotonic times, when an executor was
leased to a task's write, recycled (after a failed write, or to load a table format), and
reaped: the order of leases and reaps is the pool's half of the invariant (a task id's next
write goes to an executor only after the previous one's executor is reaped), and tests check
it from this record instead of inferring it.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

log = logging.getLogger("connectd.executor")


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
    formats: frozenset[str] = frozenset()  # table formats its session loaded (``formats.py``)
    spark: bool = True  # it opened a SparkSession (False: pyarrow only, ``spark_on_demand``)


@dataclass(frozen=True)
class PoolStatus:
    """The pool as a whole; ``problem`` says in words why it is short of executors, if it is."""

    size: int
    spares: int
    #: False until the pool starts (``executor.pool.start``): no executor exists or starts yet.
    started: bool
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
    recycles: int = 0  # replaced after a failed write (``PoolEventKind.RECYCLED``)
    aside: int = 0  # writes that ran long and stepped aside for other connectors' (``queue.py``)


class PoolEventKind(enum.StrEnum):
    LEASED = "leased"  # an executor was handed a write for ``task_id``
    REAPED = "reaped"  # waitpid returned for the executor and no process of its tree runs
    REAP_FAILED = "reap_failed"  # the kill ended with processes of the tree still running
    RECYCLED = "recycled"  # retired after a failed write or for a table format, to be replaced


@dataclass(frozen=True)
class PoolEvent:
    """One lease or reap. ``at`` is ``time.monotonic()`` when the pool recorded it: for a lease,
    before the write is sent; for a reap, after ``waitpid`` returned and the tree was confirmed
    gone (so a reap's ``at`` is never earlier than the reap itself). The clock is system-wide,
    comparable across threads and processes."""

    kind: PoolEventKind
    at: float
    executor: int
    pid: int
    task_id: str | None  # the task the executor was writing for, if any
    detail: str = ""


class PoolEvents:
    """The pool's most recent leases and reaps, in the order they happened (bounded). The
    pool records on its event loop; any thread may read (a lock guards the deque)."""

    def __init__(self, maxlen: int = 4096) -> None:
        self._events: deque[PoolEvent] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self._last_task: dict[int, str] = {}  # executor -> the task of its last lease

    def record(self, event: PoolEvent) -> None:
        with self._lock:
            self._events.append(event)

    def _now(
        self, kind: PoolEventKind, executor: int, pid: int, task_id: str | None, detail: str = ""
    ) -> float:
        at = time.monotonic()
        self.record(PoolEvent(kind, at, executor, pid, task_id, detail))
        return at

    def leased(self, executor: int, pid: int, task_id: str) -> None:
        """``executor`` is handed a write for ``task_id`` (recorded before the write is sent)."""
        at = self._now(PoolEventKind.LEASED, executor, pid, task_id)
        # Once per executor and task at INFO (a restarted task's first write shows in the log,
        # with the time to order it after the predecessor's reap); every write at DEBUG.
        first = self._last_task.get(executor) != task_id
        self._last_task[executor] = task_id
        log.log(
            logging.INFO if first else logging.DEBUG,
            "executor %d (pid %d) leased to task %s at monotonic %.6f",
            *(executor, pid, task_id, at),
        )

    def recycled(
        self, executor: int, pid: int, task_id: str | None, why: str, *, when: str | None = None
    ) -> None:
        """``executor`` is retired after a failed write, or (``when`` says) because its session
        lacks a table format the pool now loads; its reap follows as ``reaped``."""
        self._now(PoolEventKind.RECYCLED, executor, pid, task_id, why)
        when = when or f"after a failed write for task {task_id}"
        log.info("executor %d (pid %d) recycled %s: %s", executor, pid, when, why)

    def reaped(self, executor: int, pid: int, task_id: str | None, report: str) -> None:
        """``waitpid`` returned for ``executor`` and no process of its tree runs."""
        self._last_task.pop(executor, None)
        at = self._now(PoolEventKind.REAPED, executor, pid, task_id, report)
        log.info("executor %d (pid %d) reaped at monotonic %.6f: %s", executor, pid, at, report)

    def reap_failed(self, executor: int, pid: int, task_id: str | None, why: str) -> None:
        """The kill of ``executor`` ended with processes of its tree running, or not at all."""
        self._last_task.pop(executor, None)
        self._now(PoolEventKind.REAP_FAILED, executor, pid, task_id, why)

    def snapshot(self) -> list[PoolEvent]:
        with self._lock:
            return list(self._events)
