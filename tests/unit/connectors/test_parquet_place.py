"""Issue 13 items 5 and 7, unit level: where a ParquetSink table may go (``parquet.place``).

The integration tests (tests/integration/rest/test_table_paths.py,
tests/integration/runtime/test_table_owners.py) cover the same through a daemon."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.connectors.parquet.place import owner_problems, place_problems
from daemon.connectors.parquet.settings import check_config
from daemon.connectors.records import TopicPartition
from daemon.storage.commitlog import META, CommitLog


def messages(path: str) -> list[str]:
    return [f"{p.key}: {p.message}" for p in check_config({"path": path}) if p.is_error]


def test_a_regular_file_or_a_path_below_one_is_refused(tmp_path: Path) -> None:
    regular = tmp_path / "f"
    regular.write_text("x")
    assert messages(str(regular)) == [f"path: {regular} exists and is not a directory"]
    assert messages(f"file://{regular}/t") == [
        f"path: {regular}/t cannot be created: {regular} is not a directory"
    ]


def test_an_unwritable_place_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ``access`` decides (root passes a mode check, not a read-only mount): pretend it says no.
    monkeypatch.setattr(os, "access", lambda *_a, **_k: False)
    assert "is not writable by this process" in messages(str(tmp_path))[0]
    (missing,) = messages(str(tmp_path / "a" / "b"))
    assert f"cannot be created: its parent {tmp_path} is not writable" in missing


def test_a_writable_place_is_accepted_and_nothing_is_created(tmp_path: Path) -> None:
    assert messages(str(tmp_path / "a" / "table")) == []
    assert place_problems(tmp_path) == []
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("uri", ["gs://bucket/x", "wasb://c@a/x", "s3://b/x", "oss://b/x"])
def test_schemes_without_an_atomic_create_are_refused_by_name(uri: str) -> None:
    (message,) = messages(uri)
    scheme = uri.split(":")[0]
    assert f"{scheme}:// offers no atomic exclusive create" in message


def test_another_connectors_partitions_are_named(tmp_path: Path) -> None:
    table = tmp_path / "t"
    assert owner_problems(table, "b", {"topics": "orders"}) == []  # no table yet
    with CommitLog(table) as log:
        log.fence("a", 0, 3, [TopicPartition("orders", 0), TopicPartition("orders", 1)])
    seq_before = sorted((table / META / "log").iterdir())
    (problem,) = owner_problems(table, "b", {"topics": "orders,other"})
    assert problem.key == "path"
    assert "already holds orders-0, orders-1 written by connector 'a'" in problem.message
    assert owner_problems(table, "b", {"topics.regex": "ord.*"})  # a regex covers them too
    assert owner_problems(table, "a", {"topics": "orders"}) == []  # its own
    assert owner_problems(table, "b", {"topics": "other"}) == []  # other topics: fine
    assert sorted((table / META / "log").iterdir()) == seq_before  # read, nothing written
