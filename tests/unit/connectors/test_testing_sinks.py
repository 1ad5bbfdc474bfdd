"""The test connectors (EchoSink, HangSink) and the in-process LocalRunner, without Spark."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from daemon.connectors import default_registry
from daemon.connectors.api import TaskId
from daemon.connectors.testing import (
    BLOCK_FUNCTION,
    COUNT_FUNCTION,
    EchoSinkTask,
    HangSinkTask,
    InjectedFailure,
    LocalRunner,
    sample_batch,
    sample_indices,
)
from daemon.errors import WriteFailed, WriteTimeout
from daemon.runtime.incarnation.context import TaskContext

FAKE_PID = 424242


class FakeExecutor:
    """Counts like the real count function; a block writes the marker as the executor would,
    then waits for its deadline (``WriteTimeout``) or its cancellation."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []
        self.cancelled = 0

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        self.calls.append((fn, 0 if batch is None else batch.num_rows, kwargs))
        if fn == COUNT_FUNCTION:
            return 0 if batch is None else batch.num_rows
        assert fn == BLOCK_FUNCTION
        Path(kwargs["marker"]).write_text(str(FAKE_PID))
        try:
            await asyncio.sleep(timeout)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise WriteTimeout(f"write ran past its deadline of {timeout:g} s (fake)")


def context(name: str, config: dict[str, str], runner: Any) -> TaskContext:
    return TaskContext(TaskId(name, 0), 1, {"name": name, **config}, runner)


# --- EchoSink --------------------------------------------------------------------------------


def test_sample_indices_are_the_first_records_and_every_nth() -> None:
    assert sample_indices(0, 10, 3, 4) == [0, 1, 2, 3, 7]  # records 1, 2, 3, 4, 8
    assert sample_indices(10, 10, 3, 4) == [1, 5, 9]  # records 12, 16, 20
    assert sample_indices(0, 10, 0, 0) == [] and sample_indices(2, 5, 3, 0) == [0]
    began = time.perf_counter()
    assert len(sample_indices(0, 10_000_000, 5, 1_000_000)) == 15  # 5 + 10 multiples
    assert time.perf_counter() - began < 0.1  # proportional to the sample, not the batch


async def test_echo_sink_logs_a_sample_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    config = {"log.first.records": "2", "log.every.records": "5"}
    ctx = context("echo", config, LocalRunner())
    task = EchoSinkTask()
    await task.start(ctx.config, ctx)
    with caplog.at_level(logging.INFO, logger="connectd.connectors.testing"):
        await task.put(sample_batch("t", 0, 0, 7))
        await task.put(sample_batch("t", 0, 7, 0))
        await task.put(sample_batch("t", 0, 7, 4))
    logged = [r.getMessage() for r in caplog.records if "received t-0@" in r.getMessage()]
    assert [m.split("@")[1].split()[0] for m in logged] == ["0", "1", "4", "9"]
    assert "key='key-4'" in logged[2] and "value='value-4" in logged[2]
    assert task.count == 11 and task.logged == 4
    assert await task.pre_commit({}) == {}
    await task.stop()


async def test_echo_sink_fails_on_purpose_after_n_records() -> None:
    ctx = context("echo", {"fail.task.after.records": "5"}, LocalRunner())
    task = EchoSinkTask()
    await task.start(ctx.config, ctx)
    await task.put(sample_batch("t", 0, 0, 3))
    with pytest.raises(InjectedFailure, match="after receiving 6 records") as info:
        await task.put(sample_batch("t", 0, 3, 3))
    assert info.value.retriable


# --- HangSink --------------------------------------------------------------------------------


async def test_hang_sink_writes_n_records_then_blocks_until_its_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runner = FakeExecutor()
    config = {"hang.after.records": "5", "task.write.timeout.ms": "200"}
    ctx = context("hang", config, runner)
    task = HangSinkTask()
    await task.start(ctx.config, ctx)
    await task.put(sample_batch("t", 0, 0, 3))
    await task.put(sample_batch("t", 0, 3, 3))
    assert task.written == 6 and [c[0] for c in runner.calls] == [COUNT_FUNCTION] * 2
    with (
        caplog.at_level(logging.WARNING, logger="connectd.connectors.testing"),
        pytest.raises(WriteTimeout),
    ):
        await task.put(sample_batch("t", 0, 6, 0))  # even an empty put blocks
    fn, rows, kwargs = runner.calls[-1]
    assert (fn, rows, kwargs["task"]) == (BLOCK_FUNCTION, 0, "hang-0")
    assert f"Starting to block in executor pid {FAKE_PID} for task hang-0" in caplog.text
    marker = Path(kwargs["marker"])
    assert task.executor_pid == FAKE_PID and not marker.exists()
    assert not list(marker.parent.glob(marker.name.rsplit("-", 1)[0] + "-*"))  # nothing left
    await task.stop()


async def test_a_stopped_hang_sink_cancels_its_blocked_write() -> None:
    runner = FakeExecutor()
    ctx = context("hang", {"task.write.timeout.ms": "60000"}, runner)
    task = HangSinkTask()
    await task.start(ctx.config, ctx)
    put = asyncio.create_task(task.put(sample_batch("t", 0, 0, 2)))
    while task.executor_pid is None:
        await asyncio.sleep(0.01)
    put.cancel()
    with pytest.raises(asyncio.CancelledError):
        await put
    assert runner.cancelled == 1
    await task.stop()


def test_block_forever_names_its_pid_in_the_executor_log(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    code = (
        "from daemon.connectors.testing import block_forever; "
        f"block_forever(None, None, task='hang-0', marker={str(marker)!r})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert marker.read_text() == str(proc.pid)
        assert proc.poll() is None  # still blocked
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert f"Starting to block in executor pid {proc.pid} for task hang-0" in err


def test_the_test_connectors_are_registered() -> None:
    assert default_registry.resolve("HangSink")().task_class() is HangSinkTask
    assert default_registry.resolve("EchoSinkConnector")().task_class() is EchoSinkTask
    problems = default_registry.resolve("HangSink")().validate({"hang.after.records": "-1"})
    assert [p.key for p in problems] == ["hang.after.records"]


# --- LocalRunner -----------------------------------------------------------------------------


async def test_local_runner_runs_write_functions_in_process() -> None:
    runner = LocalRunner()
    table = sample_batch(count=4).table
    assert await runner.run_in_executor(COUNT_FUNCTION, table, timeout=10) == 4
    who = await runner.run_in_executor("daemon.executor.testing:whoami", None, timeout=10)
    assert who["pid"] == os.getpid() and who["java_pid"] is None
    with pytest.raises(WriteFailed, match="ValueError: no"):
        await runner.run_in_executor("daemon.executor.testing:fail", None, timeout=10, message="no")
    with pytest.raises(WriteTimeout):
        await runner.run_in_executor(
            "daemon.executor.testing:sleep", None, timeout=0.05, seconds=1.0
        )
    assert [c[1] for c in runner.calls] == [4, 0, 0, 0]
