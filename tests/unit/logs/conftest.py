"""Fixtures of the logging tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture
def restore_root() -> Iterator[None]:
    """``setup_logging`` changes the process's root logger: put it back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    logging.captureWarnings(False)
