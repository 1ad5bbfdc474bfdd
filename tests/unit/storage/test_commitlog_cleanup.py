"""The clean-up by low-water mark (review of issue 16): a run touches records and markers by name
from the lowest one still on disk, never lists the log or ``done`` directories, and its cost
does not grow with the table's history; a kill, an error or a deadline at any step leaves a
log that opens with the same state, and a later run (of the same instance, whose remembered
mark is then stale, or of a new one, which derives it) removes what the interrupted one left.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.storage import CommitLog
from daemon.storage import cleanup as cleanup_module
from daemon.storage.checkpoint import checkpoint_seqs
from daemon.storage.commitlog import META
from daemon.storage.fs import LocalFs

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
DAY_MS = 24 * 3600 * 1000
INTERVAL = 5


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of commits to build history: durability is not what these tests are about
    (the killed children here only delete, and deletions are not fsynced either way)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


class CountingFs(LocalFs):
    """Counts the filesystem calls of the commit log, and the names each listing returned."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: Counter[str] = Counter()
        self.listed: Counter[str] = Counter()  # directory -> names returned

    def reset(self) -> None:
        self.calls.clear()
        self.listed.clear()

    def listdir(self, name: str) -> list[str]:
        names = super().listdir(name)
        self.calls["listdir"] += 1
        self.listed[name] += len(names)
        return names

    def exists(self, name: str) -> bool:
        self.calls["exists"] += 1
        return super().exists(name)

    def read(self, name: str) -> bytes | None:
        self.calls["read"] += 1
        return super().read(name)

    def remove(self, name: str) -> None:
        self.calls["remove"] += 1
        super().remove(name)

    def remove_stale_temps(self, name: str, older_than: float) -> None:
        self.calls["remove_stale_temps"] += 1
        self.listed[name] += len(super().listdir(name))
        super().remove_stale_temps(name, older_than)


def commits(log: CommitLog, n: int, epoch: int = 1) -> None:
    """``n`` empty commits, alternating partitions, each continuing the last."""
    for _ in range(n):
        tp = (TP0, TP1)[log.last_seq() % 2]
        start = log.committed_offsets().get(tp, 0)
        ranges = [OffsetRange(tp.topic, tp.partition, start, start + 1)]
        log.commit("sink", 0, epoch, ranges, commit_id=log.new_commit_id())


def names(table: Path, sub: str) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(table / META / sub) if n[0] != ".")


def state(log: CommitLog) -> tuple[Any, ...]:
    return (log.committed_offsets(), log.last_epoch("sink"), log.owners(), log.last_seq())


def assert_cleaned(table: Path, last: int) -> None:
    """What a finished clean-up leaves (retention 0): records and markers after the
    checkpoint before the latest, and the two latest checkpoints."""
    checkpoints = checkpoint_seqs(LocalFs(table))
    assert checkpoints == [last // INTERVAL * INTERVAL - INTERVAL, last // INTERVAL * INTERVAL]
    kept = list(range(checkpoints[0] + 1, last + 1))
    assert names(table, "log") == kept
    assert names(table, "done") == kept


def test_a_run_lists_no_log_and_costs_the_same_at_any_history(tmp_path: Path) -> None:
    table = tmp_path / "t"
    fs = CountingFs(table)
    log = CommitLog(table, fs=fs, checkpoint_interval=INTERVAL, retention_ms=0).open()
    costs = []
    for _ in range(6):  # 100, 200, ... 600 records of history
        commits(log, 100)
        fs.reset()
        report = log.clean_up()
        assert report.finished and report.records == 100 - (report.upto == 95) * 5
        # The checkpoint dir is the only listing: the two kept at the last run, and the
        # ones published since (the interval between runs, not the history).
        assert fs.calls["listdir"] == 1 and set(fs.listed) == {f"{META}/checkpoint"}
        assert fs.listed[f"{META}/checkpoint"] <= 2 + 100 // INTERVAL
        costs.append(dict(fs.calls))
        assert_cleaned(table, log.last_seq())
    # After the first run, every run deletes the 100 records and markers committed since the
    # last one, with one probe to confirm the remembered mark: the same work each time.
    assert costs[1:] == [costs[1]] * 5, costs
    # Each deletes 100 markers, 100 records and 20 checkpoints; reads only the checkpoint
    # that says how far it may go (past the retention: no record needs reading).
    assert costs[1] == {"listdir": 1, "exists": 1, "read": 1, "remove": 220}

    # Records kept for audit (retention a day): a run reads one record and stops, however
    # many are kept.
    for kept in (50, 500):
        young = tmp_path / f"young{kept}"
        young_fs = CountingFs(young)
        log = CommitLog(young, fs=young_fs, checkpoint_interval=INTERVAL, retention_ms=DAY_MS)
        log.open()
        commits(log, kept)
        log.clean_up()  # the checkpoints before the last two go (not the records)
        commits(log, 10)
        young_fs.reset()
        assert log.clean_up().records == 0
        # The checkpoint, the lowest record (too young), the two checkpoints since.
        assert dict(young_fs.calls) == {"listdir": 1, "exists": 1, "read": 2, "remove": 2}
        assert set(young_fs.listed) == {f"{META}/checkpoint"}


def test_a_new_instance_finds_the_mark_in_log2_probes(tmp_path: Path) -> None:
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0) as log:
        commits(log, 1000)
        log.clean_up()
        commits(log, 24)  # records 996..1024: 995 deleted, the mark at 996
    fs = CountingFs(table)
    log = CommitLog(table, fs=fs, checkpoint_interval=INTERVAL, retention_ms=0).open()
    fs.reset()
    report = log.clean_up()
    assert report.records == 1015 - 995 and report.low == 1016
    # No listing of the log, and about log2(1015) probes to find where the records start.
    assert fs.calls["listdir"] == 1 and set(fs.listed) == {f"{META}/checkpoint"}
    assert fs.calls["exists"] <= 13, fs.calls
    assert_cleaned(table, 1024)
    # The audit reads by name from the mark too.
    fs.reset()
    assert [r.seq for r in log.records(since=1)] == list(range(1016, 1025))
    assert f"{META}/log" not in fs.listed


