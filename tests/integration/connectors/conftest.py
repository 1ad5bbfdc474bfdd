"""Fixtures for the connectors' integration tests: a warm Spark pool and tasks driven directly.

``sink_pool`` is the session's ``spark_pool`` (tests/support/spark.py) when that plugin is
loaded, else a pool of the same shape owned by this directory. ``sink_task`` starts a task
with a ``TaskContext`` whose runner is that pool, the way the runtime will, and stops every
task it started at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from support import procs
from support.spark import ThreadedPool, spark_settings

from daemon.connectors.api import SinkTask, TaskContext, TaskId
from daemon.connectors.records import TopicPartition


class PoolRunner:
    """The runtime's binding of one task id to the pool (``ExecutorRunner``)."""

    def __init__(self, pool: ThreadedPool, task_id: str) -> None:
        self.pool = pool
        self.task_id = task_id

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        return await self.pool.run(self.task_id, fn, batch, timeout=timeout, kwargs=kwargs)


@pytest.fixture(scope="session")
def sink_pool(request: pytest.FixtureRequest) -> Iterator[ThreadedPool]:
    try:
        pool: ThreadedPool = request.getfixturevalue("spark_pool")
    except pytest.FixtureLookupError:
        pass
    else:
        yield pool
        return
    own = ThreadedPool(spark_settings(cds_build=True))
    unregister = procs.register_session_owner(own.pids)
    try:
        own.start()
        own.wait_ready(1)
        yield own
    finally:
        own.close()
        unregister()


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
