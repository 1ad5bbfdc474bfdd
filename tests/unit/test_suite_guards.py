"""The suite's own guards, run over small suites in a pytest of their own with the project's
real settings (pyproject.toml) and tests/conftest.py:

- under CI (``CI=true``) a skipped test fails the run, unless the conftest's allow-list names it;
- a test that leaves a zombie (a child nobody waited for) fails like one that leaves a process
  running;
- an unclosed file or socket fails the test, also when it is only noticed in ``__del__``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.subsuite import TESTS, run_pytest

SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("the tool is not installed")

@pytest.mark.skip(reason="not today")
def test_marked():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False

def test_runs():
    pass
"""

MODULE_SKIP = """
import pytest

pytest.skip("nothing here without the tool", allow_module_level=True)
"""

ALLOWED = """
import pytest

def test_ipv6_loopback_when_available():
    pytest.skip("no IPv6 here")
"""

LEAKS = """
import os, socket, time

import psutil

def test_zombie():
    pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
    deadline = time.monotonic() + 10
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)

def test_unclosed_file(tmp_path):
    open(tmp_path / "f", "w")

class Holder:
    def __init__(self):
        self.sock = socket.socket()
        self.me = self  # a cycle: only the garbage collector frees it, in __del__ territory

def test_unclosed_socket_found_by_the_collector():
    Holder()

def test_clean(tmp_path):
    with open(tmp_path / "f", "w") as f:
        f.write("x")
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    tests = tmp_path / "tests"
    (tests / "unit" / "rest").mkdir(parents=True)
    (tests / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tests / "test_skipping.py").write_text(SKIPPING)
    (tests / "test_module_skip.py").write_text(MODULE_SKIP)
    (tests / "unit" / "rest" / "test_server.py").write_text(ALLOWED)
    (tests / "test_leaks.py").write_text(LEAKS)
    return tmp_path


def _pytest(root: Path, ci: str | None, *paths: str) -> tuple[int, str]:
    return run_pytest(root, *paths, env={} if ci is None else {"CI": ci})


def _tally(out: str) -> dict[str, int]:
    last = [line for line in out.splitlines() if re.match(r"=+ .* in [\d.]+s", line)][-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}


def test_skips_fail_the_run_under_ci(suite: Path) -> None:
    code, out = _pytest(suite, "true", "tests/test_skipping.py", "tests/unit")
    assert code == pytest.ExitCode.TESTS_FAILED, out
    # A skip in the test body fails it; one in setup (a skip mark, a fixture that skips: the
    # session broker without Java) makes it an error.
    tally = {"failed": 1, "error": 1, "passed": 1, "skipped": 1, "xfailed": 1}
    assert _tally(out) == tally, out
    assert "test_needs_a_tool skipped under CI (CI=true): Skipped: the tool is not installed" in out
    assert "test_marked skipped under CI" in out
    assert "SKIPPED [1] tests/unit/rest/test_server.py" in out  # on the allow-list


def test_a_module_skip_stops_the_run_under_ci(suite: Path) -> None:
    code, out = _pytest(suite, "true", "tests/test_module_skip.py", "tests/test_skipping.py")
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert "ERROR tests/test_module_skip.py - tests/test_module_skip.py skipped under CI" in out


def test_skips_are_skips_outside_ci(suite: Path) -> None:
    paths = ("tests/test_module_skip.py", "tests/test_skipping.py", "tests/unit")
    code, out = _pytest(suite, None, *paths)
    assert code == pytest.ExitCode.OK, out
    assert _tally(out) == {"passed": 1, "skipped": 4, "xfailed": 1}, out


def test_zombies_and_unclosed_resources_fail(suite: Path) -> None:
    code, out = _pytest(suite, None, "tests/test_leaks.py")
    assert code == pytest.ExitCode.TESTS_FAILED, out
    assert "PASSED tests/test_leaks.py::test_clean" in out
    assert "ERROR tests/test_leaks.py::test_zombie - Failed: test left 1 process(es) behind" in out
    assert re.search(r"pid \d+: <zombie> true \(parent \d+ never reaped it\)", out), out
    unclosed = r"FAILED tests/test_leaks.py::test_unclosed_file - .*unclosed file|FileIO"
    assert re.search(unclosed, out), out
    # found at the test's own teardown, not at some later test's or at the end of the session
    found = "ERROR tests/test_leaks.py::test_unclosed_socket_found_by_the_collector - pytest.Pyt"
    assert found + "estUnraisableExceptionWarning" in out, out
    assert _tally(out) == {"failed": 1, "passed": 3, "errors": 2}, out
