"""The commit log: continuity, epochs (zombies), operator offsets, staging, corruption."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import daemon.storage.fs as fs
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import CommitRejected, StorageCorrupt
from daemon.runtime.slot.autorestart import retriable
from daemon.storage import CommitLog, DataFile
from daemon.storage.commitlog import META, OffsetsDiverged, PartitionsOwned, ZombieEpoch
from daemon.storage.logstate import TableLost

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def r(tp: TopicPartition, start: int, end: int) -> OffsetRange:
    return OffsetRange(tp.topic, tp.partition, start, end)


def write(kit: Kit, log: CommitLog, epoch: int, *ranges: OffsetRange, task: int = 0) -> str:
    """Stage one Parquet file per range and commit them; returns the commit id."""
    commit_id = log.new_commit_id()
    files = {f"p{x.partition}.snappy.parquet": kit.parquet(x.tp, x.start, x.end) for x in ranges}
    kit.write_files(log.stage_dir(commit_id), files)
    try:
        log.commit("sink", task, epoch, ranges, commit_id=commit_id)
    except CommitRejected:
        log.abort(commit_id)  # what a sink does with a refused write
        raise
    return commit_id


@pytest.fixture
def log(tmp_path: Path) -> CommitLog:
    return CommitLog(tmp_path / "table").open()


def test_commit_moves_files_into_place_and_records_offsets(log: CommitLog, kit: Kit) -> None:
    commit_id = write(kit, log, 1, r(TP0, 0, 10), r(TP1, 0, 3))
    assert sorted(p.name for p in log.path.iterdir()) == [
        META,
        f"part-{commit_id}-00000.snappy.parquet",
        f"part-{commit_id}-00001.snappy.parquet",
    ]
    assert log.committed_offsets() == {TP0: 10, TP1: 3}
    assert log.committed_offsets([TP1, TopicPartition("x", 0)]) == {TP1: 3}
    assert log.last_epoch("sink") == 1 and log.last_epoch("sink", TP1) == 1
    assert log.last_epoch("other") == 0
    (record,) = log.records()
    assert (record.seq, record.kind, record.connector, record.task, record.epoch) == (
        1,
        "commit",
        "sink",
        0,
        1,
    )
    assert record.commit_id == commit_id and len(record.files) == 2
    kit.assert_exactly_once(log.path, {TP0: 10, TP1: 3})
    kit.assert_clean(log.path)
    # The record is plain JSON with the ranges, files and a checksum of its own content.
    doc = json.loads((log.meta / "log" / f"{1:020d}.json").read_bytes())
    assert doc["ranges"][0] == {"topic": "t", "partition": 0, "start": 0, "end": 10}
    assert doc["checksum"].startswith("sha256:")


def test_another_instance_sees_the_state(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 0, 10))
    other = CommitLog(log.path).open()
    assert other.committed_offsets() == {TP0: 10}
    write(kit, other, 1, r(TP0, 10, 12))
    assert log.committed_offsets() == {TP0: 12}  # refreshed from the log


def test_zombie_duplicate_and_gap_are_refused(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 0, 10))
    write(kit, log, 2, r(TP0, 10, 20))  # a new incarnation continues
    # The old incarnation (epoch 1) tries to commit the next range: a zombie.
    with pytest.raises(CommitRejected, match="epoch 1 may not write t-0: epoch 2 already has"):
        write(kit, log, 1, r(TP0, 20, 30))
    with pytest.raises(CommitRejected, match=r"overlap \(duplicate\), the last commit ended at 20"):
        write(kit, log, 2, r(TP0, 10, 20))  # the same range again
    with pytest.raises(CommitRejected, match="overlap"):
        write(kit, log, 2, r(TP0, 15, 25))
    with pytest.raises(CommitRejected, match="gap, the last commit ended at 20"):
        write(kit, log, 2, r(TP0, 21, 30))
    # A refused commit writes nothing; readers see no change.
    assert log.committed_offsets() == {TP0: 20} and len(log.records()) == 2
    kit.assert_exactly_once(log.path, {TP0: 20})
    kit.assert_clean(log.path)
    assert CommitRejected.retriable is False


def test_a_refused_commit_is_atomic_across_partitions(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 0, 5), r(TP1, 0, 5))
    with pytest.raises(CommitRejected):
        write(kit, log, 1, r(TP0, 5, 8), r(TP1, 9, 10))  # TP1 has a gap: nothing lands
    assert log.committed_offsets() == {TP0: 5, TP1: 5}


def test_epochs_are_per_partition_and_per_connector(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 5, r(TP0, 0, 1))
    write(kit, log, 3, r(TP1, 0, 1))  # epoch 5 never wrote TP1
    other = TopicPartition("u", 0)
    log.commit("other-connector", 0, 1, [r(other, 0, 2)], commit_id=log.new_commit_id())
    assert log.last_epoch("sink") == 5 and log.last_epoch("other-connector") == 1
    assert log.owners() == {TP0: "sink", TP1: "sink", other: "other-connector"}
    assert log.owned_by("sink") == [TP0, TP1]


def test_a_partition_belongs_to_the_connector_that_wrote_it(log: CommitLog, kit: Kit) -> None:
    """Issue 13 item 5: a second connector on the same partitions is refused, by name."""
    write(kit, log, 5, r(TP0, 0, 1))
    owned = "other-connector may not write t-0 .*connector 'sink' owns it.*takeover=sink"
    with pytest.raises(PartitionsOwned, match=owned):
        log.fence("other-connector", 0, 9, [TP0])
    with pytest.raises(PartitionsOwned, match=owned):
        log.commit("other-connector", 0, 9, [r(TP0, 1, 2)], commit_id=log.new_commit_id())
    log.commit("other-connector", 0, 9, [r(TP1, 0, 2)], commit_id=log.new_commit_id())
    assert log.committed_offsets() == {TP0: 1, TP1: 2}
    # One connector's offsets API never moves another's progress.
    with pytest.raises(PartitionsOwned):
        log.alter_offsets({TP0: 0}, connector="other-connector")
    log.reset_offsets(connector="other-connector")
    assert log.committed_offsets() == {TP0: 1}


def test_a_renamed_connector_takes_its_partitions_over(log: CommitLog, kit: Kit) -> None:
    """The old name's commits stay in the log; the new name continues them only when it says
    it replaces the old one, and from then on the old name is the one refused."""
    write(kit, log, 5, r(TP0, 0, 10))  # connector "sink"
    with pytest.raises(PartitionsOwned):
        log.fence("renamed", 0, 1, [TP0])
    log.fence("renamed", 0, 1, [TP0], takeover=["sink"])
    assert log.owners() == {TP0: "renamed"} and log.committed_offsets() == {TP0: 10}
    log.commit("renamed", 0, 1, [r(TP0, 10, 12)], commit_id=log.new_commit_id())
    with pytest.raises(PartitionsOwned, match="connector 'renamed' owns it"):
        log.commit("sink", 0, 6, [r(TP0, 12, 14)], commit_id=log.new_commit_id())
    assert log.committed_offsets() == {TP0: 12}


def test_a_refusal_says_whether_a_restart_can_help(log: CommitLog, kit: Kit) -> None:
    """None of the refusals is retried: the same seek meets the same gap or overlap, a zombie
    must stop, another connector's partition needs a configuration change. Each is a
    ``CommitRejected`` the restart policy reads."""
    write(kit, log, 5, r(TP0, 0, 10))
    with pytest.raises(OffsetsDiverged, match="overlap") as overlap:
        log.commit("sink", 0, 5, [r(TP0, 5, 12)], commit_id=log.new_commit_id())
    with pytest.raises(ZombieEpoch) as zombie:
        log.commit("sink", 0, 4, [r(TP0, 10, 12)], commit_id=log.new_commit_id())
    with pytest.raises(PartitionsOwned) as owned:
        log.fence("other-connector", 0, 9, [TP0])
    assert not any(retriable(e.value) for e in (overlap, zombie, owned))
    assert all(isinstance(e.value, CommitRejected) for e in (overlap, zombie, owned))


def test_a_table_deleted_under_its_writer_is_not_started_over(log: CommitLog, kit: Kit) -> None:
    """The table's directory deleted while a writer holds the log open: its next stage or
    commit is refused with ``TableLost`` (not retried) and nothing is created where the
    table was, where a commit used to start a new log that looked complete."""
    write(kit, log, 1, r(TP0, 0, 10))
    shutil.rmtree(log.path)
    with pytest.raises(TableLost, match="record 1, the last this writer read") as lost:
        log.stage(log.new_commit_id())
    assert not log.path.exists() and not retriable(lost.value)
    with pytest.raises(TableLost):
        log.commit("sink", 0, 1, [r(TP0, 10, 12)], commit_id=log.new_commit_id())
    with pytest.raises(TableLost):
        log.fence("sink", 0, 2, [TP0])
    assert not log.path.exists()


def test_records_cleaned_up_behind_a_checkpoint_are_not_a_lost_table(
    tmp_path: Path, kit: Kit
) -> None:
    log = CommitLog(tmp_path / "table", checkpoint_interval=2, retention_ms=0).open()
    for i in range(6):
        write(kit, log, 1, r(TP0, i, i + 1))
    log.clean_up()
    write(kit, log, 1, r(TP0, 6, 7))  # its last record may be gone: a checkpoint covers it
    assert log.committed_offsets() == {TP0: 7}


def test_first_commit_of_a_partition_may_start_anywhere(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 1234, 1240))
    assert log.committed_offsets() == {TP0: 1240}


def test_empty_commit_moves_past_bad_records(log: CommitLog) -> None:
    """Every record of a batch was bad: no rows, but the offsets must still advance."""
    log.commit("sink", 0, 1, [r(TP0, 0, 7)], commit_id=log.new_commit_id())
    assert log.committed_offsets() == {TP0: 7}
    with pytest.raises(ValueError, match="at least one"):
        log.commit("sink", 0, 1, [], commit_id=log.new_commit_id())
    with pytest.raises(ValueError, match="one range per partition"):
        log.commit("sink", 0, 1, [r(TP0, 7, 8), r(TP0, 8, 9)], commit_id=log.new_commit_id())


def test_fence_refuses_older_epochs_before_the_new_one_commits(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 0, 10))
    record = log.fence("sink", 0, 2, [TP0, TP1])
    assert record is not None and record.kind == "fence"
    assert log.fence("sink", 0, 2, [TP0]) is None  # already in place: nothing written
    with pytest.raises(CommitRejected, match="zombie"):
        write(kit, log, 1, r(TP0, 10, 20))
    with pytest.raises(CommitRejected, match="zombie"):
        log.fence("sink", 0, 1, [TP1])
    write(kit, log, 2, r(TP0, 10, 20))
    assert log.committed_offsets() == {TP0: 20}
    kit.assert_clean(log.path)


def test_operator_alters_and_resets_offsets(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 0, 10), r(TP1, 0, 10))
    log.alter_offsets({TP0: 4, TP1: None}, connector="sink")
    assert log.committed_offsets() == {TP0: 4}
    with pytest.raises(CommitRejected, match="gap"):
        write(kit, log, 1, r(TP0, 10, 12))
    write(kit, log, 1, r(TP0, 4, 6), r(TP1, 50, 51))
    log.reset_offsets()
    assert log.committed_offsets() == {}
    assert log.last_epoch("sink", TP0) == 1  # epochs survive a reset
    assert [rec.kind for rec in log.records()] == ["commit", "offsets", "commit", "offsets"]
    with pytest.raises(ValueError, match="negative"):
        log.alter_offsets({TP0: -1})
    kit.assert_clean(log.path)


def test_partition_dirs_and_non_data_files(log: CommitLog, kit: Kit) -> None:
    commit_id = log.new_commit_id()
    staging = log.stage_dir(commit_id)
    kit.write_files(
        staging,
        {
            "day=1/part-00000-x.c000.snappy.parquet": kit.parquet(TP0, 0, 3),
            "day=2/part-00001-y.c000.snappy.parquet": kit.parquet(TP0, 3, 5),
            "_SUCCESS": b"",
            "day=1/.part-00000-x.c000.snappy.parquet.crc": b"crc",
            "_temporary/0/junk.parquet": b"junk",
        },
    )
    assert log.staged_files(commit_id) == [
        DataFile(
            "day=1/part-00000-x.c000.snappy.parquet",
            f"day=1/part-{commit_id}-00000.c000.snappy.parquet",
        ),
        DataFile(
            "day=2/part-00001-y.c000.snappy.parquet",
            f"day=2/part-{commit_id}-00001.c000.snappy.parquet",
        ),
    ]
    log.commit("sink", 0, 1, [r(TP0, 0, 5)], commit_id=commit_id)
    kit.assert_exactly_once(log.path, {TP0: 5})
    kit.assert_clean(log.path)


def test_file_names_are_checked(log: CommitLog, kit: Kit) -> None:
    commit_id = log.new_commit_id()
    kit.write_files(log.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 0, 1)})
    for final in ("_hidden.parquet", "x/.hidden", "../escape.parquet", "/abs.parquet"):
        with pytest.raises(ValueError):
            log.commit(
                "sink", 0, 1, [r(TP0, 0, 1)], [DataFile("a.parquet", final)], commit_id=commit_id
            )
    with pytest.raises(ValueError, match="missing"):
        log.commit(
            "sink", 0, 1, [r(TP0, 0, 1)], [DataFile("b.parquet", "b.parquet")], commit_id=commit_id
        )
    (log.path / "taken.parquet").write_bytes(b"x")
    with pytest.raises(ValueError, match="exists in the table"):
        log.commit(
            "sink",
            0,
            1,
            [r(TP0, 0, 1)],
            [DataFile("a.parquet", "taken.parquet")],
            commit_id=commit_id,
        )
    other = log.new_commit_id()
    with pytest.raises(ValueError, match="not staged"):
        log.commit(
            "sink", 0, 1, [r(TP0, 0, 1)], [DataFile("a.parquet", "a.parquet")], commit_id=other
        )
    with pytest.raises(ValueError, match="commit id"):
        log.stage_dir("../x")
    assert log.records() == []


def test_orphan_staging_is_removed_but_a_live_writers_is_kept(log: CommitLog, kit: Kit) -> None:
    dead, live = CommitLog(log.path).open(), CommitLog(log.path).open()
    dead_id, live_id = dead.new_commit_id(), live.new_commit_id()
    kit.write_files(dead.stage_dir(dead_id), {"a.parquet": kit.parquet(TP0, 0, 1)})
    kit.write_files(live.stage_dir(live_id), {"a.parquet": kit.parquet(TP0, 0, 1)})
    dead.close()  # as if its process died: its lock is released
    CommitLog(log.path).open()
    assert os.listdir(log.meta / "staging") == [live_id]
    live.commit("sink", 0, 1, [r(TP0, 0, 1)], commit_id=live_id)
    kit.assert_exactly_once(log.path, {TP0: 1})
    kit.assert_clean(log.path)


def test_abort_discards_the_staged_write(log: CommitLog, kit: Kit) -> None:
    commit_id = log.new_commit_id()
    kit.write_files(log.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 0, 1)})
    assert log.abort(commit_id) is False
    kit.assert_clean(log.path)
    assert log.records() == []


def test_abort_finishes_a_commit_whose_record_exists(
    log: CommitLog, kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit() failed after its record was created: the record decides, abort rolls forward."""
    commit_id = log.new_commit_id()
    kit.write_files(log.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 0, 4)})

    def broken(record: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(log, "_apply", broken)
    with pytest.raises(OSError, match="disk on fire"):
        log.commit("sink", 0, 1, [r(TP0, 0, 4)], commit_id=commit_id)
    monkeypatch.undo()
    assert log.abort(commit_id) is True
    kit.assert_exactly_once(log.path, {TP0: 4})
    kit.assert_clean(log.path)


def test_lost_race_for_the_next_record_rechecks(
    log: CommitLog, kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another committer creates seq N between our check and our create: we re-read and
    re-check (a different partition still commits; the same range is then a duplicate)."""
    rival = CommitLog(log.path).open()
    real = fs.publish_exclusive
    attempts: list[str] = []
    rival_range: list[OffsetRange] = []

    def racing(path: os.PathLike[str], data: bytes) -> None:
        attempts.append(Path(path).name)
        if rival_range:  # the rival commits first, taking the number we are about to create
            write(kit, rival, 1, rival_range.pop())
        real(path, data)

    monkeypatch.setattr(fs, "publish_exclusive", racing)
    rival_range.append(r(TP1, 0, 5))
    write(kit, log, 1, r(TP0, 0, 5))
    assert attempts == [f"{1:020d}.json", f"{1:020d}.json", f"{2:020d}.json"]
    assert [(rec.seq, rec.ranges[0].tp) for rec in log.records()] == [(1, TP1), (2, TP0)]
    rival_range.append(r(TP0, 5, 9))
    with pytest.raises(CommitRejected, match="duplicate"):
        write(kit, log, 1, r(TP0, 5, 9))
    monkeypatch.setattr(fs, "publish_exclusive", real)
    assert log.committed_offsets() == {TP0: 9, TP1: 5}
    kit.assert_exactly_once(log.path, {TP0: 9, TP1: 5})
    kit.assert_clean(log.path)


def test_threads_sharing_one_log(log: CommitLog, kit: Kit) -> None:
    tps = [TopicPartition("t", p) for p in range(4)]

    def worker(tp: TopicPartition) -> None:
        for i in range(5):
            write(kit, log, 1, r(tp, i * 3, i * 3 + 3), task=tp.partition)

    threads = [threading.Thread(target=worker, args=(tp,)) for tp in tps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert log.committed_offsets() == dict.fromkeys(tps, 15)
    assert [rec.seq for rec in log.records()] == list(range(1, 21))
    kit.assert_exactly_once(log.path, dict.fromkeys(tps, 15))


def test_damaged_record_is_reported(log: CommitLog, kit: Kit) -> None:
    write(kit, log, 1, r(TP0, 0, 10))
    path = log.meta / "log" / f"{1:020d}.json"
    path.write_bytes(path.read_bytes().replace(b'"end": 10', b'"end": 11'))
    with pytest.raises(StorageCorrupt, match="checksum mismatch"):
        CommitLog(log.path).open()
    path.write_bytes(b"{not json")
    with pytest.raises(StorageCorrupt, match="damaged"):
        CommitLog(log.path).open()


def test_missing_record_is_reported(log: CommitLog, kit: Kit) -> None:
    for i in range(3):
        write(kit, log, 1, r(TP0, i, i + 1))
    os.unlink(log.meta / "log" / f"{2:020d}.json")
    with pytest.raises(StorageCorrupt, match="gap: record 2 is missing"):
        CommitLog(log.path).open()


def test_missing_data_file_of_an_unfinished_commit_is_reported(
    log: CommitLog, kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_id = log.new_commit_id()
    kit.write_files(log.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 0, 1)})
    monkeypatch.setattr(log, "_apply", lambda record: None)  # killed right after the record
    log.commit("sink", 0, 1, [r(TP0, 0, 1)], commit_id=commit_id)
    monkeypatch.undo()
    os.unlink(log.meta / "staging" / commit_id / "a.parquet")
    with pytest.raises(StorageCorrupt, match="neither in staging nor"):
        CommitLog(log.path).open()


def test_must_open_first(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="open"):
        CommitLog(tmp_path).committed_offsets()
    with CommitLog(tmp_path / "new" / "table") as log:  # creates the table dir
        assert log.committed_offsets() == {}


def test_writer_commits_and_dies_while_a_cleaner_looks_at_its_staging(
    log: CommitLog, kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cleaner read the log (no record names the staging dir), then the writer published
    its record and died before moving its files, then the cleaner got the lock: it must see
    the record (re-read under the lock) and roll the commit forward, not delete the data."""
    writer = CommitLog(log.path).open()
    commit_id = writer.new_commit_id()
    kit.write_files(writer.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 0, 6)})
    real_try_lock = fs._try_lock

    def writer_commits_then_dies(path: Path) -> int | None:
        if path.name == f"{commit_id}.lock" and commit_id in writer._staging.held:
            monkeypatch.setattr(writer, "_apply", lambda record: None)  # dies after the record
            writer.commit("sink", 0, 1, [r(TP0, 0, 6)], commit_id=commit_id)
            writer.close()  # the process is gone: its lock with it
        return real_try_lock(path)

    monkeypatch.setattr(fs, "_try_lock", writer_commits_then_dies)
    CommitLog(log.path).open()
    assert log.committed_offsets() == {TP0: 6}
    kit.assert_exactly_once(log.path, {TP0: 6})
    kit.assert_clean(log.path)


def test_data_staged_by_another_instance_is_not_committed_without_it(
    log: CommitLog, kit: Kit
) -> None:
    other = CommitLog(log.path).open()
    commit_id = other.new_commit_id()
    kit.write_files(other.stage_dir(commit_id), {"a.parquet": kit.parquet(TP0, 0, 1)})
    with pytest.raises(ValueError, match="not staged"):
        log.commit("sink", 0, 1, [r(TP0, 0, 1)], commit_id=commit_id)
    other.commit("sink", 0, 1, [r(TP0, 0, 1)], commit_id=commit_id)
    kit.assert_exactly_once(log.path, {TP0: 1})
