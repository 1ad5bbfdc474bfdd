"""Logging: one line per event, each carrying the connector and task it concerns.

The connector and task come from context variables that the runtime sets in each task's
coroutine (``task_context``), so a line logged by a connector's own code, by the converters or
by the runtime on the task's behalf names the task without anyone passing it around. asyncio
copies the context into every task it creates, so the variables follow the coroutine.

``log.format=text`` is for people and journald::

    2025-01-01 12:00:00,000 INFO  [sink-hang-connector|task-0] connectd.task: Starting task

``log.format=json`` is one JSON object per line for log pipelines (``ts``, ``level``,
``logger``, ``message``, ``connector``, ``task``, ``exc``).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
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
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record),
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
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)-5s %(context)s%(name)s: %(message)s"


def setup_logging(level: str = "INFO", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Configure the root logger: one handler to ``stream`` (stderr), the level and format of
    the worker config. Calling again replaces connectd's handler (never duplicates it)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # aiokafka logs every group (re)join and fetch hiccup at INFO: keep its noise down.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("py4j").setLevel(max(logging.WARNING, root.level))
