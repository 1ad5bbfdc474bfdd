"""Log lines carry the connector and task; the loop-lag monitor sees a blocked loop."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import Iterator

import pytest

from daemon.logs import flush_logging, set_task_context, setup_logging, task_context
from daemon.runtime.looplag import LoopLag


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)


async def test_text_lines_name_the_task(restore_root: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "text", stream=out)
    log = logging.getLogger("connectd.test")

    async def task_body() -> None:
        set_task_context("sink", 3)
        log.info("inside")

    await asyncio.get_running_loop().create_task(task_body())
    log.info("outside")
    with task_context("sink"):
        log.warning("connector only")
    flush_logging()
    lines = out.getvalue().splitlines()
    assert "[sink|task-3] connectd.test: inside" in lines[0]
    assert lines[1].endswith("INFO  connectd.test: outside")
    assert "[sink] connectd.test: connector only" in lines[2]


def test_json_lines(restore_root: None) -> None:
    out = io.StringIO()
    setup_logging("DEBUG", "json", stream=out)
    setup_logging("DEBUG", "json", stream=out)  # again: still one handler
    with task_context("sink", 0):
        try:
            raise ValueError("bad")
        except ValueError:
            logging.getLogger("connectd.x").exception("failed")
    flush_logging()
    (line,) = out.getvalue().splitlines()
    doc = json.loads(line)
    assert doc["connector"] == "sink" and doc["task"] == 0 and doc["level"] == "ERROR"
    assert doc["message"] == "failed" and "ValueError: bad" in doc["exc_info"]


async def test_lag_monitor_sees_a_blocked_loop() -> None:
    seen: list[float] = []
    lag = LoopLag(interval=0.02, on_sample=seen.append)
    lag.start()
    try:
        await asyncio.sleep(0.1)
        time.sleep(0.3)  # block the loop on purpose
        await asyncio.sleep(0.1)
    finally:
        await lag.stop()
    stats = lag.stats()
    assert stats.samples == len(seen) >= 3
    assert 0.2 < stats.max == stats.total_max < 1.0
    assert stats.p50 < 0.1
    lag.reset()
    assert lag.stats().samples == 0
