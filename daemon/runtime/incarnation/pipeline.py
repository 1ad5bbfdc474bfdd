"""What happens to a poll's records before ``put``: conversion, the connector's transforms
(``daemon.connectors.transforms``: Connect's order, convert → transformation chain → put), then
the errant-record policy.

``RecordPipeline`` is the part of an incarnation that owns its key and value converters (the
connector's or the worker's converter classes, with the task configuration's
``<side>.converter.*`` options over the connector's: ``task_converters``) and its
``ErrantRecords`` (``errors.*``, the dead-letter topic: ``daemon.runtime.deadletter``). It
guarantees:

- conversion loops over every record, so it never runs on the event loop (DESIGN.md): a poll
  with records is converted (``convert_poll``, one call) and transformed in the pipeline's own
  thread, under the callback deadline, one poll at a time; the rows a transform drops leave
  the batch while its offset ranges still cover them, so the sink's commit moves past them;
- every failure of a poll (the converters', the transforms' and the sink's ``reject``) is
  sifted out and handled (tolerance, log, dead-letter topic) before ``put`` sees the batch;
  the batch's offset ranges still cover the records left out, so the sink's commit moves past
  them;
- with a dead-letter topic, the group commit's metadata carries each partition's dead-letter
  bound (``metadata``; ``deadletter/index.py`` has the argument).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import ConnectorConfig, WorkerConfig, effective_converter
from daemon.config.connector import effective_header_converter
from daemon.config.transforms import Chain
from daemon.connectors.api import TaskId
from daemon.connectors.converters import (
    ConversionResult,
    Converter,
    RegistryUnavailable,
    SchemasNeeded,
    convert_poll,
    make_converter,
)
from daemon.connectors.converters.batch import headers_as_text, text_headers
from daemon.connectors.converters.jsonconverter import JsonConverter
from daemon.connectors.converters.lookup import header_reader
from daemon.connectors.records import (
    BadRecord,
    OffsetRange,
    RawBatch,
    RecordBatch,
    TopicPartition,
)
from daemon.connectors.transforms import Plugins, load_plugins
from daemon.connectors.transforms import apply as apply_transforms
from daemon.connectors.transforms.java import TransformError
from daemon.errors import ConversionError
from daemon.runtime.deadletter.index import qualified_name
from daemon.runtime.deadletter.policy import ErrantRecords, find_record
from daemon.runtime.incarnation.consumer import group_id
from daemon.runtime.incarnation.progress import Marks, record_marks
from daemon.runtime.settings import TaskMetrics, TaskSettings


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


def task_converters(
    worker: WorkerConfig, config: ConnectorConfig, task_config: Mapping[str, str]
) -> tuple[Converter, Converter]:
    """The key and value converters of a task: the connector's (or the worker's) converter
    classes, with the options of ``task_converter_options``."""
    key, key_opts = effective_converter(worker, config, "key")
    value, value_opts = effective_converter(worker, config, "value")
    return (
        make_converter(str(key), task_converter_options(key_opts, task_config, "key"), is_key=True),
        make_converter(
            str(value), task_converter_options(value_opts, task_config, "value"), is_key=False
        ),
    )


def _transformed(
    chain: Chain,
    plugins: Plugins,
    result: ConversionResult,
    polled: Mapping[TopicPartition, Sequence[Any]],
) -> ConversionResult:
    """``result`` after ``chain``: the records a transform refused join the bad ones, with
    their raw bytes for the dead-letter queue."""
    done = apply_transforms(chain, result.batch, plugins)
    if not done.failures:
        return dataclasses.replace(result, batch=done.batch)
    bad = list(result.bad)
    for f in done.failures:
        r = find_record(polled, TopicPartition(f.topic, f.partition), f.offset)
        bad.append(
            BadRecord(
                f.topic,
                f.partition,
                f.offset,
                f"transform '{f.alias}' ({f.cls.rsplit('.', 1)[1]}): {f.message}",
                qualified_name(TransformError),
                "transformation",
                getattr(r, "key", None),
                getattr(r, "value", None),
                tuple(getattr(r, "headers", ())),
                transform=f.cls,
            )
        )
    return ConversionResult(done.batch, bad)


def _json_headers_read(
    reader: JsonConverter, result: ConversionResult, polled: Mapping[TopicPartition, Sequence[Any]]
) -> ConversionResult:
    """``result`` without the records a header of which ``reader`` cannot read (Connect's
    ``HEADER_CONVERTER`` stage): they join the bad ones, with their raw bytes."""
    table = result.batch.table
    if not table.num_rows:
        return result
    column = table.column("headers").combine_chunks()
    items = column.flatten()  # the headers of every row, in order
    _, errors = reader.header_texts(items.field("value").to_pylist())
    if not errors:
        return result
    parents = pc.list_parent_indices(column).to_pylist()
    keys = items.field("key").to_pylist()
    failed: dict[int, str] = {}
    for i, error in sorted(errors.items()):
        failed.setdefault(parents[i], f"header {keys[i]!r}: {error}")
    where = zip(
        table.column("kafka_topic").to_pylist(),
        table.column("kafka_partition").to_pylist(),
        table.column("kafka_offset").to_pylist(),
        strict=True,
    )
    bad = list(result.bad)
    for row, (topic, partition, offset) in enumerate(where):
        if row in failed:
            r = find_record(polled, TopicPartition(topic, partition), offset)
            bad.append(
                BadRecord(
                    topic,
                    partition,
                    offset,
                    f"header conversion failed: {failed[row]}",
                    qualified_name(ConversionError),
                    "header",
                    getattr(r, "key", None),
                    getattr(r, "value", None),
                    tuple(getattr(r, "headers", ())),
                    transform=reader.connect_name,
                )
            )
    keep = pa.array([row not in failed for row in range(table.num_rows)], pa.bool_())
    return ConversionResult(result.batch.filter(keep), bad)


def _json_headers(reader: JsonConverter, column: Any) -> pa.Array:
    """A ``headers`` column whose values are the JSON text ``reader`` reads from each (a
    header a transform wrote, as Connect's SimpleHeaderConverter writes it, read leniently)."""
    return headers_as_text(column, lambda values: reader.header_texts(values, lenient=True)[0])


class Converted(NamedTuple):
    """A poll converted: how many records, the result, the records' ``Marks``."""

    records: int
    result: ConversionResult
    marks: Marks


class RecordPipeline:
    """One incarnation's conversion and errant-record handling (see the module docstring)."""

    def __init__(
        self,
        task_id: TaskId,
        worker: WorkerConfig,
        config: ConnectorConfig,
        task_config: Mapping[str, str],
        settings: TaskSettings,
        metrics: TaskMetrics | None = None,
    ) -> None:
        self.key, self.value = task_converters(worker, config, task_config)
        kind, options = effective_header_converter(worker, config)
        #: The headers column's text encoding (``header.converter``), or the JsonConverter
        #: that reads its values as JSON; neither: its bytes.
        self.header_encoding, self.header_json = header_reader(kind and kind.value, options)

        def count(**counts: int) -> None:
            if metrics is not None:
                metrics.record_task_counts(task_id.connector, task_id.task, **counts)

        self.errant = ErrantRecords(
            task_id,
            config,
            worker,
            group_id(config.name),
            (self.key, self.value),
            close_timeout=settings.client_close_timeout,
            count=count,
        )
        self._timeout = settings.callback_timeout
        self.chain = config.transform_chain
        #: The chain's Python transforms and predicates, made once for the incarnation.
        self.plugins = load_plugins(self.chain)
        #: The one thread conversions run in: one at a time, in the order asked, even when a
        #: conversion the loop stopped waiting for (cancelled, past its deadline) still runs,
        #: since the converters and transforms keep state (learnt fields, cached schemas).
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"connectd-convert-{task_id}")

    async def start(self) -> None:
        """Creates the dead-letter topic if there is one."""
        await self.errant.start()

    async def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
        try:
            await self.errant.close()
        finally:
            await self.key.close()
            await self.value.close()

    async def convert(
        self, polled: Mapping[TopicPartition, Sequence[Any]], ranges: Sequence[OffsetRange]
    ) -> Converted:
        """The poll's records converted (those that could not be are in ``bad``), how many,
        and their offsets and timestamps for the task's freshness (``record_marks``, made in
        the same thread)."""
        key, value, chain, plugins = self.key, self.value, self.chain, self.plugins
        encoding, as_json = self.header_encoding, self.header_json

        def convert() -> Converted:
            raw = RawBatch.from_polled(polled)
            result = convert_poll(raw, key, value, ranges)
            if as_json is not None:
                result = _json_headers_read(as_json, result, polled)
            if chain:
                result = _transformed(chain, plugins, result, polled)
            if encoding is not None or as_json is not None:
                # after the transforms, which read and write headers as Connect's
                # SimpleHeaderConverter writes them (bytes)
                table = result.batch.table
                at = table.schema.get_field_index("headers")
                column = table.column(at)
                if as_json is not None:
                    text = _json_headers(as_json, column)
                else:
                    assert encoding is not None
                    text = text_headers(column, encoding)
                batch = dataclasses.replace(
                    result.batch, table=table.set_column(at, "headers", text)
                )
                result = dataclasses.replace(result, batch=batch)
            return Converted(len(raw), result, record_marks(polled, (raw.offsets, raw.timestamps)))

        if not any(polled.values()):
            return convert()
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout(self._timeout):
                    run = functools.partial(contextvars.copy_context().run, convert)
                    return await loop.run_in_executor(self._thread, run)
            except SchemasNeeded as need:
                # A Schema Registry converter met ids it has not cached: fetched here, on the
                # loop; RegistryUnavailable (retriable: the batch is read again after a backoff)
                # if the registry does not answer.
                try:
                    async with asyncio.timeout(self._timeout):
                        await need.fetch()
                except TimeoutError:
                    raise RegistryUnavailable(
                        f"the Schema Registry did not answer within {self._timeout:g} s"
                    ) from None

    async def sift(
        self,
        polled: Mapping[TopicPartition, Sequence[Any]],
        result: ConversionResult,
        rejected: Mapping[int, BaseException],
        task_class: type,
        ranges: Sequence[OffsetRange],
        generation: int,
    ) -> RecordBatch:
        """The batch for ``put``: without the rows the sink rejected, once every failure of the
        poll was handled (``ErrantRecords.handle``; raises under ``errors.tolerance=none``)."""
        batch, failures = self.errant.sift(polled, result.bad, result.batch, rejected, task_class)
        await self.errant.handle(failures, ranges, generation)
        return batch

    def metadata(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str] | None:
        """What to commit to the group with ``offsets`` (``ErrantRecords.metadata``)."""
        return self.errant.metadata(offsets)
