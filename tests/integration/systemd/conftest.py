"""Fixtures of the systemd integration tests (helpers in ``notify.py`` next to this file)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.notify import Listener


@pytest.fixture
def listener() -> Iterator[Listener]:
    """A bound datagram socket for NOTIFY_SOCKET, closed at teardown."""
    # A short directory: AF_UNIX paths are limited to 107 bytes, pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="connectd-notify-") as directory:
        lst = Listener(str(Path(directory) / "notify.sock"))
        try:
            yield lst
        finally:
            lst.close()
