"""The executors' own output (Spark, the JVM) relayed through logging, line by line.

With ``log.format=json``, and under the journal, child processes' raw output goes through a
pipe whose lines are logged (``OutputRelay``, logger ``connectd.executor``): every line on
stderr then parses as JSON, or carries a priority and no second time stamp. ``relay_output``
says when one is needed; ``daemon.assembly`` starts it and the ``Daemon`` closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from typing import IO

from daemon.logs.formats import under_journal


def relay_output(fmt: str, stream: IO[str] | None = None) -> bool:
    """Whether child processes' raw output should go through logging (``OutputRelay``): with
    ``log.format=json`` (else those lines would not parse) and under the journal (else Spark's
    lines would carry a second time stamp and no priority)."""
    return fmt == "json" or under_journal(stream or sys.stderr)


class OutputRelay:
    """A pipe whose lines are logged one by one (``logger`` at INFO; lines that look like a
    warning or an error at that level), for child processes' raw output. A leading log4j time
    stamp (Spark's ``26/01/31 12:00:00``) is dropped: the log line has its own.

    ``path`` (``/dev/fd/N``) is what a child's output may be opened as. ``start`` reads on the
    running loop; ``close`` closes our write end and waits (bounded) for what is left, which
    arrives once every child holding the pipe has exited.
    """

    def __init__(self, logger: str = "connectd.executor") -> None:
        self.log = logging.getLogger(logger)
        self._read_fd, self._write_fd = os.pipe2(os.O_CLOEXEC)
        self._task: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        return f"/dev/fd/{self._write_fd}"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="output relay")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        pipe = os.fdopen(self._read_fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
        try:
            while True:
                try:
                    raw = await reader.readline()
                except ValueError:  # a line beyond the limit: log what was read
                    raw = await reader.read(1 << 20)
                if not raw:
                    return
                line = _LOG4J_STAMP.sub("", raw.decode(errors="replace").rstrip(), count=1)
                if line:
                    self.log.log(_level_of(line), "%s", line)
        finally:
            transport.close()

    async def close(self, timeout: float = 2.0) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1
        task, self._task = self._task, None
        if task is None:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)
            return
        try:
            async with asyncio.timeout(timeout):
                await task
        except TimeoutError:  # a stray holder of the pipe: stop reading anyway
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


_LOG4J_STAMP = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? ")  # Spark's: our own stamps
_LEVEL_WORD = re.compile(r"(?:^|\s)(WARN|WARNING|ERROR|FATAL|SEVERE)\s+\S")


def _level_of(line: str) -> int:
    """A log4j-style level word (``25/01/01 12:00:00 WARN Utils: ...``) near the start, or a
    Python traceback; everything else is INFO."""
    if line.startswith("Traceback"):
        return logging.ERROR
    found = _LEVEL_WORD.search(line[:60])
    if found is None:
        return logging.INFO
    return logging.WARNING if found.group(1).startswith("WARN") else logging.ERROR
