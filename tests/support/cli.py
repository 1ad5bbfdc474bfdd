"""The ``connectd`` command line as a user runs it: a real subprocess of this checkout."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A user's bare environment: nothing of the test run's leaks into the command.
BARE_ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


def connectd(
    *args: str | Path, cwd: Path = ROOT, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m daemon ARGS`` in ``cwd`` (``env``: None inherits the test run's)."""
    return subprocess.run(
        [sys.executable, "-m", "daemon", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=None if env is None else dict(env),
        check=False,
    )
