"""Kill at every step: a commit (and the recovery after it) killed before any of its filesystem
calls leaves a table where, once reopened, readers see each Kafka offset exactly once, and a
new incarnation can carry on from the committed offsets.

Each case forks a child that dies (``os._exit``, like SIGKILL: no cleanup, its flocks released)
right before its k-th filesystem call, for k = 0, 1, 2, ... until the child gets to the end.
"""

from __future__ import annotations

import os
import shutil
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.storage import CommitLog
from daemon.storage.commitlog import META

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
BEFORE = {TP0: 10, TP1: 5}  # committed by the first batch
AFTER = {TP0: 20, TP1: 8}  # committed once the second batch is in
SECOND = [OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 5, 8)]


def _template(kit: Kit, root: Path) -> tuple[Path, dict[str, bytes]]:
    """A table with the first batch committed, and the second batch's files (as Spark would
    write them: data in partition dirs, plus files readers must never see)."""
    table = root / "template"
    first = {
        "day=1/part-00000-a.c000.snappy.parquet": kit.parquet(TP0, 0, 10),
        "day=2/part-00001-b.c000.snappy.parquet": kit.parquet(TP1, 0, 5),
    }
    kit.stage_and_commit(
        table, first, [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 5)], epoch=1
    )
    second = {
        "day=1/part-00000-c.c000.snappy.parquet": kit.parquet(TP0, 10, 20),
        "day=3/part-00001-d.c000.snappy.parquet": kit.parquet(TP1, 5, 8),
        "day=1/.part-00000-c.c000.snappy.parquet.crc": b"crc",
        "_SUCCESS": b"",
    }
    return table, second


def _recover_and_check(kit: Kit, table: Path, second: dict[str, bytes], retry_epoch: int) -> bool:
    """Reopen as a new incarnation would; check exactly-once; write the second batch again if
    it did not land; check again. Returns whether the killed commit had landed."""
    log = CommitLog(table, stale_after=0).open()
    log.clean_up(sweep_temps=True)  # a killed publisher's temporary file: the clean-up sweeps it
    ends = log.committed_offsets()
    assert ends in (BEFORE, AFTER)
    kit.assert_exactly_once(table, ends)
    kit.assert_clean(table)
    landed = ends == AFTER
    if not landed:
        kit.stage_and_commit(table, second, SECOND, epoch=retry_epoch)
        assert CommitLog(table).open().committed_offsets() == AFTER
    kit.assert_exactly_once(table, AFTER)
    kit.assert_clean(table)
    return landed


def test_kill_at_every_step_of_a_commit(kit: Kit, tmp_path: Path) -> None:
    template, second = _template(kit, tmp_path)
    outcomes = []
    for step in count():
        table = tmp_path / f"s{step}"
        shutil.copytree(template, table)
        status = kit.run_killed_at(
            step, lambda table=table: kit.stage_and_commit(table, second, SECOND, epoch=2)
        )
        assert status in (0, kit.killed), f"step {step}: the child failed ({status})"
        outcomes.append(_recover_and_check(kit, table, second, retry_epoch=3))
        shutil.rmtree(table)
        if status == 0:
            break
    # Sanity: many kill points, some before the commit point and some after it.
    assert len(outcomes) > 40 and outcomes.count(True) > 10 and outcomes.count(False) > 10


