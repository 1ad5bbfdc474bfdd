"""The clean-up of a commit log: delete the records, ``done`` markers and checkpoints that no
opener needs any more, touching only the names it deletes.

Records and markers up to the checkpoint *before* the latest are no longer needed by anyone
opening the log (an opener that listed the checkpoints just before a newer one appeared still
reads from the latest it saw); they are deleted once older than the retention (kept for
audit), oldest first, then checkpoints older than that one.

Cost: a run never lists the log or ``done`` directories (with a 7-day retention at one commit a
second they hold 600,000 names each). It lists only the checkpoint directory (two or three
names) and touches records and markers by constructed name from the *low-water mark*, the
lowest seq that may still be on disk, up to the first one it keeps. The mark is derived from
the disk, not stored: every cleaner deletes in ascending order, so the deleted records are
always a prefix ``1..low - 1`` of the log, and a binary search over "does record ``seq``
exist" finds ``low`` in ``log2(seq)`` probes. ``Cleaner`` (held by ``CommitLog``) remembers
the mark a run ends at and hands it to the next run, which then confirms it with one probe.

Kill safety: each step deletes only files no opener needs. Per seq the marker goes first, then
the record: a kill between the two leaves a record without its marker below the checkpoint
(nothing reads markers there), which stays at the low-water mark, so the next run deletes it.
The prefix property survives any kill, so the next run's search starts from a correct mark.
Leftovers of the previous layout's order (record first: at most one marker just below the
lowest record per killed run) are probed for and deleted when a run derives the mark afresh.

Temporary files of killed publishers in the log directory have random names, so finding them
needs a listing of the log: ``fs_sweep_temps`` does it, and ``Cleaner`` runs it only now and
then (``TEMP_SWEEP_EVERY``), not on every run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from daemon.storage.checkpoint import (
    CHECKPOINT,
    DONE,
    LOG,
    checkpoint_seqs,
    done_name,
    read_checkpoint,
    record_name,
)
from daemon.storage.fs import TableFs, join
from daemon.storage.records import CommitRecord

#: Seconds between two listings of the log directory for killed publishers' temporary files.
TEMP_SWEEP_EVERY = 24 * 3600.0


@dataclass
class CleanUp:
    """What one ``clean_up`` run did."""

    records: int = 0
    markers: int = 0
    checkpoints: int = 0
    #: ``False`` if the deadline stopped it before it was through (the next run continues).
    finished: bool = True
    #: Records up to this seq may be deleted (the checkpoint before the latest); 0: none yet.
    upto: int = 0
    #: The low-water mark after the run: every record and marker below it is deleted; 0 if
    #: the run did not get to look (fewer than two checkpoints, or past its deadline).
    low: int = 0


def find_low(fs: TableFs, start: int, end: int) -> int:
    """The lowest seq in ``start..end`` whose record exists, or ``end + 1`` if none does,
    given that the deleted records form a prefix and every seq below ``start`` is deleted.

    One probe if ``start`` exists (the remembered mark is current), ``log2`` of the range
    otherwise. Cleaners deleting concurrently only extend the prefix: the answer is then a
    mark that was current during the search, still a correct place to start."""
    if start > end or fs.exists(join(LOG, record_name(start))):
        return start
    lo, hi = start + 1, end + 1  # ``hi`` stands for "exists"; record ``start`` does not
    while lo < hi:
        mid = (lo + hi) // 2
        if fs.exists(join(LOG, record_name(mid))):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _created_ms(fs: TableFs, name: str) -> int:
    """When record ``name`` was created; 0 if it is gone (deleted by a racing clean-up)."""
    data = fs.read(name)
    return 0 if data is None else CommitRecord.from_json(data, source=fs.uri(name)).created_ms


def fs_sweep_temps(fs: TableFs, stale_after: float) -> None:
    """Delete killed publishers' temporary files in the log directory older than
    ``stale_after`` seconds. Lists the log (its whole retention): run it rarely."""
    fs.remove_stale_temps(LOG, stale_after)


def clean_up(
    fs: TableFs,
    *,
    retention_ms: int,
    low: int = 0,
    deadline: float | None = None,
) -> CleanUp:
    """Delete records, ``done`` markers and checkpoints no opener needs (module docs).

    ``low``: the low-water mark the previous run of this process reported (0: unknown, derive
    it). ``deadline``: a ``time.monotonic()`` value; the run stops at the first step past it.
    Blocks on I/O: run it in a thread (or an executor job), never on the event loop.
    """
    report = CleanUp()

    def late() -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            report.finished = False
            return True
        return False

    checkpoints = checkpoint_seqs(fs)
    if len(checkpoints) < 2 or late():
        return report
    upto = report.upto = checkpoints[-2]
    fresh = low < 1
    seq = report.low = find_low(fs, max(low, 1), upto)
    if fresh:
        _remove_old_leftovers(fs, seq, report, late)
    horizon_ms = time.time() * 1000 - retention_ms
    # Records up to a checkpoint were all created before it: if it is past the retention,
    # so are they, and none needs reading for its time.
    before = read_checkpoint(fs, upto)
    all_old = before is not None and before.created_ms <= horizon_ms
    while seq <= upto and not late():
        name = join(LOG, record_name(seq))
        if not all_old and _created_ms(fs, name) > horizon_ms:
            break  # kept for audit; later records are younger still
        # The marker first, then the record: the low-water mark is the lowest *record*, so
        # a kill between the two leaves the record there for the next run to find.
        fs.remove(join(DONE, done_name(seq)))
        report.markers += 1
        fs.remove(name)
        report.records += 1
        seq = report.low = seq + 1
    for old in checkpoints[:-2]:
        if late():
            break
        fs.remove(join(CHECKPOINT, record_name(old)))
        report.checkpoints += 1
    return report


class Cleaner:
    """Runs ``clean_up`` on ``fs`` again and again, carrying the low-water mark from one run
    to the next, and sweeps the log's temporary files now and then (``CommitLog`` holds
    one). Thread-safe: runs may overlap (two tasks of a table, a deadline-cut run and the
    next); the mark only grows, and a stale one costs one binary search."""

    def __init__(self, fs: TableFs, *, retention_ms: int, stale_after: float) -> None:
        self.fs = fs
        self._retention_ms = retention_ms
        self._stale_after = stale_after
        self._lock = threading.Lock()
        #: The low-water mark the last run ended at (0: not known yet).
        self.low = 0
        #: When the log's temporary files were last swept (a listing of the whole log):
        #: not at every start, which a daemon killed often would pay each time.
        self._swept_at = time.monotonic()

    def run(self, *, deadline: float | None = None, sweep_temps: bool | None = None) -> CleanUp:
        """One ``clean_up``; with ``sweep_temps`` (``None``: if ``TEMP_SWEEP_EVERY`` has
        passed since the last sweep) also the log's stale temporary files, time allowing."""
        with self._lock:
            low = self.low
        report = clean_up(self.fs, retention_ms=self._retention_ms, low=low, deadline=deadline)
        now = time.monotonic()
        with self._lock:
            self.low = max(self.low, report.low)
            if sweep_temps is None:
                sweep_temps = now - self._swept_at >= TEMP_SWEEP_EVERY
            sweep_temps = sweep_temps and (deadline is None or now < deadline)
            if sweep_temps:
                self._swept_at = now
        if sweep_temps:
            fs_sweep_temps(self.fs, self._stale_after)
        return report


def _remove_old_leftovers(fs: TableFs, low: int, report: CleanUp, late: Callable[[], bool]) -> None:
    """Markers just below the lowest record, left by a run killed between deleting a record
    and its marker (the order before this module's); one probe when there are none."""
    seq = low - 1
    while seq >= 1 and not late() and fs.exists(join(DONE, done_name(seq))):
        fs.remove(join(DONE, done_name(seq)))
        report.markers += 1
        seq -= 1
