"""Errant records: ``errors.*`` applied to the records a task could not take.

A record is *errant* when a converter or a transform rejects it (``BadRecord``) or the sink's
``reject`` hook refuses it. ``ErrantRecords`` decides, per batch, before the batch reaches ``put``:

- ``errors.tolerance=none``: the task fails (``ConversionError`` / ``RecordRejected``, not
  retriable) with a message naming the first record's topic, partition and offset.
- ``errors.tolerance=all``: the records are left out of the batch (its offset ranges still
  cover them, so the sink's commit moves past them); a warning counts them; with
  ``errors.log.enable`` each gets an ERROR line naming the connector, task, stage, topic,
  partition and offset — and, only with ``errors.log.include.messages``, its key, value and
  headers; with ``errors.deadletterqueue.topic.name`` each is produced to the dead-letter topic
  exactly once (``daemon.runtime.deadletter.index`` has the argument) before ``put`` sees the batch.
"""

from __future__ import annotations

import bisect
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from daemon.config import ConnectorConfig, ErrorTolerance, WorkerConfig
from daemon.config.clients import KafkaClient
from daemon.connectors.api import TaskId
from daemon.connectors.converters import Converter
from daemon.connectors.records import BadRecord, OffsetRange, RecordBatch, TopicPartition
from daemon.errors import ConversionError, RecordRejected
from daemon.runtime.clients import client_security, client_settings
from daemon.runtime.deadletter.index import (
    DeadLetterIndex,
    Failure,
    dead_letter_headers,
    describe_exception,
    encode_bound,
    qualified_name,
)
from daemon.runtime.deadletter.topic import Clients, DeadLetterTopic
from daemon.runtime.settings import TaskSettings

log = logging.getLogger("connectd.task")
#: Longest key, value or headers text an errors.log.include.messages line shows, in bytes.
LOG_CONTENT_MAX = 4096


def conversion_failures(
    polled: Mapping[TopicPartition, Sequence[Any]],
    bad: Sequence[BadRecord],
    converters: tuple[Converter, Converter],
) -> list[Failure]:
    """``Failure``s of the records the converters (key, value) rejected (timestamp from the
    polled record)."""
    out = []
    for b in bad:
        record = find_record(polled, b.tp, b.offset)
        side = converters[0] if b.stage == "key" else converters[1]
        stage = {
            "key": "KEY_CONVERTER",
            "value": "VALUE_CONVERTER",
            "header": "HEADER_CONVERTER",
        }.get(b.stage, "TRANSFORMATION")
        out.append(
            Failure(
                b.topic,
                b.partition,
                b.offset,
                getattr(record, "timestamp", None),
                b.key,
                b.value,
                tuple(b.headers),
                stage,
                b.transform or qualified_name(type(side)),
                b.exception_class,
                b.error,
                f"{b.exception_class}: {b.error}",  # the converters keep no traceback
            )
        )
    return out


def rejection_failures(
    polled: Mapping[TopicPartition, Sequence[Any]],
    batch: RecordBatch,
    rejected: Mapping[int, BaseException],
    task_class: type,
) -> list[Failure]:
    """``Failure``s of the rows of ``batch`` the sink's ``reject`` refused (raw bytes from the
    polled records: the dead letter carries the record as it came)."""
    table = batch.table
    out = []
    for row in sorted(rejected):
        if not 0 <= row < table.num_rows:
            raise IndexError(f"reject() named row {row} of a batch of {table.num_rows} rows")
        tp = TopicPartition(
            table.column("kafka_topic")[row].as_py(), table.column("kafka_partition")[row].as_py()
        )
        offset = table.column("kafka_offset")[row].as_py()
        record = find_record(polled, tp, offset)
        exception_class, message, trace = describe_exception(rejected[row])
        out.append(
            Failure(
                tp.topic,
                tp.partition,
                offset,
                getattr(record, "timestamp", None),
                getattr(record, "key", None),
                getattr(record, "value", None),
                tuple(getattr(record, "headers", ())),
                "TASK_PUT",
                qualified_name(task_class),
                exception_class,
                message,
                trace,
            )
        )
    return out


def find_record(
    polled: Mapping[TopicPartition, Sequence[Any]], tp: TopicPartition, offset: int
) -> Any:
    """The polled record of ``tp`` at ``offset`` (a poll's records are in offset order), or
    None."""
    records = polled.get(tp, ())
    i = bisect.bisect_left(records, offset, key=lambda r: r.offset)
    return records[i] if i < len(records) and records[i].offset == offset else None


