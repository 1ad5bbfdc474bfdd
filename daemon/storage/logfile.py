"""A commit log's records and checkpoints on disk: following them into the in-memory state
(``daemon.storage.logstate``), appending the next record, publishing due checkpoints.

``LogFile`` starts from the latest checkpoint and reads the records after it, by name
(``<seq + 1>``, until one is missing). A missing record is the end of the log only if no
checkpoint past this reader's position exists: a record deleted by a clean-up before this reader
got to it is never needed, because a checkpoint past it was published first, and the reader
jumps to it (``jump_past_cleaned``: one listing of the small checkpoint directory each time a
read reaches a missing record). Another writer's clean-up may run with a shorter
``commit.log.retention.ms`` than this reader's (two connectors on one table), so no reader
infers "nothing was cleaned since I last looked" from its own retention. ``CommitLog`` holds
one and calls it under its lock.

Checkpoints: the committer whose record's seq is a multiple of the interval publishes a
checkpoint once every record up to it is done (rolling others' unfinished ones forward); a
table without checkpoints is read whole, and gets one at the next multiple. Memory holds only
the records since the checkpoint this instance knows of; an instance that only reads (others
win the checkpoint races) looks for a newer checkpoint now and then to trim.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from daemon.errors import StorageCorrupt
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
from daemon.storage.logstate import LogState, TableLost
from daemon.storage.records import CommitRecord

log = logging.getLogger("connectd.storage.commitlog")

#: Listings of the checkpoint directory before a reader gives up jumping past cleaned records
#: (each one found every newer checkpoint deleted before it could be read).
JUMP_ATTEMPTS = 5


class LogFile:
    """The log on ``fs``, read into and written from ``state`` (see the module docs).
    ``interval``: the checkpoint interval (memory stays within about two of it). Not
    thread-safe: the owning ``CommitLog`` calls it under its lock."""

    def __init__(self, fs: TableFs, state: LogState, *, interval: int) -> None:
        self.fs, self.state = fs, state
        self._interval = interval
        self._trim_probe_at = 0

    def load_latest(self) -> None:
        """Start from the latest checkpoint (none: from the first record), read the rest."""
        self.state.reset(None)
        for seq in reversed(checkpoint_seqs(self.fs)):
            checkpoint = read_checkpoint(self.fs, seq)
            if checkpoint is not None:  # else a clean-up deleted it since the listing
                self.state.reset(checkpoint)
                break
        self.refresh()

    def check_no_gap(self) -> None:
        """After reading to the end: a later record must not exist (a hole in the log)."""
        fs, state = self.fs, self.state
        while fs.exists(join(LOG, record_name(state.seq + 2))):
            if not fs.exists(join(LOG, record_name(state.seq + 1))):
                if self.jump_past_cleaned():  # cleaned up under us since the last read
                    self.refresh()
                    continue
                after = f"after checkpoint {state.base}" if state.base else "with no checkpoint"
                raise StorageCorrupt(
                    f"commit log {fs.uri(LOG)} has a gap: record {state.seq + 1} is missing "
                    f"({after}) while record {state.seq + 2} exists; records after the latest "
                    "checkpoint are never deleted, so files were removed by hand: restore them"
                )
            self.refresh()  # another committer published meanwhile

    def refresh(self) -> None:
        """Read the records created since the last read (by anyone)."""
        while True:
            name = join(LOG, record_name(self.state.seq + 1))
            data = self.fs.read(name)
            if data is None:
                # The end of the log, unless a clean-up (any writer's, any retention) deleted
                # records this reader never read: then a checkpoint past them exists.
                if self.jump_past_cleaned():
                    continue
                return
            record = CommitRecord.from_json(data, source=self.fs.uri(name))
            if record.seq != self.state.seq + 1:
                raise StorageCorrupt(f"commit record {self.fs.uri(name)} says seq {record.seq}")
            self.account(record)

    def account(self, record: CommitRecord) -> None:
        state = self.state
        state.account(record)
        if len(state.records) > 2 * self._interval and state.seq >= self._trim_probe_at:
            # Others write the checkpoints (this instance only reads, or loses the races):
            # look for one now and then so memory stays bounded.
            self._trim_probe_at = state.seq + self._interval
            known = [s for s in checkpoint_seqs(self.fs) if state.base < s <= state.seq]
            if known:
                state.trim(known[-1])

    def unfinished(self) -> list[CommitRecord]:
        """The records read that have no ``done`` marker yet (their files may not be in
        place); the others are marked done in the state."""
        fs, state = self.fs, self.state
        unsure = state.pending()
        if len(unsure) > 1000:  # a table from before checkpoints: one listing, not N reads
            done = set(fs.listdir(DONE))
            pending = [r for r in unsure if done_name(r.seq) not in done]
        else:
            pending = [r for r in unsure if not fs.exists(join(DONE, done_name(r.seq)))]
        state.done(r.seq for r in unsure)
        state.unsure.update(r.seq for r in pending)
        return pending

    def jump_past_cleaned(self) -> bool:
        """Whether a checkpoint at or past the next number exists, and this instance moved to
        it. A clean-up (of any writer, with any retention) deletes only records a checkpoint
        covers, and that checkpoint is published before the deletion: so a number this
        instance found free after its last read may be a deleted record's, never to be used
        again, exactly when such a checkpoint is there. One small listing per publish."""
        for _ in range(JUMP_ATTEMPTS):
            newer = [s for s in checkpoint_seqs(self.fs) if s > self.state.seq]
            if not newer:
                return False
            for seq in reversed(newer):
                checkpoint = read_checkpoint(self.fs, seq)
                if checkpoint is not None:
                    self.state.reset(checkpoint)
                    return True
            # Every one listed was deleted since the listing (a clean-up moved on): list again.
        raise StorageCorrupt(
            f"commit log {self.fs.uri(CHECKPOINT)}: checkpoints past record {self.state.seq} "
            f"kept disappearing while read ({JUMP_ATTEMPTS} listings); try again"
        )

    def publish(self, check: Callable[[], None], **fields: Any) -> CommitRecord:
        """Check against the latest state, then create the next record; on a lost race re-read
        and check again. Call with the owner's lock held."""
        while True:
            self.refresh()
            if self.jump_past_cleaned():
                continue
            self.check_kept()
            check()
            record = CommitRecord(seq=self.state.seq + 1, **fields)
            try:
                self.fs.publish_exclusive(join(LOG, record_name(record.seq)), record.to_json())
            except FileExistsError:
                continue  # another committer took this number: re-read, re-check
            self.account(record)
            if record.seq % self._interval == 0:
                self.state.due[record.seq] = self.state.snapshot()
            return record

    def check_kept(self) -> None:
        """The last record read is still there (or a checkpoint at or past it, after a
        clean-up): else the log was deleted under this writer, and the next record would
        start a new log that looks complete."""
        seq = self.state.seq
        if seq == 0 or self.fs.exists(join(LOG, record_name(seq))):
            return
        if any(s >= seq for s in checkpoint_seqs(self.fs)):
            return
        raise TableLost(
            f"commit log {self.fs.uri(LOG)} is gone: record {seq}, the last this writer read,"
            " no longer exists (the table was deleted, or its log removed by hand); nothing"
            " was committed"
        )

    def checkpoint(self, seq: int, apply: Callable[[CommitRecord], None]) -> None:
        """Publish the checkpoint due at ``seq`` (if any) once every record up to it is done.
        Losing the race to another committer's checkpoint is fine: it holds the same state,
        derived from the same records."""
        checkpoint = self.state.due.pop(seq, None)
        if checkpoint is None:
            return
        try:
            for record in self.state.pending(upto=seq):
                if self.fs.exists(join(DONE, done_name(record.seq))):
                    self.state.done([record.seq])
                else:  # another committer's, not applied yet (or killed): roll it forward
                    apply(record)
            with contextlib.suppress(FileExistsError):  # another committer's: same state
                self.fs.publish_exclusive(join(CHECKPOINT, record_name(seq)), checkpoint.to_json())
        except (OSError, StorageCorrupt) as exc:
            # The record that made it due has landed: failing its commit now would make the
            # writer give up a commit that is in the table. The next one covers this state.
            log.warning(
                "commit log %s: checkpoint at record %d not written (%s); the next one"
                " covers its state",
                self.state.location,
                seq,
                exc,
            )
            return
        self.state.trim(seq)
