"""Where lines go: ``setup_logging`` gives the root logger connectd's one handler (the level and
format of the worker config), whose lines a writer thread puts on stderr.

The root logger and the writer thread are the process's, not a daemon's: whoever owns the
process (the CLI, the REST front process) sets logging up, once, and may set it up again (a
reload) without a duplicate handler.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import queue as _queue
import sys
from typing import IO

from daemon.logs.context import ContextFilter
from daemon.logs.formats import formatter, under_journal

_HANDLER_NAME = "connectd"


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

    aiokafka's loggers get the broker-outage filter from the daemon that owns it
    (``daemon.kafka.outages``; ``Daemon.run`` installs it), not from here.
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


# The root logger's writer thread: one per process, as the root logger is.
_listener: logging.handlers.QueueListener | None = None
atexit.register(_stop_writer)
