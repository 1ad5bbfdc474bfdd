"""A commit log's records and checkpoints on disk: following them into the in-memory state
(``daemon.storage.logstate``), appending the next record, publishing due checkpoints.

``LogFile`` starts from the latest checkpoint and reads the records after it, by name
(``<seq + 1>``, until one is missing: the end of the log). A record deleted by a clean-up before
this reader got to it is never needed: a checkpoint past it was published first, and the reader
jumps to it (``refresh`` after half the retention without reaching the end, ``jump_past_cleaned``
before every publish). ``CommitLog`` holds one and calls it under its lock.

Checkpoints: the committer whose record's seq is a multiple of the interval publishes a
checkpoint once every record up to it is done (rolling others' unfinished ones forward); a
table without checkpoints is read whole, and gets one at the next multiple. Memory holds only
the records since the checkpoint this instance knows of; an instance that only reads (others
win the checkpoint races) looks for a newer checkpoint now and then to trim.
"""

from __future__ import annotations

import contextlib
import logging
import time
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
from daemon.storage.logstate import LogState
from daemon.storage.records import CommitRecord

log = logging.getLogger("connectd.storage.commitlog")


class LogFile:
    """The log on ``fs``, read into and written from ``state`` (see the module docs).
    ``interval``: the checkpoint interval (memory stays within about two of it);
    ``retention_ms``: this instance's ``commit.log.retention.ms``. Not thread-safe: the
    owning ``CommitLog`` calls it under its lock."""

    def __init__(self, fs: TableFs, state: LogState, *, interval: int, retention_ms: int) -> None:
        self.fs, self.state = fs, state
        self._interval = interval
        self._retention_ms = retention_ms
        #: Wall time (ms) before the last read that found the end of the log; 0: never.
        self._synced_ms = 0.0
        self._trim_probe_at = 0

    def load_latest(self) -> None:
        """Start from the latest checkpoint (none: from the first record), read the rest."""
        self.state.reset(None)
        for seq in reversed(checkpoint_seqs(self.fs)):
            checkpoint = read_checkpoint(self.fs, seq)
            if checkpoint is not None:  # else a clean-up deleted it since the listing
                self.state.reset(checkpoint)
                break
        self._synced_ms = 0.0  # check for a newer checkpoint once the records run out
        self.refresh()

    def check_no_gap(self) -> None:
        """After reading to the end: a later record must not exist (a hole in the log)."""
        fs, state = self.fs, self.state
        while fs.exists(join(LOG, record_name(state.seq + 2))):
            if not fs.exists(join(LOG, record_name(state.seq + 1))):
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
            before_ms = time.time() * 1000
            data = self.fs.read(name)
            if data is None:
                # A record we have not read was created after our last look at the end of the
                # log; a clean-up deletes none younger than the retention. Past half of it, a
                # clean-up may have deleted records we never read: jump to a newer checkpoint.
                if before_ms - self._synced_ms >= self._retention_ms / 2:
                    latest = max(checkpoint_seqs(self.fs), default=0)
                    if latest > self.state.seq:
                        checkpoint = read_checkpoint(self.fs, latest)
                        if checkpoint is not None:
                            self.state.reset(checkpoint)
                        continue
                self._synced_ms = before_ms
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
        for seq in reversed(checkpoint_seqs(self.fs)):
            if seq <= self.state.seq:
                return False
            checkpoint = read_checkpoint(self.fs, seq)
            if checkpoint is not None:
                self.state.reset(checkpoint)
                return True
        return False

    def publish(self, check: Callable[[], None], **fields: Any) -> CommitRecord:
        """Check against the latest state, then create the next record; on a lost race re-read
        and check again. Call with the owner's lock held."""
        while True:
            self.refresh()
            if self.jump_past_cleaned():
                continue
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
