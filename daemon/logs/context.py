"""Which connector and task a line concerns, without anyone passing them around.

The runtime sets two context variables at the top of each task's coroutine
(``set_task_context``); asyncio copies the context into every task it creates, so the variables
follow the coroutine, and a line logged by a connector's own code, by the converters or by the
runtime on the task's behalf names the task. A line may also name them explicitly:
``log.info(..., extra={"connector": name, "task": 0})``. ``ContextFilter`` puts them on each
record for the formatters.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

connector_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "connectd_connector", default=None
)
task_var: contextvars.ContextVar[int | None] = contextvars.ContextVar("connectd_task", default=None)


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
