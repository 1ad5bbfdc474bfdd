"""The pieces of a task's step that need no task state: its settings (pacing and every named
deadline, ``TaskSettings``), what it records (``TaskMetrics``), helpers that bound an await, and
how its converters are built.

Kept apart from ``task.py`` so the incarnation's control flow reads on one screen and these
rules can be tested on their own. Partition positions are in ``progress.py``, retries in
``retrying.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from daemon.config import ConnectorConfig, WorkerConfig, effective_converter
from daemon.connectors.converters import make_converter
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import ConnectdError, TaskTimeout
from daemon.runtime.convert import BatchConverter

log = logging.getLogger("connectd.task")
T = TypeVar("T")


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
        polled: Mapping[TopicPartition, Sequence[Any]],
    ) -> None:
        """A batch about to be handed to ``put``: its offset ranges (``PartitionProgress.begin``)
        and its records (their ``offset`` and ``timestamp`` are read)."""
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
    #: Committing offsets to the consumer group (for lag tools only: past it, a warning).
    group_commit_timeout: float = 30.0
    #: Closing the task's consumer at the end of an incarnation (past it, a warning).
    consumer_close_timeout: float = 10.0
    #: Drawing an epoch from the connector's counter (at start and on new partitions).
    epoch_timeout: float = 30.0
    #: Closing each dead-letter topic client (admin, producer, reader; past it, a warning).
    client_close_timeout: float = 10.0
    #: ``task.stall.warn.ms``: lag above 0 this long without a commit is a stall.
    stall_warn: float = 300.0

    @classmethod
    def from_worker(cls, worker: WorkerConfig) -> TaskSettings:
        return cls(
            write_timeout=worker.task_write_timeout.total_seconds(),
            flush_interval=worker.offset_flush_interval.total_seconds(),
            poll_timeout=min(1.0, max(0.05, worker.offset_flush_interval.total_seconds())),
            consumer_start_timeout=worker.task_consumer_start_timeout.total_seconds(),
            resolve_timeout=worker.config_resolve_timeout.total_seconds(),
            stall_warn=worker.task_stall_warn.total_seconds(),
        )

    @property
    def callback_timeout(self) -> float:
        """Deadline of one sink callback: room for two writes and a commit."""
        return 2 * self.write_timeout + 30.0


async def with_deadline(what: str, coro: Awaitable[T], timeout: float) -> T:
    """Await ``coro`` for at most ``timeout`` seconds; ``TaskTimeout`` naming ``what`` past it
    (a ``TimeoutError`` raised by ``coro`` itself passes through unchanged)."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await coro
    except TimeoutError:
        if not deadline.expired():
            raise
        raise TaskTimeout(
            f"{what} did not return within {timeout:g} s; it was cancelled (an executor write"
            " it waited for was killed). Raise task.write.timeout.ms if writes really take that"
            " long"
        ) from None


async def unless_set(
    coro: Awaitable[T], event: asyncio.Event, timeout: float, late: Exception
) -> T | None:
    """``coro``'s result, or ``None`` as soon as ``event`` is set (``coro`` is then cancelled);
    ``late`` is raised if neither happened within ``timeout`` seconds."""
    work = asyncio.ensure_future(coro)
    stop = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait(
            {work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for fut in (work, stop):
            if not fut.done():
                fut.cancel()
    if work in done:
        return work.result()
    if stop in done:
        return None
    raise late


async def log_failure(what: str, coro: Awaitable[Any]) -> None:
    """Await ``coro``; an exception (not a cancel) is logged as ``<what> failed``, not raised
    (for the steps of a close, which go on after one failed)."""
    try:
        await coro
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.error("%s failed: %s", what, exc, exc_info=not isinstance(exc, ConnectdError))


def names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(tps))


def task_converter_options(
    base: Mapping[str, str], task_config: Mapping[str, str], side: str
) -> dict[str, str]:
    """The converter options for one side, with the task configuration's ``<side>.converter.*``
    keys over the connector's: a connector may set them per task (ParquetSink maps its
    ``value.fields`` to ``value.converter.fields`` in ``task_configs``)."""
    prefix = f"{side}.converter."
    return {
        **base,
        **{k.removeprefix(prefix): v for k, v in task_config.items() if k.startswith(prefix)},
    }


def batch_converter(
    worker: WorkerConfig, config: ConnectorConfig, task_config: Mapping[str, str]
) -> BatchConverter:
    """The key and value converters of a task: the connector's (or the worker's) converter
    classes, with the options of ``task_converter_options``."""
    key, key_opts = effective_converter(worker, config, "key")
    value, value_opts = effective_converter(worker, config, "value")
    return BatchConverter(
        make_converter(
            key.value, task_converter_options(key_opts, task_config, "key"), is_key=True
        ),
        make_converter(
            value.value, task_converter_options(value_opts, task_config, "value"), is_key=False
        ),
    )
