"""tests/support/ordering.py: test files longest first for ``make test``'s workers, and the
record of a run that the order comes from."""

from __future__ import annotations

import json
from pathlib import Path

from support import ordering
from support.subsuite import TESTS, run_pytest


def test_files_go_longest_first_and_keep_their_tests_in_order() -> None:
    ids = [
        "tests/unit/test_a.py::test_1",
        "tests/unit/test_a.py::test_2",
        "tests/integration/test_b.py::test_1",
        "tests/integration/test_c.py::test_1",
        "tests/integration/test_c.py::test_2[x]",
        "tests/integration/test_c.py::test_2[y]",
    ]
    known = {"tests/integration/test_c.py": 100.0, "tests/unit/test_a.py": 50.0}
    order = [ids[i] for i in ordering.longest_first(ids, known)]
    # c (100 s recorded), a (50 s recorded), b (not recorded: an integration file's default)
    assert order == ids[3:] + ids[:2] + ids[2:3]


def test_unrecorded_files_count_as_their_kind_and_ties_keep_the_collection_order() -> None:
    ids = [
        "tests/unit/test_a.py::test_1",
        "tests/unit/test_b.py::test_1",
        "tests/integration/test_c.py::test_1",
        "tests/integration/test_d.py::test_1",
    ]
    order = [ids[i] for i in ordering.longest_first(ids, {})]
    assert order == [ids[2], ids[3], ids[0], ids[1]]
    assert ordering.weight("tests/integration/x.py", {}) == ordering.DEFAULT_S
    assert ordering.weight("tests/unit/x.py", {}) == ordering.DEFAULT_UNIT_S


def test_the_recorded_durations_name_files_that_exist() -> None:
    known = ordering.recorded()
    assert known, "tests/durations.json is missing or empty"
    root = TESTS.parent
    gone = [name for name in known if not (root / name).is_file()]
    assert not gone, f"tests/durations.json names files that no longer exist: {gone}"


SLOW = """
import time

def test_slow():
    time.sleep(0.3)
"""
FAST = """
def test_fast():
    pass
"""


def test_a_run_writes_its_record_by_file(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tests / "test_slow.py").write_text(SLOW)
    (tests / "test_fast.py").write_text(FAST)
    out = tmp_path / "durations.json"
    code, output = run_pytest(tmp_path, "tests", env={ordering.RECORD_ENV: str(out)})
    assert code == 0, output
    record = json.loads(out.read_text())
    assert list(record["files"]) == ["tests/test_slow.py", "tests/test_fast.py"]
    assert record["files"]["tests/test_slow.py"] >= 0.3
    assert record["total_s"] >= record["files"]["tests/test_slow.py"]
