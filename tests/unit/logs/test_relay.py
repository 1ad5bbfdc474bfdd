"""The relay that turns a child's raw output into log lines (``daemon.logs.relay``)."""

from __future__ import annotations

import asyncio
import io
import json
import os

from daemon.logs import flush_logging, setup_logging
from daemon.logs.relay import OutputRelay


async def test_relay_logs_each_line_of_a_child(restore_root: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "json", stream=out)
    relay = OutputRelay()
    relay.start()
    fd = os.open(relay.path, os.O_WRONLY | os.O_APPEND)  # as the executor pool opens it
    try:
        proc = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            'echo "Setting default log level to WARN"; echo "26/11/22 06:29:11 WARN Utils: x" >&2',
            stdout=fd,
            stderr=asyncio.subprocess.STDOUT,
        )
    finally:
        os.close(fd)
    assert await proc.wait() == 0
    await relay.close()
    flush_logging()
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["logger"], d["level"]) for d in docs] == [
        ("connectd.executor", "INFO"),
        ("connectd.executor", "WARNING"),
    ]
    assert docs[0]["message"] == "Setting default log level to WARN"
    assert docs[1]["message"] == "WARN Utils: x"  # Spark's own time stamp dropped
