"""Logging: one line per event, each carrying the connector and task it concerns.

The connector and task come from context variables that the runtime sets in each task's
coroutine (``task_context``), so a line logged by a connector's own code, by the converters or
by the runtime on the task's behalf names the task without anyone passing it around. asyncio
copies the context into every task it creates, so the variables follow the coroutine. A line
may also name them explicitly: ``log.info(..., extra={"connector": name, "task": 0})``.

``log.format=text`` is for people::

    2025-01-01 12:00:00,000 INFO  [sink-hang-connector|task-0] connectd.task: Starting task

Under systemd (``$JOURNAL_STREAM`` names our stderr) the journal stamps each line itself, so the
text format drops the time and starts with the syslog priority instead, which journald reads
(``journalctl -p warning`` works)::

    <6>INFO  [sink-hang-connector|task-0] connectd.task: Starting task

``log.format=json`` is one JSON object per line for log pipelines: ``time`` (ISO 8601, UTC,
milliseconds), ``level``, ``logger``, ``message``, ``connector`` and ``task`` when known,
``exc_info`` (the formatted traceback, a string) when there is one.

With JSON, and under the journal, the executors' own output (Spark, the JVM) is relayed
through logging too (``OutputRelay``, logger ``connectd.executor``): every line on stderr then
parses as JSON, or carries a priority and no second time stamp.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import datetime
import json
import logging
import logging.handlers
import os
import queue as _queue
import re
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Any

connector_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "connectd_connector", default=None
)
task_var: contextvars.ContextVar[int | None] = contextvars.ContextVar("connectd_task", default=None)

_HANDLER_NAME = "connectd"


@contextlib.contextmanager
def task_context(connector: str | None, task: int | None = None) -> Iterator[None]:
    """Mark the lines logged inside as the connector's (and task's)."""
    c_token = connector_var.set(connector)
    t_token = task_var.set(task)
    try:
        yield
    finally:
        task_var.reset(t_token)
        connector_var.reset(c_token)


def set_task_context(connector: str | None, task: int | None = None) -> None:
    """Mark the rest of the current asyncio task's lines (at the top of a task coroutine)."""
    connector_var.set(connector)
    task_var.set(task)


class ContextFilter(logging.Filter):
    """Adds ``connector``, ``task`` and ``context`` (``[name|task-0]`` or empty) to records."""

    def filter(self, record: logging.LogRecord) -> bool:
        connector = getattr(record, "connector", None) or connector_var.get()
        task = getattr(record, "task", None)
        if task is None:
            task = task_var.get()
        record.connector = connector
        record.task = task
        if connector is None:
            record.context = ""
        elif task is None:
            record.context = f"[{connector}] "
        else:
            record.context = f"[{connector}|task-{task}] "
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside values are escaped)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        connector = getattr(record, "connector", None)
        if connector is not None:
            out["connector"] = connector
        task = getattr(record, "task", None)
        if task is not None:
            out["task"] = task
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc_info"] = record.exc_text
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)-5s %(context)s%(name)s: %(message)s"
JOURNAL_FORMAT = "<%(priority)d>%(levelname)-5s %(context)s%(name)s: %(message)s"

#: syslog priorities (sd-daemon.h's ``SD_ERR`` ...) of logging's levels.
_PRIORITIES = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6))


class JournalFormatter(logging.Formatter):
    """Text without a time stamp (journald adds its own), prefixed with the syslog priority."""

    def __init__(self) -> None:
        super().__init__(JOURNAL_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.priority = next((p for level, p in _PRIORITIES if record.levelno >= level), 7)
        return super().format(record)


def under_journal(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """True if ``stream`` is connected to the journal: ``$JOURNAL_STREAM`` (``DEVICE:INODE``, set
    by systemd) names the same file as ``stream``'s descriptor. A child that inherited the
    variable but writes elsewhere (a redirect, a pipe) keeps its time stamps."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    try:
        st = os.fstat(stream.fileno())
        return (int(device), int(inode)) == (st.st_dev, st.st_ino)
    except (ValueError, OSError, AttributeError):  # no descriptor (a StringIO), a bad value
        return False


def formatter(fmt: str, journal: bool) -> logging.Formatter:
    """The formatter of ``log.format`` (``text`` or ``json``); ``journal`` drops the time."""
    if fmt == "json":
        return JsonFormatter()
    if journal:
        return JournalFormatter()
    return logging.Formatter(TEXT_FORMAT)


def setup_logging(
    level: str = "INFO",
    fmt: str = "text",
    stream: IO[str] | None = None,
    *,
    journal: bool | None = None,
    threaded: bool = True,
) -> None:
    """Configure the root logger: one handler to ``stream`` (stderr), the level and format of
    the worker config. Calling again replaces connectd's handler (never duplicates it).

    ``journal``: whether the journal reads ``stream`` (default: ``under_journal``).
    ``threaded=False``: lines are written where they are logged, without the writer thread
    (for a process whose loop must not trade the GIL with one: the REST front).
    """
    global _listener
    out = stream or sys.stderr
    if journal is None:
        journal = under_journal(out)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    if _listener is not None:
        _listener.stop()  # writes out what it holds
        _listener = None
    # Lines are formatted where they are logged (the context variables live there) and written
    # by a thread: a slow or stalled stderr (a full pipe to journald) never blocks the loop.
    handler: logging.Handler
    if threaded:
        queue: _queue.Queue[logging.LogRecord] = _queue.Queue()
        handler = logging.handlers.QueueHandler(queue)
        writer = logging.StreamHandler(out)
        writer.setFormatter(logging.Formatter("%(message)s"))
        _listener = logging.handlers.QueueListener(queue, writer)
        _listener.start()
    else:
        handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(ContextFilter())
    handler.setFormatter(formatter(fmt, journal))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # Python warnings become lines of the same format
    # aiokafka logs every group (re)join and fetch hiccup at INFO: keep its noise down.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("py4j").setLevel(max(logging.WARNING, root.level))


def flush_logging() -> None:
    """Wait until every line logged so far is written (the writer thread drains its queue)."""
    if _listener is not None:
        _listener.queue.join()  # type: ignore[attr-defined]


def _stop_writer() -> None:
    global _listener
    if _listener is not None:
        _listener.stop()
        _listener = None


_listener: logging.handlers.QueueListener | None = None
atexit.register(_stop_writer)


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
