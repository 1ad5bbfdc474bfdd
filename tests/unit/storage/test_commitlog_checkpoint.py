"""Checkpoints of the commit log (issue 16 item 1): open reads the latest checkpoint and only the
records after it, memory is bounded, clean-up, tables from before checkpoints, and ``skip``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import StorageCorrupt
from daemon.storage import CommitLog
from daemon.storage.commitlog import META, OffsetsDiverged, PartitionsOwned, ZombieEpoch
from daemon.storage.fs import LocalFs

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
DAY_MS = 24 * 3600 * 1000


def empty(log: CommitLog, n: int, *, epoch: int = 1, connector: str = "sink") -> None:
    """``n`` commits without files, alternating partitions, each continuing the last."""
    for _ in range(n):
        ends = log.committed_offsets()
        tp = TP0 if log.last_seq() % 2 == 0 else TP1
        start = ends.get(tp, 0)
        ranges = [OffsetRange(tp.topic, tp.partition, start, start + 1)]
        log.commit(connector, 0, epoch, ranges, commit_id=log.new_commit_id())


def state(log: CommitLog) -> tuple[Any, ...]:
    return (log.committed_offsets(), log.last_epoch("sink"), log.owners(), log.last_seq())


def names(table: Path, sub: str) -> list[str]:
    return sorted(n for n in os.listdir(table / META / sub) if not n.startswith("."))


class CountingFs(LocalFs):
    """Counts reads of commit records: proves what ``open`` reads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.record_reads = 0

    def read(self, name: str) -> bytes | None:
        if name.startswith(f"{META}/log/"):
            self.record_reads += 1
        return super().read(name)


def test_checkpoint_at_the_interval_and_open_reads_only_later_records(tmp_path: Path) -> None:
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=10) as log:
        empty(log, 25)
        expected = state(log)
    assert names(table, "checkpoint") == [f"{10:020d}.json", f"{20:020d}.json"]
    fs = CountingFs(table)
    with CommitLog(table, fs=fs, checkpoint_interval=10) as log:
        # Records 21..25 and the end of the log (26, read again by recover), not 1..25.
        assert fs.record_reads == 7
        assert state(log) == expected
    # Records before the checkpoint are no longer needed to open: delete them by hand.
    for seq in range(1, 21):
        os.unlink(table / META / "log" / f"{seq:020d}.json")
    with CommitLog(table, checkpoint_interval=10) as log:
        assert state(log) == expected
        empty(log, 1)  # and it carries on
        assert log.last_seq() == 26


def test_memory_is_bounded_by_the_interval(tmp_path: Path) -> None:
    with CommitLog(tmp_path / "t", checkpoint_interval=10) as log:
        for _ in range(10):
            empty(log, 10)
            assert log.records_in_memory() <= 10
    # A reader that never commits (others write the checkpoints) trims too.
    writer = CommitLog(tmp_path / "u", checkpoint_interval=10).open()
    reader = CommitLog(tmp_path / "u", checkpoint_interval=10).open()
    for _ in range(20):
        empty(writer, 5)
        reader.committed_offsets()
        assert reader.records_in_memory() <= 31
    assert reader.committed_offsets() == writer.committed_offsets()


def test_a_table_from_before_checkpoints_opens_continues_and_gets_them(tmp_path: Path) -> None:
    table = tmp_path / "t"
    # Today's layout: no checkpoint dir at all (as the previous version wrote it).
    with CommitLog(table, checkpoint_interval=1000) as log:
        empty(log, 37)
        expected = state(log)
    os.rmdir(table / META / "checkpoint")
    with CommitLog(table, checkpoint_interval=10) as log:
        assert state(log) == expected
        empty(log, 3)  # seq 40: the next multiple of the interval
        assert names(table, "checkpoint") == [f"{40:020d}.json"]
        after = state(log)
    fs = CountingFs(table)
    with CommitLog(table, fs=fs, checkpoint_interval=10) as log:
        assert fs.record_reads == 2  # checkpoint 40 is the last record: only the end (41)
        assert state(log) == after


def test_a_missing_record_after_the_checkpoint_is_corruption(tmp_path: Path) -> None:
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=10) as log:
        empty(log, 15)
    os.unlink(table / META / "log" / f"{12:020d}.json")
    with pytest.raises(StorageCorrupt, match=r"gap: record 12 is missing \(after checkpoint 10\)"):
        CommitLog(table, checkpoint_interval=10).open()


def test_a_damaged_checkpoint_is_named(tmp_path: Path) -> None:
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=10) as log:
        empty(log, 10)
    path = table / META / "checkpoint" / f"{10:020d}.json"
    path.write_bytes(path.read_bytes().replace(b'"seq":10', b'"seq":11'))
    with pytest.raises(StorageCorrupt, match=f"checkpoint {path} is damaged"):
        CommitLog(table).open()


def test_clean_up_keeps_what_open_needs_and_the_retention(tmp_path: Path) -> None:
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=10, retention_ms=DAY_MS) as log:
        empty(log, 35)
        report = log.clean_up()
        # Young records are kept for audit; checkpoints before the one before the latest go.
        assert (report.records, report.upto) == (0, 20)
        assert len(names(table, "log")) == 35
        assert names(table, "checkpoint") == [f"{20:020d}.json", f"{30:020d}.json"]
        expected = state(log)
    with CommitLog(table, checkpoint_interval=10, retention_ms=0) as log:
        report = log.clean_up()
        assert report.records == 20 and report.finished
        assert names(table, "log") == [f"{s:020d}.json" for s in range(21, 36)]
        assert names(table, "done") == [f"{s:020d}" for s in range(21, 36)]
        assert state(log) == expected
        assert [r.seq for r in log.records()] == list(range(21, 36))
        assert [r.seq for r in log.records(since=30)] == list(range(30, 36))
        empty(log, 5)
    with CommitLog(table, checkpoint_interval=10, retention_ms=0) as log:
        assert log.committed_offsets() == {TP0: 20, TP1: 20}
        # A deadline already past: nothing done, reported unfinished; the next run goes on.
        report = log.clean_up(deadline=time.monotonic() - 1)
        assert not report.finished and report.records == 0
        assert log.clean_up().records == 10


def test_a_stale_instance_jumps_past_cleaned_records(tmp_path: Path) -> None:
    """An instance that has not read the log while others committed and a clean-up deleted the
    records it never read: it must not reuse a deleted seq (nor miss their offsets)."""
    table = tmp_path / "t"
    stale = CommitLog(table, checkpoint_interval=10, retention_ms=0).open()
    empty(stale, 3)
    other = CommitLog(table, checkpoint_interval=10, retention_ms=0).open()
    empty(other, 40)
    assert other.clean_up().records == 30
    assert stale.committed_offsets() == other.committed_offsets()
    empty(stale, 1)
    assert stale.last_seq() == 44
    assert CommitLog(table).open().committed_offsets() == stale.committed_offsets()


def test_an_instance_with_a_longer_retention_never_reuses_a_cleaned_number(
    tmp_path: Path,
) -> None:
    """Review finding: the stale-instance jump keyed on the reader's own retention, while
    records are deleted by the cleaner's. A writer that keeps 7 days, idle while another
    writer with retention 0 cleaned records it never read, must not publish over their
    numbers: its commit lands after the newest checkpoint, and every opener sees it."""
    table = tmp_path / "t"
    week = 7 * 24 * 3600 * 1000
    patient = CommitLog(table, checkpoint_interval=10, retention_ms=week).open()
    u0 = TopicPartition("u", 0)
    for start in range(3):
        ranges = [OffsetRange("u", 0, start, start + 1)]
        patient.commit("patient", 0, 1, ranges, commit_id=patient.new_commit_id())
    eager = CommitLog(table, checkpoint_interval=10, retention_ms=0).open()
    empty(eager, 40)
    assert eager.clean_up().records == 30
    patient.commit("patient", 0, 1, [OffsetRange("u", 0, 3, 5)], commit_id=patient.new_commit_id())
    assert patient.last_seq() == 44
    fresh = CommitLog(table).open()
    assert fresh.committed_offsets()[u0] == 5
    assert fresh.committed_offsets() == patient.committed_offsets()


