"""Log lines carry the connector and task of the coroutine that logs them
(``daemon.logs.context``), in text and in JSON."""

from __future__ import annotations

import asyncio
import io
import json
import logging

from daemon.logs import flush_logging, set_task_context, setup_logging, task_context


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


def test_task_zero_is_kept(restore_root: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "json", stream=out)
    with task_context("sink", 0):
        logging.getLogger("connectd.x").info("in task")
    logging.getLogger("connectd.x").info("outside")
    flush_logging()
    inside, outside = (json.loads(line) for line in out.getvalue().splitlines())
    assert (inside["connector"], inside["task"]) == ("sink", 0)
    assert "connector" not in outside and "task" not in outside
