"""Fixtures of the logging tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture
def restore_root() -> Iterator[None]:
    """``setup_logging`` changes the process's root logger: put it back. Python warnings are
    not captured into logging at the start either: a daemon an earlier test of this process ran
    may have left them captured, and then ``setup_logging``'s capture keeps the ``showwarning``
    that was current then, not the one pytest installs for this test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logging.captureWarnings(False)
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    logging.captureWarnings(False)