def test_markers_left_by_the_previous_order_are_removed(tmp_path: Path) -> None:
    """The clean-up before this one deleted a record, then its marker: a kill between them left
    a marker just below the lowest record. A new instance's first run removes it."""
    table = tmp_path / "t"
    with CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0) as log:
        commits(log, 23)
        log.clean_up()  # records 1..15 gone
    (table / META / "done" / f"{15:020d}").touch()  # the leftover of a killed run
    (table / META / "done" / f"{14:020d}").touch()
    with CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0) as log:
        report = log.clean_up()
    assert report.records == 0 and report.markers == 2
    assert names(table, "done") == names(table, "log") == list(range(16, 24))


def _make(table: Path) -> tuple[CommitLog, tuple[Any, ...]]:
    """A table whose first clean-up ran (records 1..5 gone: the instance's mark is 6), then
    11 more commits: the next run deletes records and markers 6..15, checkpoints 5 and 10."""
    log = CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0).open()
    commits(log, 11, epoch=1)
    assert log.clean_up().low == 6
    commits(log, 11, epoch=2)
    return log, state(log)


def _template(root: Path) -> tuple[Path, tuple[Any, ...]]:
    log, expected = _make(root / "template")
    log.close()
    return root / "template", expected


def _check(table: Path, expected: tuple[Any, ...], step: int) -> None:
    log = CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0).open()
    assert state(log) == expected, f"step {step}"
    log.close()


def test_kill_at_every_step_of_a_run_that_remembers_the_mark(kit: Kit, tmp_path: Path) -> None:
    steps = 0
    for step in count():
        table = tmp_path / f"k{step}"
        log, expected = _make(table)
        status = kit.run_killed_at(step, log.clean_up)  # the instance's second run
        assert status in (0, kit.killed), f"step {step}: the child failed ({status})"
        _check(table, expected, step)
        # The same instance's next run (its mark, 6, is stale now) finishes the job.
        assert log.clean_up().finished
        assert_cleaned(table, 22)
        _check(table, expected, step)
        log.close()
        shutil.rmtree(table)
        steps += 1
        if status == 0:
            break
    # A kill before each deletion: 10 markers, 10 records, 2 checkpoints; then no kill.
    assert steps == 23


def test_kill_at_every_step_then_a_new_instance_finishes(kit: Kit, tmp_path: Path) -> None:
    template, expected = _template(tmp_path)
    for step in count():
        table = tmp_path / f"n{step}"
        shutil.copytree(template, table)

        def run(t: Path = table) -> None:
            CommitLog(t, checkpoint_interval=INTERVAL, retention_ms=0).open().clean_up()

        status = kit.run_killed_at(step, run)
        assert status in (0, kit.killed), f"step {step}: the child failed ({status})"
        _check(table, expected, step)
        with CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0) as log:
            log.clean_up()
        assert_cleaned(table, 22)
        shutil.rmtree(table)
        if status == 0:
            break


def test_an_error_or_the_deadline_at_any_step_and_the_next_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template, expected = _template(tmp_path)
    outcomes = []
    for step in range(25):
        for how in ("error", "deadline"):
            table = tmp_path / f"{how}{step}"
            shutil.copytree(template, table)
            log = CommitLog(table, checkpoint_interval=INTERVAL, retention_ms=0).open()
            if how == "error":  # the step-th deletion fails
                calls, remove = count(), log.fs.remove

                def failing(
                    name: str,
                    remove: Callable[[str], None] = remove,
                    calls: Iterator[int] = calls,
                    step: int = step,
                ) -> None:
                    if next(calls) == step:
                        raise OSError(5, "Input/output error")
                    remove(name)

                monkeypatch.setattr(log.fs, "remove", failing)
                try:
                    outcomes.append(log.clean_up().finished)
                except OSError:
                    outcomes.append(False)
            else:  # the deadline passes at the step-th look at the clock
                monkeypatch.setattr(cleanup_module, "time", _Clock(step))
                outcomes.append(log.clean_up(deadline=1.0).finished)
            monkeypatch.undo()
            _check(table, expected, step)
            log.clean_up()  # the same instance goes on
            assert_cleaned(table, 22)
            _check(table, expected, step)
            shutil.rmtree(table)
    assert 0 < outcomes.count(True) < outcomes.count(False)


class _Clock:
    """``time`` for the clean-up module: ``monotonic`` passes 1.0 after ``n`` calls."""

    def __init__(self, n: int) -> None:
        self.left = n

    def monotonic(self) -> float:
        self.left -= 1
        return 0.0 if self.left >= 0 else 2.0

    @staticmethod
    def time() -> float:
        return time.time()