def without_rows(batch: RecordBatch, rows: Sequence[int]) -> RecordBatch:
    """``batch`` without the given rows (its ranges unchanged: they still cover them)."""
    keep = [True] * len(batch)
    for row in rows:
        keep[row] = False
    mask = pa.array(keep, pa.bool_())
    return replace(
        batch,
        table=batch.table.filter(mask),
        tombstones=batch.tombstones.filter(mask) if batch.tombstones is not None else None,
        timestamp_types=(
            batch.timestamp_types.filter(mask) if batch.timestamp_types is not None else None
        ),
    )


def apply_tolerance(config: ConnectorConfig, task_id: TaskId, failures: Sequence[Failure]) -> None:
    """``none``: raise for the first failure; ``all``: log (see the module docstring)."""
    if not failures:
        return
    first = failures[0]
    if config.errors_tolerance is ErrorTolerance.NONE:
        error = RecordRejected if first.stage == "TASK_PUT" else ConversionError
        what = {"TASK_PUT": "refused by the sink", "TRANSFORMATION": "refused by a transform"}.get(
            first.stage, "could not be converted"
        )
        raise error(
            f"{len(failures)} record(s) {what}; the first, at {first.where()}: "
            f"{first.message} ({first.exception_class}). Fix the data or the settings, or set "
            "errors.tolerance=all to skip such records (and errors.deadletterqueue.topic.name "
            "to keep them)"
        )
    log.warning(
        "Task %s skipped %d record(s) it could not take (first at %s: %s)",
        task_id,
        len(failures),
        first.where(),
        first.message,
    )
    if not config.errors_log_enable:
        return
    for f in failures:
        content = ""
        if config.errors_log_include_messages:
            content = (
                f"; key={_clip(f.key)} value={_clip(f.value)} headers={_clip(repr(f.headers))}"
            )
        log.error(
            "Error in connector %s task %d: stage %s (%s) failed for the record at %s: %s: %s%s",
            task_id.connector,
            task_id.task,
            f.stage,
            f.class_name,
            f.where(),
            f.exception_class,
            f.message,
            content,
        )


def _clip(value: bytes | str | None) -> str:
    if value is None:
        return "None"
    text = repr(value[:LOG_CONTENT_MAX])
    return text + ("…" if len(value) > LOG_CONTENT_MAX else "")


def dead_letter_clients(worker: WorkerConfig, config: ConnectorConfig, task: int) -> Clients:
    """The dead-letter topic's clients of one task of ``config``: the producer with the
    security settings of ``producer.*`` and ``producer.override.*`` over the worker's, the admin
    client with those of ``admin.*`` and ``admin.override.*``, as Connect builds a dead-letter
    queue's clients; the reader (connectd's own) with the worker's."""
    purpose = f"{config.name}-{task}-dlq"
    producer = client_security(worker, config, KafkaClient.PRODUCER, "the dead-letter producer")
    admin = client_security(worker, config, KafkaClient.ADMIN, "the dead-letter admin client")
    return Clients(
        client_settings(producer, purpose),
        client_settings(admin, purpose),
        client_settings(worker, purpose),
    )


