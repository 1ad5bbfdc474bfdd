"""A reader whose next record was cleaned up by another writer (review of the clean-up).

Two connectors may share a table, each with its own ``commit.log.retention.ms``; and an opener
can be overtaken by another writer's commits and clean-up between two of its reads. A missing
record is the end of the log only if no checkpoint past the reader exists; else the reader
jumps to that checkpoint. Before, a reader inferred "nothing was cleaned since I looked" from its
own retention: a stale instance's ``abort`` did not see a landed commit and deleted its staged
files (rows lost while the log covered them, and the table no longer opened), and ``open``
called a cleaned record a gap "removed by hand".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.storage import CommitLog
from daemon.storage.fs import LocalFs
from daemon.storage.staging import Staging

TA, TB = TopicPartition("a", 0), TopicPartition("b", 0)
WEEK_MS = 7 * 24 * 3600 * 1000


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def commit(log: CommitLog, connector: str, tp: TopicPartition, n: int = 1) -> None:
    for _ in range(n):
        start = log.committed_offsets().get(tp, 0)
        ranges = [OffsetRange(tp.topic, tp.partition, start, start + 1)]
        log.commit(connector, 0, 1, ranges, commit_id=log.new_commit_id())


def test_a_stale_instance_sees_a_landed_commit_past_records_cleaned_with_a_shorter_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    stale = CommitLog(root, checkpoint_interval=5, retention_ms=WEEK_MS).open()  # connector a
    commit(stale, "a", TA)
    other = CommitLog(root, checkpoint_interval=5, retention_ms=0).open()  # connector b
    commit(other, "b", TB, 12)
    assert other.clean_up().records > 0  # records 1.. deleted, the stale one never read them

    writer = CommitLog(root, checkpoint_interval=5, retention_ms=WEEK_MS).open()
    cid = writer.new_commit_id()
    staged = Path(writer.stage(cid))
    (staged / "part-0.parquet").write_bytes(b"rows")

    def killed(self: Staging, record: Any) -> None:
        raise KeyboardInterrupt("SIGKILL after the record was published")

    with monkeypatch.context() as m:
        m.setattr(Staging, "move_into_place", killed)
        start = writer.committed_offsets().get(TA, 0)
        with pytest.raises(KeyboardInterrupt):
            writer.commit("a", 0, 1, [OffsetRange("a", 0, start, start + 1)], commit_id=cid)
    landed_at = writer.last_seq()

    # The task asks whether its write landed, through the stale instance: it did.
    assert stale.abort(cid) is True
    assert stale.last_seq() == landed_at
    reopened = CommitLog(root, checkpoint_interval=5, retention_ms=WEEK_MS).open()
    assert reopened.committed_offsets()[TA] == start + 1


def test_open_overtaken_by_commits_and_a_clean_up_is_not_a_gap(tmp_path: Path) -> None:
    root = tmp_path / "t"
    other = CommitLog(root, checkpoint_interval=5, retention_ms=0).open()
    commit(other, "b", TB, 7)
    seen: set[int] = set()

    class Slow(LocalFs):
        """The opener's reads, with the other writer getting ahead between two of them."""

        def exists(self, name: str) -> bool:
            if name.endswith("log/00000000000000000009.json") and 9 not in seen:
                seen.add(9)
                commit(other, "b", TB, 2)  # publishes 8 and 9 meanwhile
            if name.endswith("log/00000000000000000011.json") and 11 not in seen:
                seen.add(11)
                commit(other, "b", TB, 6)
                other.clean_up()  # deletes up to the checkpoint before the latest
            return super().exists(name)

    opener = CommitLog(root, fs=Slow(root), checkpoint_interval=5, retention_ms=0).open()
    assert seen == {9, 11}  # both interleavings happened
    assert opener.last_seq() == other.last_seq()
    assert opener.committed_offsets() == other.committed_offsets()
