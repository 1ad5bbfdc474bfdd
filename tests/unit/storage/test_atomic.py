"""Atomic file primitives: all or nothing, even when killed at any step."""

from __future__ import annotations

import os
import time
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from daemon.storage.atomic import (
    atomic_write,
    create_marker,
    publish_exclusive,
    remove_stale_temps,
)

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

OLD, NEW = b"old content " * 1000, b"new content " * 3000


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    atomic_write(path, OLD)
    atomic_write(path, NEW, mode=0o600)
    assert path.read_bytes() == NEW
    assert os.listdir(tmp_path) == ["state.json"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_atomic_write_killed_at_every_step_is_old_or_new(kit: Kit, tmp_path: Path) -> None:
    seen = set()
    for step in count():
        path = tmp_path / f"f{step}"
        atomic_write(path, OLD)
        status = kit.run_killed_at(step, lambda path=path: atomic_write(path, NEW))
        assert status in (0, kit.killed)
        content = path.read_bytes()
        assert content in (OLD, NEW)
        seen.add(content)
        assert remove_stale_temps(tmp_path, older_than=0) <= 1
        if status == 0:
            break
    assert seen == {OLD, NEW}


def test_publish_exclusive_refuses_an_existing_name(tmp_path: Path) -> None:
    path = tmp_path / "00001.json"
    publish_exclusive(path, OLD)
    with pytest.raises(FileExistsError):
        publish_exclusive(path, NEW)
    assert path.read_bytes() == OLD
    assert os.listdir(tmp_path) == ["00001.json"]  # the loser's temp file is gone too


def test_publish_exclusive_killed_at_every_step_is_absent_or_whole(
    kit: Kit, tmp_path: Path
) -> None:
    seen = set()
    for step in count():
        path = tmp_path / f"r{step}"
        status = kit.run_killed_at(step, lambda path=path: publish_exclusive(path, NEW))
        assert status in (0, kit.killed)
        seen.add(path.exists())
        assert not path.exists() or path.read_bytes() == NEW
        if status == 0:
            break
    assert seen == {False, True}


def test_create_marker_is_idempotent(tmp_path: Path) -> None:
    assert create_marker(tmp_path / "done") is True
    assert create_marker(tmp_path / "done") is False


def test_remove_stale_temps_keeps_fresh_ones_and_other_files(tmp_path: Path) -> None:
    stale, fresh = tmp_path / ".a.json.1.tmp", tmp_path / ".b.json.2.tmp"
    for p in (stale, fresh, tmp_path / "keep.tmp", tmp_path / ".keep"):
        p.write_bytes(b"x")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    assert remove_stale_temps(tmp_path, older_than=600) == 1
    assert sorted(os.listdir(tmp_path)) == [".b.json.2.tmp", ".keep", "keep.tmp"]
    assert remove_stale_temps(tmp_path / "missing") == 0
