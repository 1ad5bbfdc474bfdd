"""The pieces of a task's step that need no task state: deadlines, offset ranges, bad records.

Kept apart from ``task.py`` so the incarnation's control flow reads on one screen and these
rules can be tested on their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from daemon.config import ConnectorConfig, ErrorTolerance, WorkerConfig
from daemon.connectors.records import BadRecord, OffsetRange, TopicPartition
from daemon.errors import ConversionError, TaskTimeout

log = logging.getLogger("connectd.task")
T = TypeVar("T")


class TaskMetrics(Protocol):
    """What the runtime records (``daemon.metrics.Metrics`` fits); calls never block."""

    def record_consumed(self, connector: str, task: int, count: int) -> None: ...

    def task_restarted(self, connector: str, task: int, cause: str) -> None: ...

    def executor_killed(self, reason: str) -> None: ...


@dataclass(frozen=True)
class TaskSettings:
    """Deadlines and pacing of a task, in seconds, from the worker config."""

    write_timeout: float = 60.0
    flush_interval: float = 10.0
    poll_timeout: float = 1.0

    @classmethod
    def from_worker(cls, worker: WorkerConfig) -> TaskSettings:
        return cls(
            write_timeout=worker.task_write_timeout.total_seconds(),
            flush_interval=worker.offset_flush_interval.total_seconds(),
            poll_timeout=min(1.0, max(0.05, worker.offset_flush_interval.total_seconds())),
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


def offset_ranges(
    polled: Mapping[TopicPartition, Sequence[Any]], positions: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """The ranges one poll covers: from each partition's position before the poll (the offset
    after the last record delivered, or the seek target) to its last record + 1. Starting at the
    position, not at the first record, keeps consecutive ranges chained across offsets that hold
    no record (compaction, transaction markers)."""
    ranges = []
    for tp, records in polled.items():
        first, last = records[0].offset, records[-1].offset
        start = positions.get(tp, first)
        if start > first:  # never expected: aiokafka drops records fetched before a seek
            log.warning("%s: record %d comes before the position %d", tp, first, start)
            start = first
        ranges.append(OffsetRange(tp.topic, tp.partition, start, last + 1))
    return ranges


def check_bad_records(config: ConnectorConfig, bad: Sequence[BadRecord]) -> None:
    """Apply ``errors.tolerance`` to records the converters rejected: ``none`` raises
    ``ConversionError`` naming the first one's topic, partition and offset; ``all`` logs them
    (each one too with ``errors.log.enable``) and lets the batch go on without them."""
    if not bad:
        return
    first = bad[0]
    where = f"topic {first.topic} partition {first.partition} offset {first.offset}"
    if config.errors_tolerance is ErrorTolerance.NONE:
        raise ConversionError(
            f"{len(bad)} record(s) could not be converted; the first, at {where}: "
            f"{first.error} ({first.exception_class}). Fix the data or the converter "
            "settings, or set errors.tolerance=all to skip such records"
        )
    log.warning(
        "Skipped %d record(s) that could not be converted (first at %s: %s)",
        len(bad),
        where,
        first.error,
    )
    if config.errors_log_enable:
        for b in bad:
            content = ""
            if config.errors_log_include_messages:
                content = f" key={b.key!r} value={b.value!r}"
            log.error(
                "Bad record at topic %s partition %d offset %d: %s%s",
                b.topic,
                b.partition,
                b.offset,
                b.error,
                content,
            )


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
