"""HangSink with real executors: the seed demo's hung task, made harmless by the deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from support.spark import ThreadedPool, alive, walk_tree

from daemon.connectors.records import TopicPartition
from daemon.connectors.testing import HangSinkTask, sample_batch
from daemon.errors import WriteTimeout
from daemon.runtime.incarnation.context import TaskContext

pytestmark = pytest.mark.integration

StartTask = Callable[..., Awaitable[tuple[Any, TaskContext]]]  # the sink_task fixture
TP = TopicPartition("t", 0)


async def test_put_blocks_in_the_executor_until_its_deadline_kills_the_tree(
    sink_task: StartTask, sink_pool: ThreadedPool, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"hang.after.records": "10", "task.write.timeout.ms": "2000"}
    task, _ = await sink_task(HangSinkTask, config, connector="hang", partitions=(TP,))
    await task.put(sample_batch("t", 0, 0, 10))  # counted by a trivial executor function
    assert task.written == 10 and task.executor_pid is None

    began = time.monotonic()
    put = asyncio.create_task(task.put(sample_batch("t", 0, 10, 0)))  # even an empty put
    while task.executor_pid is None and not put.done() and time.monotonic() - began < 60:
        await asyncio.sleep(0.02)
    pid = task.executor_pid
    assert pid is not None and pid == sink_pool.current_pid("hang-0")
    assert f"Starting to block in executor pid {pid} for task hang-0" in caplog.text
    tree = walk_tree(pid)
    assert any(s.comm == "java" for s in tree.values())  # the executor's JVM is in its tree

    with pytest.raises(WriteTimeout, match="deadline of 2 s"):
        await put
    assert time.monotonic() - began >= 2.0
    assert alive(tree.values()) == []  # killed and reaped: no process of the tree remains
    assert sink_pool.current_pid("hang-0") is None
