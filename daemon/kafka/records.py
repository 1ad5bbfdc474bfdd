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
own path, unchanged. ``install`` wraps the method once per process; what it relies on
(``PartitionRecords._consumer_record(self, tp, record)`` and ``_key_deserializer``) is
aiokafka 0.14.0's, the version pyproject.toml pins, and tests/unit/kafka/test_records.py checks
it.
"""

from __future__ import annotations

from typing import Any

from aiokafka.consumer.fetcher import PartitionRecords


class _Raw:
    """The marker ``key_deserializer``; a consumer never calls it (``install``)."""

    def __call__(self, data: bytes | None) -> Any:
        raise AssertionError("RAW is a marker: connectd's install() keeps aiokafka from calling it")

    def __repr__(self) -> str:
        return "daemon.kafka.records.RAW"


RAW = _Raw()
_WRAPPED = "_connectd_raw"


def install() -> None:
    """Let consumers made with ``key_deserializer=RAW`` get aiokafka's C records (idempotent)."""
    if getattr(PartitionRecords._consumer_record, _WRAPPED, False):
        return
    wrapped = PartitionRecords._consumer_record

    def _consumer_record(self: Any, tp: Any, record: Any) -> Any:
        if self._key_deserializer is RAW:
            return record
        return wrapped(self, tp, record)

    setattr(_consumer_record, _WRAPPED, True)
    PartitionRecords._consumer_record = _consumer_record
