"""Problems found in a configuration, and how they are reported.

Every loader collects *all* the problems it finds before giving up: a user fixing a file sees
every mistake in one run, not one per run. Warnings travel back with the loaded model; errors
are raised together as one ``InvalidConfig`` (a ``ConfigError``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from daemon.errors import InvalidConfig

# The value types sit at the bottom of the layers (``daemon.errors`` carries them too).
from daemon.structs import Problem as Problem
from daemon.structs import Severity as Severity


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
