"""Python log levels in Connect's ``/admin/loggers`` terms (log4j level names, ``root``).

Levels are read and set on the process's ``logging`` loggers at run time. Names are log4j's
(``TRACE``, ``DEBUG``, ``INFO``, ``WARN``, ``ERROR``, ``FATAL``, ``OFF``); Python's own names
(``WARNING``, ``CRITICAL``) are accepted too. As in Connect, setting a namespace sets it and
every existing logger below it, and ``last_modified`` records when this API last did so.

Levels are the process's, so the record of when each was last set is too: the REST API's
``PUT /admin/loggers`` and a distributed worker applying a cluster-wide level read from the
config topic (``scope=cluster``) share it.
"""

from __future__ import annotations

import logging
import time

ROOT = "root"
TRACE = 5  # below DEBUG, as log4j's TRACE

_BY_NAME = {
    "ALL": 1,
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
_NAMES = [  # highest first: a level is named by the first threshold it reaches
    (logging.CRITICAL + 10, "OFF"),
    (logging.CRITICAL, "FATAL"),
    (logging.ERROR, "ERROR"),
    (logging.WARNING, "WARN"),
    (logging.INFO, "INFO"),
    (logging.DEBUG, "DEBUG"),
    (TRACE, "TRACE"),
]


def parse_level(text: str) -> int | None:
    """The Python level for a log4j or Python level name (any case); ``None`` if unknown."""
    return _BY_NAME.get(text.strip().upper())


def level_name(level: int) -> str:
    for threshold, name in _NAMES:
        if level >= threshold:
            return name
    return "ALL"


def _is_root(name: str) -> bool:
    return name.lower() == ROOT


def _existing() -> dict[str, logging.Logger]:
    """Loggers that exist (placeholders for unused parent names are not loggers)."""
    found = logging.Logger.manager.loggerDict
    return {name: lg for name, lg in list(found.items()) if isinstance(lg, logging.Logger)}


#: When each logger's level was last set through ``LoggerLevels`` (epoch ms), process-wide.
_MODIFIED: dict[str, int] = {}


class LoggerLevels:
    """Reads and sets levels; remembers when each logger's level was last set here."""

    def __init__(self) -> None:
        self._modified = _MODIFIED

    def _entry(self, name: str, logger: logging.Logger) -> dict[str, object]:
        return {
            "level": level_name(logger.getEffectiveLevel()),
            "last_modified": self._modified.get(name),
        }

    def level(self, name: str) -> dict[str, object] | None:
        """``{"level", "last_modified"}`` of an existing logger (effective level); else None."""
        if _is_root(name):
            return self._entry(ROOT, logging.getLogger())
        logger = _existing().get(name)
        return None if logger is None else self._entry(name, logger)

    def all_levels(self) -> dict[str, dict[str, object]]:
        """The root logger and every logger whose level is set explicitly, by name."""
        out = {
            name: self._entry(name, logger)
            for name, logger in sorted(_existing().items())
            if logger.level != logging.NOTSET
        }
        out[ROOT] = self._entry(ROOT, logging.getLogger())
        return out

    def set_level(self, namespace: str, level: int) -> list[str]:
        """Set ``namespace`` (created if needed) and every existing logger below it to
        ``level``; ``root`` sets every logger. Returns the names changed, sorted."""
        now = int(time.time() * 1000)
        if _is_root(namespace):
            targets = {**_existing(), ROOT: logging.getLogger()}
        else:
            prefix = namespace + "."
            targets = {
                name: logger
                for name, logger in _existing().items()
                if name == namespace or name.startswith(prefix)
            }
            targets.setdefault(namespace, logging.getLogger(namespace))
        for name, logger in targets.items():
            logger.setLevel(level)
            self._modified[name] = now
        return sorted(targets)
