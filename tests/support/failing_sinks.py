"""Sinks that fail on purpose, for tests of what a failing connector costs the rest of a worker.

``StartFailingSink`` (``connector.class=support.failing_sinks:StartFailingSink``): every task's
``start`` raises a retriable ``OSError``, as a task whose database is unreachable would; each
call is counted in ``STARTS`` (in-process daemons), so a test knows how many task creations
failed.

``GreedySink`` (``support.failing_sinks:GreedySink``): generates two more task configurations
than ``tasks.max`` allows; its tasks accept records and write nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from daemon.connectors.api import SinkConnector, SinkTask, SinkTaskContext
from daemon.connectors.records import RecordBatch

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
