"""What happens to a poll's records before ``put``: conversion, then the errant-record policy.

``RecordPipeline`` is the part of an incarnation that owns its converters and its
``ErrantRecords`` (``errors.*``, the dead-letter topic: ``deadletter/policy.py``). It guarantees:

- conversion loops over every record, so it never runs on the event loop (DESIGN.md): a poll
  with records is converted in a thread, under the callback deadline;
- every failure of a poll (the converters' and the sink's ``reject``) is sifted out and handled
  (tolerance, log, dead-letter topic) before ``put`` sees the batch; the batch's offset ranges
  still cover the records left out, so the sink's commit moves past them;
- with a dead-letter topic, the group commit's metadata carries each partition's dead-letter
  bound (``metadata``; ``deadletter/index.py`` has the argument).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from daemon.config import ConnectorConfig, WorkerConfig
from daemon.connectors.api import TaskId
from daemon.connectors.converters import ConversionResult
from daemon.connectors.records import OffsetRange, RawBatch, RecordBatch, TopicPartition
from daemon.runtime.consumer import group_id
from daemon.runtime.deadletter.policy import ErrantRecords
from daemon.runtime.steps import TaskSettings, batch_converter


class RecordPipeline:
    """One incarnation's conversion and errant-record handling (see the module docstring)."""

    def __init__(
        self,
        task_id: TaskId,
        worker: WorkerConfig,
        config: ConnectorConfig,
        task_config: Mapping[str, str],
        settings: TaskSettings,
    ) -> None:
        self.converter = batch_converter(worker, config, task_config)
        self.errant = ErrantRecords(
            task_id,
            config,
            worker,
            group_id(config.name),
            self.converter,
            close_timeout=settings.client_close_timeout,
        )
        self._timeout = settings.callback_timeout

    async def start(self) -> None:
        """Creates the dead-letter topic if there is one."""
        await self.errant.start()

    async def close(self) -> None:
        await self.errant.close()

    async def convert(
        self, polled: Mapping[TopicPartition, Sequence[Any]], ranges: Sequence[OffsetRange]
    ) -> tuple[int, ConversionResult]:
        """The poll's records converted (those that could not be are in ``bad``); how many."""
        converter = self.converter

        def convert() -> tuple[int, ConversionResult]:
            records = [r for tp in sorted(polled) for r in polled[tp]]
            return len(records), converter.convert(RawBatch.from_records(records), ranges)

        if not any(polled.values()):
            return convert()
        async with asyncio.timeout(self._timeout):
            return await asyncio.to_thread(convert)

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
