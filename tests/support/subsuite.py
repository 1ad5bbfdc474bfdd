"""A small suite a test writes, run in a pytest of its own with the project's real settings
(pyproject.toml) and, when the suite copies it, tests/conftest.py (which imports tests/support).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from support.ordering import RECORD_ENV

TESTS = Path(__file__).resolve().parents[1]
PYPROJECT = TESTS.parent / "pyproject.toml"


def run_pytest(root: Path, *args: str, env: Mapping[str, str] = {}) -> tuple[int, str]:
    """pytest ``args`` in ``root``: its exit code and its output. The outer run's ``CI``,
    allocation tracing and record of durations (``support/ordering.py``) are not passed on;
    ``env`` is added."""
    dropped = ("CI", "PYTHONTRACEMALLOC", RECORD_ENV)
    full = {k: v for k, v in os.environ.items() if k not in dropped}
    full["PYTHONPATH"] = str(TESTS)  # the conftest imports tests/support
    full["COLUMNS"] = "300"  # the summary lines whole
    full.update(env)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(PYPROJECT), "--rootdir", str(root),
         "-p", "no:cacheprovider", "-rA", *args],
        cwd=root, env=full, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr
