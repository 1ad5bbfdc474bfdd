"""Kill at every step of a checkpoint and of the clean-up (issue 16 item 1): the log opens, and
its offsets, epochs and owners are the same as without the kill; readers see each offset once.

As ``test_commitlog_crash``: a forked child dies (``os._exit``) right before its k-th filesystem
call, for k = 0, 1, 2, ... until it gets to the end.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.storage import CommitLog
from daemon.storage.checkpoint import checkpoint_seqs
from daemon.storage.commitlog import META

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
BEFORE = {TP0: 10, TP1: 5}
AFTER = {TP0: 20, TP1: 8}
SECOND = [OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 5, 8)]
INTERVAL = 2  # the second commit (seq 2) writes a checkpoint


def _commit(
    kit: Kit, table: Path, files: Mapping[str, bytes], ranges: Iterable[OffsetRange], epoch: int
) -> None:
    log = CommitLog(table, checkpoint_interval=INTERVAL).open()
    commit_id = log.new_commit_id()
    kit.write_files(log.stage_dir(commit_id), files)
    log.commit("sink", 0, epoch, ranges, commit_id=commit_id)
    log.close()


def _state(log: CommitLog) -> tuple[Any, ...]:
    return (log.committed_offsets(), log.last_epoch("sink"), log.owners())


def _no_temps(table: Path) -> None:
    for sub in ("checkpoint", "log"):
        assert not [n for n in os.listdir(table / META / sub) if n.startswith(".")], sub


def test_kill_at_every_step_of_a_commit_that_writes_a_checkpoint(kit: Kit, tmp_path: Path) -> None:
    template = tmp_path / "template"
    _commit(
        kit,
        template,
        {
            "day=1/part-a.parquet": kit.parquet(TP0, 0, 10),
            "day=2/b.parquet": kit.parquet(TP1, 0, 5),
        },
        [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 5)],
        epoch=1,
    )
    second = {
        "day=1/c.parquet": kit.parquet(TP0, 10, 20),
        "day=3/d.parquet": kit.parquet(TP1, 5, 8),
        "_SUCCESS": b"",
    }
    outcomes, checkpointed = [], []
    for step in count():
        table = tmp_path / f"s{step}"
        shutil.copytree(template, table)
        status = kit.run_killed_at(step, lambda t=table: _commit(kit, t, second, SECOND, epoch=2))
        assert status in (0, kit.killed), f"step {step}: the child failed ({status})"
        checkpointed.append(checkpoint_seqs(CommitLog(table).fs) == [2])
        log = CommitLog(table, stale_after=0, checkpoint_interval=INTERVAL).open()
        log.clean_up(sweep_temps=True)  # the log's temporary files
        ends, epoch, owners = _state(log)
        assert ends in (BEFORE, AFTER)
        assert epoch == (2 if ends == AFTER else 1) and owners == {TP0: "sink", TP1: "sink"}
        kit.assert_exactly_once(table, ends)
        kit.assert_clean(table)
        _no_temps(table)
        outcomes.append(ends == AFTER)
        if ends == BEFORE:  # the retry lands on seq 2 and writes the checkpoint itself
            _commit(kit, table, second, SECOND, epoch=3)
        expected = _state(CommitLog(table).open())
        # A kill after record 2 but before its checkpoint loses the checkpoint (the next
        # multiple writes one); if there is one, it alone opens the log: the same state.
        if checkpoint_seqs(CommitLog(table).fs) == [2]:
            os.unlink(table / META / "log" / f"{1:020d}.json")
            os.unlink(table / META / "log" / f"{2:020d}.json")
            assert _state(CommitLog(table).open()) == expected
        assert expected[0] == AFTER
        kit.assert_exactly_once(table, AFTER)
        shutil.rmtree(table)
        if status == 0:
            break
    # Kill points before the commit point, after it, and after the checkpoint was published.
    assert outcomes.count(False) > 10 and outcomes.count(True) > 10
    assert 0 < checkpointed.count(True) < len(checkpointed)


def test_kill_at_every_step_of_the_clean_up(kit: Kit, tmp_path: Path) -> None:
    template = tmp_path / "template"
    with CommitLog(template, checkpoint_interval=INTERVAL, retention_ms=0) as log:
        for i in range(9):  # checkpoints at 2, 4, 6, 8; epochs 1, 2, 3
            tp = (TP0, TP1)[i % 2]
            start = log.committed_offsets().get(tp, 0)
            ranges = [OffsetRange(tp.topic, tp.partition, start, start + 3)]
            log.commit("sink", 0, 1 + i // 3, ranges, commit_id=log.new_commit_id())
        expected = _state(log)
    assert checkpoint_seqs(CommitLog(template).fs) == [2, 4, 6, 8]
    steps = 0
    for step in count():
        table = tmp_path / f"c{step}"
        shutil.copytree(template, table)

        def clean(t: Path = table) -> None:
            CommitLog(t, checkpoint_interval=INTERVAL, retention_ms=0).open().clean_up()

        status = kit.run_killed_at(step, clean)
        assert status in (0, kit.killed), f"step {step}: the child failed ({status})"
        log = CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0).open()
        assert _state(log) == expected, f"step {step}"
        log.clean_up()  # the next run finishes the job
        assert sorted(os.listdir(table / META / "log")) == [f"{s:020d}.json" for s in (7, 8, 9)]
        assert sorted(os.listdir(table / META / "done")) == [f"{s:020d}" for s in (7, 8, 9)]
        assert checkpoint_seqs(log.fs) == [6, 8]
        assert _state(CommitLog(table).open()) == expected
        shutil.rmtree(table)
        steps += 1
        if status == 0:
            break
    # A kill before each of its 14 deletions (6 records, 6 markers, 2 checkpoints).
    assert steps > 14