def test_kill_at_every_step_of_the_recovery(kit: Kit, tmp_path: Path) -> None:
    """Commits killed after their record but before being done, then recoveries killed at
    every step, then a last recovery: still exactly once."""
    template, second = _template(kit, tmp_path)
    half_done = []
    for step in count():  # find the kill points that leave a commit record not yet done
        table = tmp_path / "probe"
        shutil.copytree(template, table)
        status = kit.run_killed_at(
            step, lambda table=table: kit.stage_and_commit(table, second, SECOND, epoch=2)
        )
        records = os.listdir(table / META / "log")
        if f"{2:020d}.json" in records and f"{2:020d}" not in os.listdir(table / META / "done"):
            half_done.append(step)
        shutil.rmtree(table)
        if status == 0:
            break
    assert len(half_done) >= 5
    # Recoveries after the first, a middle and the last half-done point.
    for commit_step in (half_done[0], half_done[len(half_done) // 2], half_done[-1]):
        base = tmp_path / "base"
        shutil.copytree(template, base)
        kit.run_killed_at(
            commit_step, lambda base=base: kit.stage_and_commit(base, second, SECOND, epoch=2)
        )
        for step in count():
            table = tmp_path / f"r{commit_step}-{step}"
            shutil.copytree(base, table)
            status = kit.run_killed_at(
                step, lambda table=table: CommitLog(table, stale_after=0).open()
            )
            assert status in (0, kit.killed)
            assert _recover_and_check(kit, table, second, retry_epoch=3)  # it had landed
            shutil.rmtree(table)
            if status == 0:
                break
        shutil.rmtree(base)


def test_kill_at_every_step_of_operator_records(kit: Kit, tmp_path: Path) -> None:
    template, _ = _template(kit, tmp_path)

    def operate(table: Path) -> None:
        log = CommitLog(table).open()
        log.fence("sink", 0, 5, [TP0, TP1])
        log.alter_offsets({TP0: 4})

    for step in count():
        table = tmp_path / f"o{step}"
        shutil.copytree(template, table)
        status = kit.run_killed_at(step, lambda table=table: operate(table))
        assert status in (0, kit.killed)
        log = CommitLog(table, stale_after=0).open()
        log.clean_up(sweep_temps=True)
        kinds = [rec.kind for rec in log.records()]
        assert kinds in (["commit"], ["commit", "fence"], ["commit", "fence", "offsets"])
        assert log.committed_offsets() == ({TP0: 4, TP1: 5} if "offsets" in kinds else BEFORE)
        assert log.last_epoch("sink") == (5 if "fence" in kinds else 1)
        kit.assert_clean(table)
        shutil.rmtree(table)
        if status == 0:
            break


def test_concurrent_processes_one_table(kit: Kit, tmp_path: Path) -> None:
    """Four processes (tasks of one connector) commit to one table at once, one partition
    each, and a zombie of task 0 (older epoch) races its successor on partition 0."""
    table = tmp_path / "table"
    CommitLog(table).open()
    payload = {
        p: [kit.parquet(TopicPartition("t", p), i * 2, i * 2 + 2) for i in range(12)]
        for p in range(4)
    }
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()

    def task(p: int, epoch: int, rounds: int) -> None:
        os.write(ready_w, b"x")
        os.read(go_r, 1)  # start together
        log = CommitLog(table).open()
        for i in range(rounds):
            tp = TopicPartition("t", p)
            start = log.committed_offsets().get(tp, 0)
            if start // 2 >= len(payload[p]):
                return  # the partition is complete (the zombie may have done some of it)
            commit_id = log.new_commit_id()
            kit.write_files(log.stage_dir(commit_id), {"d.parquet": payload[p][start // 2]})
            try:
                log.commit(
                    "sink", p, epoch, [OffsetRange("t", p, start, start + 2)], commit_id=commit_id
                )
            except Exception as e:
                log.abort(commit_id)
                if "zombie" in str(e):
                    return  # fenced: a zombie must stop
                if "duplicate" not in str(e):
                    raise
            del i

    pids = []
    for p, epoch, rounds in ((0, 2, 12), (1, 2, 12), (2, 2, 12), (3, 2, 12), (0, 1, 12)):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 1
            try:
                task(p, epoch, rounds)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    try:
        for _ in pids:
            os.read(ready_r, 1)
        os.write(go_w, b"x" * len(pids))
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    finally:
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
    assert codes == [0] * len(pids)
    log = CommitLog(table).open()
    records = log.records()
    assert [rec.seq for rec in records] == list(range(1, len(records) + 1))
    ends = log.committed_offsets()
    assert ends[TopicPartition("t", 1)] == ends[TopicPartition("t", 2)] == 24
    kit.assert_exactly_once(table, ends)
    kit.assert_clean(table)
    # After epoch 2 first committed partition 0, no epoch-1 commit landed there.
    p0 = [rec for rec in records if rec.ranges[0].partition == 0]
    first_new = next(i for i, rec in enumerate(p0) if rec.epoch == 2)
    assert all(rec.epoch == 2 for rec in p0[first_new:])
