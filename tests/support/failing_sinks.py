"""Sinks that fail on purpose, for tests of what a failing connector costs the rest of a worker.

``StartFailingSink`` (``connector.class=support.failing_sinks:StartFailingSink``): every task's
``start`` raises a retriable ``OSError``, as a task whose database is unreachable would; each
call is counted in ``STARTS`` (in-process daemons), so a test knows how many task creations
failed.

``GreedySink`` (``support.failing_sinks:GreedySink``): generates two more task configurations
than ``tasks.max`` allows; its tasks accept records and write nothing.

``NeverCommitSink`` (``support.failing_sinks:NeverCommitSink``): takes every record and makes
none durable (``pre_commit`` returns nothing): with lag, its task stalls.

``SlowOpenSink`` (``support.failing_sinks:SlowOpenSink``): each ``open`` takes
``open.delay.ms``, as a Delta table's claim waiting for an executor's JVM to start; the records
its puts keep are in ``DELIVERED`` and each open is counted in ``OPENS`` (in-process daemons).

``FlakySink`` (``support.failing_sinks:FlakySink``): its ``put`` raises ``RetriableError``
(Connect's ``RetriableException``) for the first ``fail.puts`` non-empty batches of each
connector, after asking ``context.timeout(retry.wait.ms)``; then it keeps each record's
(partition, offset) in ``DELIVERED`` (in-process daemons), so a test sees every record once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping

from daemon.connectors.api import RetriableError, SinkConnector, SinkTask, SinkTaskContext
from daemon.connectors.records import RecordBatch, TopicPartition

STARTS: dict[str, int] = {}
"""Failed task starts, by connector name."""


class StartFailingTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        name = context.task_id.connector
        STARTS[name] = STARTS.get(name, 0) + 1
        raise OSError(f"injected: task {context.task_id} cannot start")

    async def put(self, batch: RecordBatch) -> None:
        raise AssertionError("a task that never started was given records")

    async def stop(self) -> None:
        pass


class StartFailingSink(SinkConnector):
    needs_executors = False  # it writes nothing: no JVM for its worker

    def task_class(self) -> type[SinkTask]:
        return StartFailingTask


class IdleTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        pass

    async def put(self, batch: RecordBatch) -> None:
        pass

    async def stop(self) -> None:
        pass


class GreedySink(SinkConnector):
    needs_executors = False

    def task_class(self) -> type[SinkTask]:
        return IdleTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config) for _ in range(max_tasks + 2)]


FAILED_PUTS: dict[str, int] = {}
"""``FlakySink``: the puts that raised, by connector name."""
DELIVERED: dict[str, list[tuple[int, int]]] = {}
"""``FlakySink``: (partition, offset) of every record a put kept, by connector name."""


def _keep(name: str, batch: RecordBatch) -> None:
    """Each record's (partition, offset) into ``DELIVERED[name]``."""
    partitions = batch.table.column("kafka_partition").to_pylist()
    offsets = batch.table.column("kafka_offset").to_pylist()
    DELIVERED.setdefault(name, []).extend(zip(partitions, offsets, strict=True))


class FlakyTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context
        self.name = context.task_id.connector
        self.fail_puts = int(config.get("fail.puts", "3"))
        self.wait_ms = int(config.get("retry.wait.ms", "-1"))

    async def put(self, batch: RecordBatch) -> None:
        if not len(batch):
            return
        failed = FAILED_PUTS.get(self.name, 0)
        if failed < self.fail_puts:
            FAILED_PUTS[self.name] = failed + 1
            self.context.timeout(self.wait_ms)
            raise RetriableError(f"injected: the store is unreachable (put {failed + 1})")
        _keep(self.name, batch)

    async def stop(self) -> None:
        pass


class FlakySink(SinkConnector):
    needs_executors = False

    def task_class(self) -> type[SinkTask]:
        return FlakyTask


class NeverCommitTask(IdleTask):
    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        return {}


class NeverCommitSink(SinkConnector):
    needs_executors = False

    def task_class(self) -> type[SinkTask]:
        return NeverCommitTask


OPENS: dict[str, int] = {}
"""``SlowOpenSink``: the opens begun, by connector name."""


class SlowOpenTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.name = context.task_id.connector
        self.delay = int(config.get("open.delay.ms", "0")) / 1000

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        OPENS[self.name] = OPENS.get(self.name, 0) + 1
        await asyncio.sleep(self.delay)  # the open's own duration, as a claim's job waiting

    async def put(self, batch: RecordBatch) -> None:
        _keep(self.name, batch)

    async def stop(self) -> None:
        pass


class SlowOpenSink(SinkConnector):
    needs_executors = False

    def task_class(self) -> type[SinkTask]:
        return SlowOpenTask
