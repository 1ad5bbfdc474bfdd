"""What every part of the runtime knows about a task without holding its state: its settings
(pacing and every named deadline, ``TaskSettings``) and what it records (``TaskMetrics``).

Both outlive incarnations: a slot, its connector and the worker hold them; an incarnation is
given them when it is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from daemon.config import WorkerConfig
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.kafka.traffic import ClientTraffic
from daemon.runtime.incarnation.progress import Marks


class TaskMetrics(Protocol):
    """What the runtime records (``daemon.metrics.Metrics`` fits); calls never block.

    An incarnation is given its slot's ``SlotRecorder`` (``freshness.py``), which keeps the
    last three (what was delivered and committed, the log ends) for the task's freshness and
    stall, and passes every call on to the daemon's metrics."""

    def record_consumed(self, connector: str, task: int, count: int) -> None: ...

    def record_written(self, connector: str, task: int, count: int, seconds: float) -> None: ...

    def set_consumer_lags(
        self, connector: str, task: int, lags: Mapping[TopicPartition, int]
    ) -> None: ...

    def task_restarted(self, connector: str, task: int, cause: str) -> None: ...

    def record_offsets_skipped(
        self, connector: str, task: int, tp: TopicPartition, count: int
    ) -> None:
        """``count`` offsets of ``tp`` that were never delivered (deleted by retention before
        the task consumed them; ``errors.offset.out.of.range=earliest`` went on past them)."""
        ...

    def executor_killed(self, reason: str) -> None: ...

    def record_delivering(
        self,
        connector: str,
        task: int,
        ranges: Sequence[OffsetRange],
        marks: Marks,
    ) -> None:
        """A batch about to be handed to ``put``: its offset ranges (``PartitionProgress.begin``)
        and its records' offsets and timestamps (``progress.record_marks``)."""
        ...

    def record_committed(
        self, connector: str, task: int, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """What ``pre_commit`` returned: per partition, the next offset durable in the sink."""
        ...

    def set_log_ends(
        self, connector: str, task: int, ends: Mapping[TopicPartition, int | None]
    ) -> None:
        """After a poll: every assigned partition's end (highwater), ``None`` if not known."""
        ...

    def watch_client(self, traffic: ClientTraffic) -> None:
        """A task's consumer started: export its network figures until ``forget_client``."""
        ...

    def forget_client(self, traffic: ClientTraffic) -> None: ...

    def record_put(self, connector: str, task: int, records: int, seconds: float) -> None:
        """One ``put`` of a batch of ``records`` that returned after ``seconds``."""
        ...

    def record_commit_attempt(self, connector: str, task: int, seconds: float, ok: bool) -> None:
        """One ``pre_commit`` that succeeded (``ok``) or failed after ``seconds``."""
        ...

    def record_active(self, connector: str, task: int, count: int) -> None:
        """The task's records delivered and not yet committed, after a put or a commit."""
        ...

    def record_task_state(self, connector: str, task: int, state: str) -> None:
        """An incarnation ``started`` (its figures begin anew), is ``running`` or ``paused``,
        or is ``stopped``: Connect's running and pause ratios."""
        ...

    def record_startup(self, kind: str, ok: bool) -> None:
        """A ``connector``'s or a ``task``'s start on this worker, and how it went."""
        ...

    def record_task_counts(self, connector: str, task: int, **counts: int) -> None:
        """Add to Connect's per-task counters, named as ``daemon.metrics.TASK_COUNTS`` names
        them (``sink_record_send``, ``total_record_errors``, ``total_retries``, ...)."""
        ...


@dataclass(frozen=True)
class TaskSettings:
    """Deadlines and pacing of a task, in seconds, from the worker config.

    From the worker config: ``task.write.timeout.ms``, ``offset.flush.interval.ms`` (flush
    interval and poll timeout), ``task.consumer.start.timeout.ms``,
    ``config.resolve.timeout.ms`` and ``task.stall.warn.ms``. The other deadlines bound the
    awaits around the sink's callbacks that cross a boundary (Kafka, the epoch store); each is
    the longest wait before the step fails (or, when closing, is given up with a warning).
    """

    write_timeout: float = 60.0
    flush_interval: float = 10.0
    poll_timeout: float = 1.0
    #: Starting the task's consumer (connecting, subscribing); past it the incarnation fails.
    consumer_start_timeout: float = 60.0
    #: Resolving ``${provider:...}`` references in a configuration (providers may read files or
    #: ask a secret store).
    resolve_timeout: float = 30.0
    #: ``offset.flush.timeout.ms``: committing offsets to the consumer group (for lag tools
    #: only: past it, a warning).
    group_commit_timeout: float = 5.0
    #: Closing the task's consumer at the end of an incarnation (past it, a warning).
    consumer_close_timeout: float = 10.0
    #: Drawing an epoch from the connector's counter (at start and on new partitions).
    epoch_timeout: float = 30.0
    #: Closing each dead-letter topic client (admin, producer, reader; past it, a warning).
    client_close_timeout: float = 10.0
    #: ``task.stall.warn.ms``: lag above 0 this long without a commit is a stall.
    stall_warn: float = 300.0
    #: How long the consumer's assignment callback may run before it returns to aiokafka,
    #: which sends no heartbeat meanwhile: a third of ``session.timeout.ms``; the assignment
    #: goes on beside the task (``incarnation.rebalance``).
    assign_budget: float = 10.0 / 3

    @classmethod
    def from_worker(cls, worker: WorkerConfig) -> TaskSettings:
        return cls(
            write_timeout=worker.task_write_timeout.total_seconds(),
            flush_interval=worker.offset_flush_interval.total_seconds(),
            group_commit_timeout=worker.offset_flush_timeout.total_seconds(),
            poll_timeout=min(1.0, max(0.05, worker.offset_flush_interval.total_seconds())),
            consumer_start_timeout=worker.task_consumer_start_timeout.total_seconds(),
            resolve_timeout=worker.config_resolve_timeout.total_seconds(),
            stall_warn=worker.task_stall_warn.total_seconds(),
            assign_budget=worker.session_timeout.total_seconds() / 3,
        )

    @property
    def callback_timeout(self) -> float:
        """Deadline of one sink callback: room for two writes and a commit."""
        return 2 * self.write_timeout + 30.0
