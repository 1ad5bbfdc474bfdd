"""Fetched records without a Python object each: a task's consumer gets aiokafka's own records.

aiokafka decodes a fetched record batch in C (``_crecords.DefaultRecord``: ``offset``,
``timestamp``, ``timestamp_type``, ``key``, ``value``, ``headers``, ``checksum``), then
``PartitionRecords._consumer_record`` wraps each record in a Python ``ConsumerRecord`` (with its
topic, partition and the sizes of its key and value), on the event loop. For a task that is
most of what reading a record costs there: on the bench's JSON records (docs: bench/README.md,
"Cut 2") the wrapper took about 40% of the fetch path's time per record, and a task reads the
topic and partition from the keys of ``getmany``'s answer anyway.

A consumer made with ``key_deserializer=RAW`` gets the C records as they are. ``RAW`` is a
marker, never called: every other consumer (and any key deserializer) goes through aiokafka's
own path, unchanged.

A RAW consumer's records also leave the fetch buffer a record batch at a time. aiokafka hands
them out one by one: ``FetchResult.getall`` loops in Python over ``PartitionRecords``, whose
``__next__`` resumes the ``_unpack_records`` generator, which checks each record's offset and
moves ``next_fetch_offset`` for each. Three Python frames a record, on the event loop: with
10,000 records a poll (``daemon.runtime.incarnation.consumer``) that loop was the largest part of
a task's event-loop time (bench/README.md, "Cut 3"). For a RAW consumer, ``_raw_batches`` makes
the same checks of each batch as aiokafka's generator (CRC, aborted transactions under
``read_committed``, control batches; records before the fetch offset skipped), takes a batch's
records with one ``list()`` in C, and ``itertools.chain`` flattens the batches; ``_raw_getall``
takes up to ``max_records`` with ``itertools.islice``: no Python code runs per record. The
positions are aiokafka's: after a batch, its ``next_offset``; a poll that ends inside one,
after its last record. A task's consumer calls ``getmany`` only; ``getone`` is covered too.

``install`` wraps the methods once per process; what it relies on (``PartitionRecords``'s
``_unpack_records``, ``_records_iterator``, ``next_fetch_offset`` and the
attributes its generator reads; ``FetchResult``'s ``getall``, ``getone``, ``check_assignment``,
``has_more``, ``_update_position``, ``_partition_records``) is aiokafka 0.14.0's, the version
pyproject.toml pins, and tests/unit/kafka/test_records.py checks it, and that a RAW consumer
and a plain one see the same offsets and positions.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, islice
from typing import Any

import aiokafka.errors as Errors
from aiokafka.consumer.fetcher import READ_COMMITTED, FetchResult, PartitionRecords


class _Raw:
    """The marker ``key_deserializer``; a consumer never calls it (``install``)."""

    def __call__(self, data: bytes | None) -> Any:
        raise AssertionError("RAW is a marker: connectd's install() keeps aiokafka from calling it")

    def __repr__(self) -> str:
        return "daemon.kafka.records.RAW"


RAW = _Raw()
_WRAPPED = "_connectd_raw"


def _raw_batches(self: Any) -> Iterator[list[Any]]:
    """The record batches ``PartitionRecords._unpack_records`` would go through for a RAW
    consumer, after the same checks, each as the list of its records (module docstring)."""
    tp, records = self._tp, self._records
    while records.has_next():
        batch = records.next_batch()
        if self._check_crcs and not batch.validate_crc():
            raise Errors.CorruptRecordException(f"Invalid CRC - {tp}")
        if self._isolation_level == READ_COMMITTED and batch.producer_id is not None:
            self._consume_aborted_up_to(batch.base_offset)
            if batch.is_control_batch and self._contains_abort_marker(batch):
                self._aborted_producers.discard(batch.producer_id)
            if batch.is_transactional and batch.producer_id in self._aborted_producers:
                self.next_fetch_offset = batch.next_offset  # an aborted batch: skipped
                continue
        if batch.is_control_batch:
            self.next_fetch_offset = batch.next_offset
            continue
        got = list(batch)
        skip = 0  # records before the fetch offset (a fetch from inside the batch)
        while skip < len(got) and got[skip].offset < self.next_fetch_offset:
            skip += 1
        if skip < len(got):
            yield got[skip:] if skip else got
        # After the batch, its next offset (past records compaction removed from its end).
        self.next_fetch_offset = batch.next_offset


def _raw_getall(self: Any, max_records: int | None = None) -> list[Any]:
    """``FetchResult.getall`` for a RAW consumer's records (module docstring)."""
    part = self._partition_records
    if not self.check_assignment(self._topic_partition) or not self.has_more():
        return []
    source = part._records_iterator
    got = list(source if max_records is None else islice(source, max_records))
    if max_records is None or len(got) < max_records:  # all of it: the generator is over
        part._records_iterator = None
        self._update_position()
        self._partition_records = None
    else:  # inside a batch, maybe at its end: the position is after the last record taken
        part.next_fetch_offset = max(part.next_fetch_offset, got[-1].offset + 1)
        self._update_position()
    return got


def _is_raw(result: Any) -> bool:
    part = result._partition_records
    return part is not None and part._key_deserializer is RAW


def install() -> None:
    """Let consumers made with ``key_deserializer=RAW`` get aiokafka's C records, a batch at a
    time (idempotent)."""
    if getattr(PartitionRecords._unpack_records, _WRAPPED, False):
        return
    unpack = PartitionRecords._unpack_records
    getall = FetchResult.getall
    getone = FetchResult.getone

    def _unpack_records(self: Any) -> Iterator[Any]:
        if self._key_deserializer is RAW:  # flattened in C: no Python frame a record
            return chain.from_iterable(_raw_batches(self))
        return unpack(self)  # type: ignore[no-any-return]

    def _getall(self: Any, max_records: int | None = None) -> list[Any]:
        if _is_raw(self):
            return _raw_getall(self, max_records)
        return getall(self, max_records)  # type: ignore[no-any-return]

    def _getone(self: Any) -> Any:
        if _is_raw(self):  # one record: the position after it, as getall's
            got = _raw_getall(self, 1)
            return got[0] if got else None
        return getone(self)

    setattr(_unpack_records, _WRAPPED, True)
    PartitionRecords._unpack_records = _unpack_records
    FetchResult.getall = _getall
    FetchResult.getone = _getone
