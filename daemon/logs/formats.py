"""How a line looks: ``log.format=text`` for people (without a time stamp under the journal),
``log.format=json`` for log pipelines.

Text::

    2025-01-01 12:00:00,000 INFO  [sink-hang-connector|task-0] connectd.task: Starting task

Under systemd (``$JOURNAL_STREAM`` names our stderr) the journal stamps each line itself, so the
text format drops the time and starts with the syslog priority instead, which journald reads
(``journalctl -p warning`` works)::

    <6>INFO  [sink-hang-connector|task-0] connectd.task: Starting task

JSON is one object per line: ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``,
``message``, ``connector`` and ``task`` when known, ``exc_info`` (the formatted traceback, a
string) when there is one.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from collections.abc import Mapping
from typing import IO, Any


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
