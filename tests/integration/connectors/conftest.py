"""Fixtures for the connectors' integration tests: a warm Spark pool and tasks driven directly.

``sink_pool`` is the session's ``spark_pool`` (tests/support/spark.py). ``sink_task`` starts
a task with a ``TaskContext`` whose runner is that pool, the way the runtime will, and stops every
task it started at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pyarrow as pa
import pytest
from support.spark import ThreadedPool

from daemon.connectors.api import SinkTask, TaskId
from daemon.connectors.records import TopicPartition
from daemon.runtime.incarnation.context import TaskContext


class PoolRunner:
    """The runtime's binding of one task id to the pool (``ExecutorRunner``)."""

    def __init__(self, pool: ThreadedPool, task_id: str) -> None:
        self.pool = pool
        self.task_id = task_id

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, spark: bool = True, **kwargs: Any
    ) -> Any:
        return await self.pool.run(
            self.task_id, fn, batch, timeout=timeout, kwargs=kwargs, spark=spark
        )


@pytest.fixture(scope="session")
def sink_pool(spark_pool: ThreadedPool) -> ThreadedPool:
    """The session's warm Spark pool (tests/support/spark.py, loaded by tests/conftest.py)."""
    return spark_pool


StartTask = Callable[..., Awaitable[tuple[Any, TaskContext]]]


@pytest.fixture
async def sink_task(sink_pool: ThreadedPool) -> AsyncIterator[StartTask]:
    """``await sink_task(TaskClass, config, epoch=1, partitions=(), connector="c", task=0)``:
    a started task with its partitions opened; stopped at teardown."""
    started: list[SinkTask] = []

    async def start(
        cls: type[SinkTask],
        config: dict[str, str],
        *,
        epoch: int = 1,
        partitions: tuple[TopicPartition, ...] = (),
        connector: str = "c",
        task: int = 0,
    ) -> tuple[Any, TaskContext]:
        task_id = TaskId(connector, task)
        ctx = TaskContext(task_id, epoch, config, PoolRunner(sink_pool, str(task_id)))
        instance = cls()
        await instance.start(config, ctx)
        started.append(instance)
        ctx.set_assignment(partitions)
        await instance.open(partitions)
        return instance, ctx

    yield start
    for instance in started:
        await instance.stop()