def test_a_checkpoint_that_cannot_be_written_does_not_fail_the_landed_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record that made the checkpoint due is in the table: its commit returns, and the
    next interval's checkpoint covers the state."""
    table = tmp_path / "t"
    log = CommitLog(table, checkpoint_interval=10).open()
    publish = log.fs.publish_exclusive

    def full_disk(name: str, data: bytes) -> None:
        if "checkpoint" in name:
            raise OSError(28, "No space left on device")
        publish(name, data)

    monkeypatch.setattr(log.fs, "publish_exclusive", full_disk)
    empty(log, 10)  # the 10th commit's checkpoint fails; the commit itself stands
    assert log.last_seq() == 10 and not names(table, "checkpoint")
    monkeypatch.setattr(log.fs, "publish_exclusive", publish)
    empty(log, 10)
    assert names(table, "checkpoint") == [f"{20:020d}.json"]
    assert CommitLog(table).open().committed_offsets() == log.committed_offsets()


def test_the_checkpoint_writer_rolls_forward_others_pending_records(
    tmp_path: Path, kit: Kit
) -> None:
    """A record published but not done (its writer killed) before a checkpoint's seq: the
    checkpoint must not let openers skip it, so its writer finishes it first."""
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=10) as log:
        empty(log, 8)
    writer = CommitLog(table, checkpoint_interval=10).open()  # a live writer, at seq 8
    # Seq 9 published by a writer killed before moving its files (no done marker).
    victim = CommitLog(table, checkpoint_interval=10).open()
    commit_id = victim.new_commit_id()
    kit.write_files(victim.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 4, 9)})
    victim._apply = lambda record: None  # type: ignore[method-assign]
    victim.commit("sink", 0, 1, [OffsetRange("t", 0, 4, 9)], commit_id=commit_id)
    assert not (table / META / "done" / f"{9:020d}").exists()
    writer.commit("sink", 0, 1, [OffsetRange("t", 1, 4, 5)], commit_id=writer.new_commit_id())
    assert (table / META / "checkpoint" / f"{10:020d}.json").exists()
    assert (table / META / "done" / f"{9:020d}").exists()
    assert (table / f"part-{commit_id}-00000.parquet").exists()
    victim.close()


def test_skip_records_the_gap_with_its_reason(tmp_path: Path) -> None:
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=3) as log:
        log.commit("sink", 0, 2, [OffsetRange("t", 0, 0, 10)], commit_id=log.new_commit_id())
        with pytest.raises(OffsetsDiverged, match="must start where the last commit ended, at 10"):
            log.skip("sink", 0, 2, TP0, 12, 50, reason="offset out of range")
        with pytest.raises(ZombieEpoch):
            log.skip("sink", 0, 1, TP0, 10, 50, reason="offset out of range")
        with pytest.raises(PartitionsOwned):
            log.skip("other", 0, 5, TP0, 10, 50, reason="offset out of range")
        with pytest.raises(ValueError, match="reason"):
            log.skip("sink", 0, 2, TP0, 10, 50, reason="")
        record = log.skip("sink", 0, 2, TP0, 10, 50, reason="log start 50 > committed 10")
        assert (record.kind, record.seq, record.reason) == (
            "skip",
            2,
            "log start 50 > committed 10",
        )
        assert record.ranges == (OffsetRange("t", 0, 10, 50),) and record.files == ()
        assert log.committed_offsets() == {TP0: 50}
        # A never-committed partition takes any start; the owner and epoch are claimed.
        log.skip("sink", 1, 3, TP1, 7, 9, reason="retention")  # seq 3: a checkpoint
        assert log.owners() == {TP0: "sink", TP1: "sink"} and log.last_epoch("sink", TP1) == 3
        log.commit("sink", 0, 2, [OffsetRange("t", 0, 50, 60)], commit_id=log.new_commit_id())
    with CommitLog(table) as log:
        assert log.committed_offsets() == {TP0: 60, TP1: 9}
        audit = [(r.kind, r.reason) for r in log.records()]
        assert audit == [
            ("commit", None),
            ("skip", "log start 50 > committed 10"),
            ("skip", "retention"),
            ("commit", None),
        ]
