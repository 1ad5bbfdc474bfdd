"""One connector per name: the check a command line's connector files (and ``check-config``'s
files) must pass, as Kafka Connect's standalone mode refuses a second connector of one name."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from daemon.config.problems import Problem


def duplicate_names(named: Sequence[tuple[str, str | Path]]) -> list[Problem]:
    """One error per connector file whose ``name`` an earlier file already has (or that is
    given twice), naming both files: Kafka Connect refuses to start with "Connector a already
    exists" where the last file would otherwise win silently."""
    seen: dict[str, str | Path] = {}
    problems = []
    for name, path in named:
        if name not in seen:
            seen[name] = path
            continue
        first = seen[name]
        again = "the file is given twice" if Path(first) == Path(path) else f"{first} names it too"
        problems.append(
            Problem(
                str(path),
                "name",
                f"Connector {name} already exists: {again}",
                "one file per connector name",
            )
        )
    return problems
