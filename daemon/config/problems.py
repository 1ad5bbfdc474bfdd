"""Problems found in a configuration, and how they are reported.

Every loader collects *all* the problems it finds before giving up: a user fixing a file sees
every mistake in one run, not one per run. Warnings travel back with the loaded model; errors
are raised together as one ``InvalidConfig`` (a ``ConfigError``).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from daemon.errors import InvalidConfig


class Severity(enum.StrEnum):
    """How bad a problem is: errors stop the load, warnings are reported and the load goes on."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a configuration.

    ``str()`` gives one line: ``file[:line]: key: message[; expected ...]``, for example
    ``worker.properties:7: offset.flush.interval.ms: 'abc' is not a number; expected
    milliseconds as an integer ≥ 0``. The severity is not part of ``str()``; printers prefix it.
    """

    file: str | None
    key: str | None
    message: str
    expected: str | None = None
    severity: Severity = Severity.ERROR
    line: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.key is not None:
            parts.append(self.key)
        parts.append(
            self.message if self.expected is None else f"{self.message}; expected {self.expected}"
        )
        return ": ".join(parts)

    def located(self, file: str | None, lines: Mapping[str, int] | None = None) -> Problem:
        """This problem with ``file`` (if it has none) and the key's line number filled in."""
        line = self.line
        if line is None and lines is not None and self.key is not None:
            line = lines.get(self.key)
        return dataclasses.replace(
            self, file=self.file if self.file is not None else file, line=line
        )


def error(key: str | None, message: str, expected: str | None = None) -> Problem:
    return Problem(None, key, message, expected, Severity.ERROR)


def warning(key: str | None, message: str, expected: str | None = None) -> Problem:
    return Problem(None, key, message, expected, Severity.WARNING)


def errors_in(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.is_error]


def raise_if_errors(problems: Iterable[Problem]) -> list[Problem]:
    """Raise ``InvalidConfig`` carrying every problem if any is an error; else return warnings."""
    problems = list(problems)
    if any(p.is_error for p in problems):
        raise InvalidConfig(problems)
    return problems


def suggest(key: str, candidates: Iterable[str], cutoff: float = 0.8) -> str | None:
    """The candidate ``key`` was most likely meant to be, if one is close enough.

    Compared case-insensitively, so ``Tasks.Max`` suggests ``tasks.max``.
    """
    by_lower = {c.lower(): c for c in candidates}
    found = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[found[0]] if found else None


def unknown_key(key: str, candidates: Iterable[str], severity: Severity) -> Problem:
    """An 'unknown key' problem, with a "did you mean" when a candidate is close."""
    guess = suggest(key, candidates)
    message = f"unknown key '{key}'" + (f", did you mean '{guess}'?" if guess else "")
    return Problem(None, key, message, None, severity)