class ErrantRecords:
    """One incarnation's errant-record handling (see the module docstring)."""

    def __init__(
        self,
        task_id: TaskId,
        config: ConnectorConfig,
        worker: WorkerConfig,
        group: str,
        converters: tuple[Converter, Converter],
        *,
        close_timeout: float = TaskSettings.client_close_timeout,
        count: Callable[..., None] = lambda **counts: None,
    ) -> None:
        """``close_timeout``: how long ``close`` waits for each dead-letter topic client;
        ``count``: adds to Connect's task error metrics (``TaskMetrics.record_task_counts``)."""
        self.task_id = task_id
        self.converters = converters  # key, value
        self.config = config
        self.group = group
        self.dlq: DeadLetterTopic | None = None
        self.index = DeadLetterIndex()
        self._generation: int | None = None
        self.produced = 0
        self._count = count
        name = config.errors_deadletterqueue_topic_name
        if name and config.errors_tolerance is ErrorTolerance.ALL:
            self.dlq = DeadLetterTopic(
                name,
                replication_factor=config.errors_deadletterqueue_topic_replication_factor,
                clients=functools.partial(dead_letter_clients, worker, config, task_id.task),
                close_timeout=close_timeout,
            )

    async def start(self) -> None:
        if self.dlq is not None:
            await self.dlq.start()

    async def close(self) -> None:
        if self.dlq is not None:
            await self.dlq.close()

    def sift(
        self,
        polled: Mapping[TopicPartition, Sequence[Any]],
        bad: Sequence[BadRecord],
        batch: RecordBatch,
        rejected: Mapping[int, BaseException],
        task_class: type,
    ) -> tuple[RecordBatch, list[Failure]]:
        """The batch without the rows the sink rejected, and every failure of the poll (the
        converters' and the sink's) in (partition, offset) order."""
        failures = conversion_failures(polled, bad, self.converters)
        if rejected:
            failures += rejection_failures(polled, batch, rejected, task_class)
            batch = without_rows(batch, sorted(rejected))
        failures.sort(key=lambda f: (f.tp, f.offset))
        return batch, failures

    async def handle(
        self, failures: Sequence[Failure], ranges: Sequence[OffsetRange], generation: int
    ) -> None:
        """Apply the tolerance to a batch's failures; under ``all`` with a dead-letter topic,
        make sure each is in the topic once. Called for every batch (also one without
        failures: the index must cover every partition from its first batch on)."""
        if failures:  # counted before the tolerance acts: under none, it raises
            self._count(total_record_errors=len(failures), total_record_failures=len(failures))
        apply_tolerance(self.config, self.task_id, failures)
        if failures:
            logged = len(failures) if self.config.errors_log_enable else 0
            self._count(total_records_skipped=len(failures), total_errors_logged=logged)
        if self.dlq is None or not ranges:
            return
        if generation != self._generation:  # a rebalance: others may have owned partitions
            self.index = DeadLetterIndex()
            self._generation = generation
        try:
            await self._read_if_needed(ranges)
            await self._produce(failures)
        except BaseException:
            for r in ranges:  # read again before retrying: some may have landed
                self.index.forget(r.tp)
            raise
        for r in ranges:
            self.index.advanced(r.tp, r.end)

    async def _read_if_needed(self, ranges: Sequence[OffsetRange]) -> None:
        assert self.dlq is not None
        needed = self.index.needs_read({r.tp: r.start for r in ranges})
        if not needed:
            return
        tps = sorted(needed)
        bounds = await self.dlq.bounds(self.group, tps)
        found, ends = await self.dlq.read(needed, [bounds[tp] for tp in tps])
        self.index.saw_end(ends)
        for tp, start in needed.items():
            self.index.load(tp, start, found.get(tp, {}))

    async def _produce(self, failures: Sequence[Failure]) -> None:
        assert self.dlq is not None
        new = [f for f in failures if not self.index.contains(f.tp, f.offset)]
        if len(new) < len(failures):
            log.info(
                "Task %s: %d record(s) were in the dead-letter topic already (put there by an "
                "earlier incarnation), not produced again",
                self.task_id,
                len(failures) - len(new),
            )
        if not new:
            return
        context = self.config.errors_deadletterqueue_context_headers_enable
        letters = [
            (
                f.key,
                f.value,
                f.timestamp,
                dead_letter_headers(f, self.task_id.connector, self.task_id.task, context=context),
            )
            for f in new
        ]
        try:
            positions = await self.dlq.produce(letters)
        except BaseException:
            self._count(deadletterqueue_produce_failures=len(new))
            raise
        self._count(deadletterqueue_produce_requests=len(new))
        for f, (p, o) in zip(new, positions, strict=True):
            self.index.produced(f.tp, f.offset, p, o)
        self.produced += len(new)

    def metadata(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str] | None:
        """What to commit to the group with ``offsets``: ``None`` without a dead-letter topic
        (commit as usual); else metadata holding the dead-letter bound for each partition the
        index covers. A partition it does not cover (no batch since the last rebalance) is left
        out: its stored offset keeps the bound it has, which stays valid."""
        if self.dlq is None:
            return None
        out = {}
        for tp, offset in offsets.items():
            bound = self.index.bound(tp, offset)
            if bound is not None:
                out[tp] = encode_bound(self.dlq.topic, bound)
        return out
