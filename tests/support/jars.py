"""Stand-in jars for tests that need a format's jars present but never load them."""

from __future__ import annotations

import zipfile
from pathlib import Path


def stand_in_jar(path: Path) -> None:
    """A whole, empty jar (a zip file) at ``path``: present for ``formats.jar_problem``."""
    with zipfile.ZipFile(path, "w"):
        pass
