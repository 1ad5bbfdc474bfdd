"""pytest plugin: test files longest first, so ``make test``'s two workers finish together.

``make test`` hands out whole files (``--dist loadfile``) to two pytest-xdist workers, in
collection order (``--no-loadscope-reorder``; xdist's own reordering puts the files with the
most tests first, which are short unit files, and leaves the long integration files for the
end, where one worker runs them while the other is idle). Here the files are put longest first
(the "longest processing time" rule), each file's tests in their own order, by the seconds each
file took in a recorded run: ``tests/durations.json``. A file it does not list counts as
``DEFAULT_S`` (integration) or ``DEFAULT_UNIT_S``, so a new file needs no entry to run.

``CONNECTD_TEST_DURATIONS_OUT=<path> make test`` writes a new record of the run (setup, call
and teardown of every test, summed by file) at the end of the session; copy it over
``tests/durations.json`` when the suite's shape has changed.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
RECORD_ENV = "CONNECTD_TEST_DURATIONS_OUT"
DEFAULT_S = 30.0
DEFAULT_UNIT_S = 2.0

_spent: dict[str, float] = defaultdict(float)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds per test file from a recorded run; empty when there is none."""
    try:
        files = json.loads(path.read_text())["files"]
    except FileNotFoundError:
        return {}
    return {str(name): float(seconds) for name, seconds in files.items()}


def weight(path: str, known: dict[str, float]) -> float:
    if path in known:
        return known[path]
    return DEFAULT_UNIT_S if path.startswith("tests/unit/") else DEFAULT_S


def longest_first(nodeids: list[str], known: dict[str, float]) -> list[int]:
    """Indexes of ``nodeids`` with files longest first; a file's tests keep their order, and
    files of equal weight keep the collection's."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(file_of(nodeid), i)

    def key(i: int) -> tuple[float, int, int]:
        path = file_of(nodeids[i])
        return (-weight(path, known), first_seen[path], i)

    return sorted(range(len(nodeids)), key=key)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    order = longest_first([item.nodeid for item in items], recorded())
    items[:] = [items[i] for i in order]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _spent[file_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get(RECORD_ENV)
    if not out or hasattr(session.config, "workerinput"):  # the controller writes it
        return
    files = dict(sorted(((f, round(s, 1)) for f, s in _spent.items()), key=lambda kv: -kv[1]))
    doc = {"total_s": round(sum(_spent.values()), 1), "files": files}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
