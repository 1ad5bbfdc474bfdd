"""The exactly-once commit log of a file table (Parquet, ORC, JSON, CSV written by Spark).

Layout under the table directory ``<path>/`` (underscore-prefixed names are ignored by Spark,
pyarrow and Hive readers, so readers only ever see data files moved into place)::

    _connectd/staging/<commit-id>/...   a write's data files; the Spark write goes here only
    _connectd/locks/<commit-id>.lock    flock held by the live writer of that staging dir (local)
    _connectd/log/<seq:020d>.json       commit records, created exclusively, never changed
    _connectd/done/<seq:020d>           the record is fully applied (its files are in place)
    _connectd/checkpoint/<seq:020d>.json  the state after record seq (``daemon.storage.checkpoint``)
    part-<commit-id>-NNNNN.<ext>        data files in place (also under ``col=value/`` dirs)

A commit: (1) the data is written into the staging dir of ``commit_id`` (by a killable
executor); (2) ``commit`` checks the offset ranges continue exactly where the last commit of
each partition ended and that the epoch is not older than the partition's last one, then
publishes record ``seq = last + 1`` atomically and exclusively (``TableFs.publish_exclusive``:
losing that race means another committer took the number, so re-read and re-check); the record
is the commit point; (3) files are renamed into place and their directories synced; (4) the
``done`` marker is written and the staging dir removed. ``open`` rolls every commit without its
``done`` marker forward, and deletes staging dirs that no record names and no live writer can
still commit (killed writes). A kill at any instant therefore leaves readers seeing each Kafka
offset exactly once after ``open``.

Checkpoints: the committer whose record's seq is a multiple of ``checkpoint_interval`` publishes
a checkpoint once every record up to it is done; ``open`` reads the latest checkpoint and only
the records after it (a table without checkpoints is read whole, and gets one at the next
multiple). A ``CommitLog`` keeps in memory only the records since the checkpoint it knows of;
``records()`` reads the audit trail from disk. ``clean_up`` (run it in a thread, with a
deadline) deletes records older than the checkpoint before the latest and than
``retention_ms``.

Concurrency: one ``CommitLog`` is thread-safe; several instances and processes (and hosts, on a
shared filesystem) may commit to one table (different partitions, e.g. several tasks of a
connector) — the exclusive creation of the next record is the serialisation point.

Ownership: a partition belongs to the connector that first committed to or fenced it; another
connector's commit or fence of it is refused (``PartitionsOwned``, naming the owner), because
two connectors on the same partitions would refuse each other's commits. Epochs are kept per
connector and partition; ``last_epoch(connector)`` is what a new incarnation must exceed when
the daemon's own epoch counter was lost (``daemon.storage.epochs``: the log is the authority).

The filesystem is a ``TableFs`` (``daemon.storage.fs``): ``LocalFs`` for plain paths and
``file:`` URIs (the default: ``CommitLog(path)``), ``HadoopFs`` for any Hadoop filesystem URI,
used inside an executor process, where the JVM is (``daemon.storage.hadoopfs``). Every method
blocks on I/O: call them off the event loop (``asyncio.to_thread``, or an executor job).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from daemon.errors import CommitRejected, StorageCorrupt
from daemon.storage.checkpoint import (
    CHECKPOINT,
    Checkpoint,
    CleanUp,
    checkpoint_seqs,
    clean_up,
    read_checkpoint,
)
from daemon.storage.fs import LocalFs, TableFs, join, parent
from daemon.storage.records import FORMAT, CommitRecord, DataFile, Kind
from daemon.structs import OffsetRange, TopicPartition

__all__ = [
    "FORMAT",
    "META",
    "CleanUp",
    "CommitLog",
    "CommitRecord",
    "DataFile",
    "Kind",
    "OffsetsDiverged",
    "PartitionsOwned",
    "ZombieEpoch",
]

log = logging.getLogger("connectd.storage.commitlog")

META = "_connectd"
LOG, STAGING, DONE = f"{META}/log", f"{META}/staging", f"{META}/done"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SEQ = re.compile(r"^(\d{20})\.json$")


class ZombieEpoch(CommitRejected):
    """An older epoch of the connector tried to commit or fence after a newer one claimed the
    partition: this incarnation is a zombie. Not retried (a new incarnation of the same task
    would only fence the live one out in turn)."""


class OffsetsDiverged(CommitRejected):
    """A commit does not continue where the partition's last commit (of this connector, or
    an operator's offsets record) ended. Not retried: the same seek would meet the same
    refusal (a gap left by retention never heals); an operator decides (the offsets API)."""


class PartitionsOwned(CommitRejected):
    """Another connector owns the partition (its commit or fence was the partition's last):
    two connectors must not write the same partitions of one table. Not retried (the
    configuration must change: another path, or the new connector names the old one in
    ``takeover``)."""


class CommitLog:
    """The commit log of the table at ``path`` (created if missing). Call ``open()`` first.

    ``fs``: the table's filesystem; default ``LocalFs(path)``. ``stale_after``: seconds after
    which a temporary file of a killed publisher is deleted (and, on Hadoop filesystems, the
    lease of an unfinished staging dir ends; see ``daemon.storage.hadoopfs``).
    ``checkpoint_interval``: a checkpoint every this many records (setting
    ``commit.log.checkpoint.interval``). ``retention_ms``: records are kept at least this long
    for audit before ``clean_up`` may delete them (``commit.log.retention.ms``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        stale_after: float = 600.0,
        fs: TableFs | None = None,
        checkpoint_interval: int = 100,
        retention_ms: int = 7 * 24 * 3600 * 1000,
    ) -> None:
        if checkpoint_interval < 1:
            raise ValueError(f"checkpoint_interval {checkpoint_interval} must be at least 1")
        if retention_ms < 0:
            raise ValueError(f"retention_ms {retention_ms} must not be negative")
        self.fs: TableFs = fs if fs is not None else LocalFs(path)
        self.location = self.fs.location
        self._stale_after = stale_after
        self._interval = checkpoint_interval
        self._retention_ms = retention_ms
        self._lock = threading.RLock()
        self._seq = 0
        #: The checkpoint the in-memory records start after: every record up to it is done.
        self._base = 0
        #: Records ``_base + 1 .. _seq`` (memory is bounded by the checkpoint interval).
        self._records: list[CommitRecord] = []
        #: Seqs of ``_records`` not yet known to be done.
        self._unsure: set[int] = set()
        self._ends: dict[TopicPartition, int] = {}
        self._epochs: dict[tuple[str, TopicPartition], int] = {}
        #: The connector whose commit or fence touched each partition last.
        self._claimed_by: dict[TopicPartition, str] = {}
        #: Checkpoints to publish once their record is applied, by seq.
        self._due: dict[int, Checkpoint] = {}
        #: Wall time (ms) before the last read that found the end of the log; 0: never.
        self._synced_ms = 0.0
        self._trim_probe_at = 0
        self._held: set[str] = set()  # commit ids whose staging dir this instance writes
        self._opened = False
        self._read_only = False

    @property
    def path(self) -> Path:
        """The table's local directory (``LocalFs`` only)."""
        if not isinstance(self.fs, LocalFs):
            raise TypeError(f"{self.location} is not a local table")
        return self.fs.root

    @property
    def meta(self) -> Path:
        return self.path / META

    # ---- opening and recovery ----

    def open(self) -> CommitLog:
        """Read the log, roll incomplete commits forward, delete killed writes' staging dirs."""
        with self._lock:
            fs = self.fs
            fs.ensure_root()
            for sub in ("log", "staging", "locks", "done", "checkpoint"):
                fs.mkdirs(join(META, sub))
            self._load_latest()
            self._check_no_gap()
            self._opened = True
            self.recover()
        return self

    def open_read_only(self) -> CommitLog:
        """Read the log without changing anything (no recovery, nothing created): for checks
        such as a connector's validation. Only the reading methods work afterwards."""
        with self._lock:
            self._load_latest()
            self._opened = self._read_only = True
        return self

    def recover(self) -> None:
        """Finish commits without ``done`` markers; remove orphaned staging dirs, stale
        temporary files and leftover guards. Safe to run at any time, concurrently too."""
        fs = self.fs
        with self._lock:
            self._refresh()
            unsure = [r for r in self._records if r.seq in self._unsure]
            if len(unsure) > 1000:  # a table from before checkpoints: one listing, not N reads
                done = set(fs.listdir(DONE))
                pending = [r for r in unsure if _done(r.seq) not in done]
            else:
                pending = [r for r in unsure if not fs.exists(join(DONE, _done(r.seq)))]
            self._unsure.difference_update(r.seq for r in unsure)
            self._unsure.update(r.seq for r in pending)
            # Records before ``_base`` are done by the checkpoint's invariant, so their
            # staging dirs (leftovers of a kill after the marker) go as orphans below.
            finished = {r.commit_id for r in self._records if r.seq not in self._unsure}
        for record in pending:
            self._apply(record)
        # Not the log's temporary files: listing the log costs as much as it retains
        # records (``clean_up`` removes them).
        fs.remove_stale_temps(CHECKPOINT, self._stale_after)
        staging = set(fs.listdir(STAGING))
        for entry in sorted(staging):
            if entry in finished:
                fs.remove_tree(join(STAGING, entry))
            elif entry not in self._held:
                self._remove_if_orphan(entry)
        fs.sweep_guards(set(fs.listdir(STAGING)), set(self._held))

    def _remove_if_orphan(self, commit_id: str) -> None:
        with self.fs.orphan(commit_id) as orphan:
            # The writer publishes its record while it holds the guard: re-read under it.
            if orphan and not self._finish_if_named(commit_id):
                self.fs.remove_tree(join(STAGING, commit_id))

    def _finish_if_named(self, commit_id: str) -> bool:
        """Roll forward the commit record naming ``commit_id`` if there is one; ``False`` if
        none does (its staged data was never committed)."""
        with self._lock:
            self._refresh()
            named = [r for r in self._records if r.commit_id == commit_id and r.kind == "commit"]
        for record in named:
            self._apply(record)
        return bool(named)

    def _load_latest(self) -> None:
        """Start from the latest checkpoint (none: from the first record), read the rest."""
        self._reset(None)
        for seq in reversed(checkpoint_seqs(self.fs)):
            checkpoint = read_checkpoint(self.fs, seq)
            if checkpoint is not None:  # else a clean-up deleted it since the listing
                self._reset(checkpoint)
                break
        self._synced_ms = 0.0  # check for a newer checkpoint once the records run out
        self._refresh()

    def _reset(self, checkpoint: Checkpoint | None) -> None:
        self._seq = self._base = checkpoint.seq if checkpoint else 0
        self._records, self._due = [], {}
        self._unsure.clear()
        self._ends = dict(checkpoint.ends) if checkpoint else {}
        self._epochs = dict(checkpoint.epochs) if checkpoint else {}
        self._claimed_by = dict(checkpoint.claimed_by) if checkpoint else {}

    def _check_no_gap(self) -> None:
        """After reading to the end: a later record must not exist (a hole in the log)."""
        fs = self.fs
        while fs.exists(join(LOG, _name(self._seq + 2))):
            if not fs.exists(join(LOG, _name(self._seq + 1))):
                after = f"after checkpoint {self._base}" if self._base else "with no checkpoint"
                raise StorageCorrupt(
                    f"commit log {fs.uri(LOG)} has a gap: record {self._seq + 1} is missing "
                    f"({after}) while record {self._seq + 2} exists; records after the latest "
                    "checkpoint "
                    "are never deleted, so files were removed by hand: restore them"
                )
            self._refresh()  # another committer published meanwhile

    def _refresh(self) -> None:
        """Read the records created since the last read (by anyone)."""
        while True:
            name = join(LOG, _name(self._seq + 1))
            before_ms = time.time() * 1000
            data = self.fs.read(name)
            if data is None:
                # A record we have not read was created after our last look at the end of the
                # log; a clean-up deletes none younger than the retention. Past half of it, a
                # clean-up may have deleted records we never read: jump to a newer checkpoint.
                if before_ms - self._synced_ms >= self._retention_ms / 2:
                    latest = max(checkpoint_seqs(self.fs), default=0)
                    if latest > self._seq:
                        checkpoint = read_checkpoint(self.fs, latest)
                        if checkpoint is not None:
                            self._reset(checkpoint)
                        continue
                self._synced_ms = before_ms
                return
            record = CommitRecord.from_json(data, source=self.fs.uri(name))
            if record.seq != self._seq + 1:
                raise StorageCorrupt(f"commit record {self.fs.uri(name)} says seq {record.seq}")
            self._account(record)

    def _account(self, record: CommitRecord) -> None:
        self._records.append(record)
        self._unsure.add(record.seq)
        self._seq = record.seq
        for r in record.ranges:
            self._ends[r.tp] = r.end
        if record.epoch is not None:
            claimed = [r.tp for r in record.ranges] + [tp for tp, _ in record.offsets]
            for tp in claimed:
                key = (record.connector, tp)
                self._epochs[key] = max(self._epochs.get(key, 0), record.epoch)
                self._claimed_by[tp] = record.connector
        if record.kind == "offsets":
            for tp, offset in record.offsets:
                if offset is None:
                    self._ends.pop(tp, None)
                else:
                    self._ends[tp] = offset
        if len(self._records) > 2 * self._interval and self._seq >= self._trim_probe_at:
            # Others write the checkpoints (this instance only reads, or loses the races):
            # look for one now and then so memory stays bounded.
            self._trim_probe_at = self._seq + self._interval
            known = [s for s in checkpoint_seqs(self.fs) if self._base < s <= self._seq]
            if known:
                self._trim(known[-1])

    def _trim(self, seq: int) -> None:
        """Checkpoint ``seq`` is published: records up to it are done and no longer needed."""
        if seq > self._base:
            self._base = seq
            self._records = [r for r in self._records if r.seq > seq]
            self._unsure = {s for s in self._unsure if s > seq}

    # ---- reading the state ----

    def committed_offsets(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Next offset to consume per partition: the end of its last commit (or operator
        setting). Partitions never committed are absent. Includes others' commits (refreshes)."""
        with self._lock:
            self._check_open()
            self._refresh()
            if partitions is None:
                return dict(self._ends)
            return {tp: self._ends[tp] for tp in partitions if tp in self._ends}

    def last_epoch(self, connector: str, tp: TopicPartition | None = None) -> int:
        """The last epoch of ``connector`` that committed to or fenced ``tp`` (any partition if
        ``tp`` is ``None``); 0 if none."""
        with self._lock:
            self._check_open()
            self._refresh()
            if tp is not None:
                return self._epochs.get((connector, tp), 0)
            return max((e for (c, _), e in self._epochs.items() if c == connector), default=0)

    def owners(self, topics: Iterable[str] | None = None) -> dict[TopicPartition, str]:
        """Per partition (of ``topics``; all if ``None``), the connector that owns it: the one
        whose commit or fence of it was the last. An earlier writer no longer owns it (it was
        renamed, or the owner took it over: ``fence(takeover=...)``)."""
        wanted = None if topics is None else set(topics)
        with self._lock:
            self._check_open()
            self._refresh()
            return {
                tp: c for tp, c in self._claimed_by.items() if wanted is None or tp.topic in wanted
            }

    def owned_by(self, connector: str) -> list[TopicPartition]:
        """The partitions ``connector`` owns (see ``owners``)."""
        return sorted(tp for tp, c in self.owners().items() if c == connector)

    def last_seq(self) -> int:
        """The seq of the last record (0: none yet)."""
        with self._lock:
            self._check_open()
            self._refresh()
            return self._seq

    def records_in_memory(self) -> int:
        """How many records this instance holds (bounded by about the checkpoint interval)."""
        with self._lock:
            return len(self._records)

    def records(self, since: int = 1) -> list[CommitRecord]:
        """The records from seq ``since`` on that are still on disk, in order (the audit
        trail; a clean-up deletes the oldest). Read from disk: see ``iter_records``."""
        return list(self.iter_records(since))

    def iter_records(self, since: int = 1) -> Iterator[CommitRecord]:
        """``records`` one at a time: the audit reads history without holding it in memory."""
        with self._lock:
            self._check_open()
            self._refresh()
            last = self._seq
        seqs = sorted(int(m.group(1)) for n in self.fs.listdir(LOG) if (m := _SEQ.match(n)))
        for seq in seqs:
            if since <= seq <= last:
                name = join(LOG, _name(seq))
                data = self.fs.read(name)
                if data is not None:  # else deleted by a clean-up since the listing
                    yield CommitRecord.from_json(data, source=self.fs.uri(name))

    def clean_up(self, *, deadline: float | None = None) -> CleanUp:
        """Delete records and ``done`` markers before the checkpoint before the latest and
        older than ``retention_ms``, checkpoints before that one, and killed publishers'
        temporary files older than ``stale_after``. ``deadline``: a
        ``time.monotonic()`` value; it stops at the first step past it (the next run goes on).
        Blocks (it lists the log): run it in a thread, concurrently with commits if need be.
        A kill at any point leaves a log that opens."""
        self._check_open(write=True)
        return clean_up(
            self.fs,
            retention_ms=self._retention_ms,
            stale_after=self._stale_after,
            deadline=deadline,
        )

    # ---- staging ----

    @staticmethod
    def new_commit_id() -> str:
        """A fresh, unique commit id (sortable by creation time: it starts with the creation
        time in ms, which the Hadoop backend's staging lease reads)."""
        return f"{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:16]}"

    def stage(self, commit_id: str) -> str:
        """Create and guard the staging dir for ``commit_id``; where the write puts its files
        (a path or URI). The guard (held until ``commit`` or ``abort``) keeps ``recover`` from
        deleting it."""
        if not _ID.match(commit_id):
            raise ValueError(f"commit id {commit_id!r}: use letters, digits, '.', '_', '-'")
        name = join(STAGING, commit_id)
        with self._lock:
            self._check_open(write=True)
            if commit_id not in self._held:
                self.fs.hold(commit_id)
                try:
                    self.fs.mkdirs(name)
                    self.fs.sync_dirs([STAGING])
                except BaseException:
                    self.fs.release(commit_id)
                    raise
                self._held.add(commit_id)
        return self.fs.uri(name)

    def stage_dir(self, commit_id: str) -> Path:
        """``stage`` as a local ``Path`` (``LocalFs`` only)."""
        self.path  # noqa: B018 - raises TypeError for a non-local table
        return Path(self.stage(commit_id))

    def staged_files(self, commit_id: str) -> list[DataFile]:
        """The data files written into ``commit_id``'s staging dir, each with its final name
        ``<same subdirs>/part-<commit-id>-NNNNN<extensions>``. Names starting with ``_`` or
        ``.`` (``_SUCCESS``, ``_temporary/``, ``.crc`` files) are not data and are skipped."""
        files = []
        for i, staged in enumerate(self.fs.walk_files(join(STAGING, commit_id))):
            p = PurePosixPath(staged)
            ext = p.name[p.name.index(".") :] if "." in p.name else ""
            files.append(DataFile(staged, str(p.parent / f"part-{commit_id}-{i:05d}{ext}")))
        return files

    def abort(self, commit_id: str) -> bool:
        """Give up a staged write (its executor must be gone): delete its files, drop the guard.

        If a record names ``commit_id`` after all (``commit`` raised after its record was
        created, e.g. an I/O error in a later step), the commit is finished instead and
        ``True`` returned: the record, not the exception, says what was committed.
        """
        with self._lock:
            self._check_open(write=True)
            finished = self._finish_if_named(commit_id)
            if not finished:
                self.fs.remove_tree(join(STAGING, commit_id))
            self._release(commit_id)
            return finished

    def _release(self, commit_id: str) -> None:
        if commit_id in self._held:
            self._held.discard(commit_id)
            self.fs.release(commit_id)

    # ---- writing records ----

    def commit(
        self,
        connector: str,
        task: int,
        epoch: int,
        ranges: Iterable[OffsetRange],
        files: Sequence[DataFile] | None = None,
        *,
        commit_id: str,
    ) -> CommitRecord:
        """Commit the data staged under ``commit_id`` (``files``; default ``staged_files``)
        as covering ``ranges``, atomically, then move it into place.

        ``CommitRejected`` (the staged data is kept: ``abort`` it): ``PartitionsOwned`` if
        another connector committed to or fenced a partition; ``ZombieEpoch`` if ``epoch`` is
        older than the last epoch of ``connector`` that committed to or fenced it;
        ``OffsetsDiverged`` if a range does not start exactly where the partition's last commit
        ended (gap or overlap).
        A partition never committed accepts any start. Ranges may be empty (progress without
        rows, e.g. when every record was bad); ``files`` may be empty.
        """
        ranges = tuple(sorted(ranges))
        if not ranges:
            raise ValueError("a commit needs at least one offset range")
        if len({r.tp for r in ranges}) != len(ranges):
            raise ValueError("a commit has at most one range per partition")
        fs = self.fs
        with self._lock:
            self._check_open(write=True)
            staging = join(STAGING, commit_id)
            if commit_id not in self._held and (files or fs.exists(staging)):
                raise ValueError(f"commit {commit_id} was not staged with stage() here")
            if files is None:
                files = self.staged_files(commit_id) if commit_id in self._held else []
            for f in files:
                _check_relative(f.staged, hidden_ok=True)
                _check_relative(f.final, hidden_ok=False)
                if not fs.is_file(join(staging, f.staged)):
                    raise ValueError(f"commit {commit_id}: staged file {f.staged} is missing")
                if fs.exists(f.final):
                    raise ValueError(f"commit {commit_id}: {f.final} exists in the table")

            def check() -> None:
                for r in ranges:
                    self._check_owner(connector, r.tp)
                    self._check_epoch(connector, epoch, r.tp)
                    end = self._ends.get(r.tp)
                    if end is not None and r.start != end:
                        what = "gap" if r.start > end else "overlap (duplicate)"
                        raise OffsetsDiverged(
                            f"commit of {r.tp} offsets {r.start}..{r.end} by {connector} refused:"
                            f" {what}, the last commit ended at {end}; seek to {end} and write "
                            "from there (a restart of the task does)"
                        )

            record = self._publish(
                check,
                kind="commit",
                connector=connector,
                task=task,
                epoch=epoch,
                commit_id=commit_id,
                ranges=ranges,
                files=tuple(files),
            )
        self._apply(record)
        with self._lock:
            self._release(commit_id)
        self._checkpoint(record.seq)
        return record

    def fence(
        self,
        connector: str,
        task: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        takeover: Collection[str] = (),
    ) -> CommitRecord | None:
        """Claim ``partitions`` for the incarnation with ``epoch``: from now on commits of older
        epochs are refused even before this one commits. ``ZombieEpoch`` if a newer epoch
        already claimed one, ``PartitionsOwned`` if another connector owns one, unless that
        connector is in ``takeover`` (a rename: this connector continues its offsets and it can
        no longer write them). ``None`` (nothing written) if the claim is already in place."""
        tps = sorted(set(partitions))
        with self._lock:
            self._check_open(write=True)
            self._refresh()
            for tp in tps:
                self._check_owner(connector, tp, takeover)
            if all(
                self._epochs.get((connector, tp), 0) >= epoch
                and self._claimed_by.get(tp) == connector
                for tp in tps
            ):
                for tp in tps:
                    self._check_epoch(connector, epoch, tp)
                return None

            def check() -> None:
                for tp in tps:
                    self._check_owner(connector, tp, takeover)
                    self._check_epoch(connector, epoch, tp)

            offsets = tuple((tp, self._ends.get(tp)) for tp in tps)
            record = self._publish(
                check, kind="fence", connector=connector, task=task, epoch=epoch, offsets=offsets
            )
            self._apply(record)
            self._checkpoint(record.seq)
            return record

    def alter_offsets(
        self, offsets: Mapping[TopicPartition, int | None], *, connector: str = ""
    ) -> CommitRecord:
        """An operator sets partitions' next offsets (``None``: forget the partition, so its
        next commit may start anywhere). Epochs are kept. Stop the writers first. With
        ``connector``, ``PartitionsOwned`` if another connector owns one of the partitions:
        one connector's offsets API never moves another's progress."""
        for tp, o in offsets.items():
            if o is not None and o < 0:
                raise ValueError(f"offset {o} for {tp} is negative")
        with self._lock:
            self._check_open(write=True)
            items = tuple(sorted(offsets.items()))

            def check() -> None:
                if connector:
                    for tp, _ in items:
                        self._check_owner(connector, tp)

            record = self._publish(check, kind="offsets", connector=connector, offsets=items)
            self._apply(record)
            self._checkpoint(record.seq)
            return record

    def skip(
        self,
        connector: str,
        task: int,
        epoch: int,
        tp: TopicPartition,
        start: int,
        end: int,
        *,
        reason: str,
    ) -> CommitRecord:
        """Record that the task skipped offsets ``start..end`` (exclusive end) of ``tp``
        without writing them (e.g. retention deleted them before they were consumed): the
        partition's end moves to ``end``, and ``records`` shows the gap with ``reason``.
        Refused like a commit: ``PartitionsOwned``, ``ZombieEpoch``, and ``OffsetsDiverged``
        if the partition has a committed end and ``start`` is not it."""
        if not reason:
            raise ValueError("a skip needs a reason (the audit shows it)")
        skipped = OffsetRange(tp.topic, tp.partition, start, end)
        with self._lock:
            self._check_open(write=True)

            def check() -> None:
                self._check_owner(connector, tp)
                self._check_epoch(connector, epoch, tp)
                last = self._ends.get(tp)
                if last is not None and start != last:
                    raise OffsetsDiverged(
                        f"skip of {tp} offsets {start}..{end} by {connector} refused: it must "
                        f"start where the last commit ended, at {last}"
                    )

            record = self._publish(
                check,
                kind="skip",
                connector=connector,
                task=task,
                epoch=epoch,
                ranges=(skipped,),
                reason=reason,
            )
            self._apply(record)
            self._checkpoint(record.seq)
            return record

    def reset_offsets(
        self, partitions: Iterable[TopicPartition] | None = None, *, connector: str = ""
    ) -> CommitRecord:
        """Forget the committed offsets of ``partitions``; if ``None``, of every partition
        ``connector`` owns (every partition of the table without ``connector``)."""
        with self._lock:
            self._check_open()
            self._refresh()
            if partitions is not None:
                tps = list(partitions)
            else:
                tps = [
                    tp
                    for tp in self._ends
                    if not connector or self._claimed_by.get(tp) in (None, connector)
                ]
            return self.alter_offsets(dict.fromkeys(tps), connector=connector)

    def _check_owner(
        self, connector: str, tp: TopicPartition, takeover: Collection[str] = ()
    ) -> None:
        other = self._claimed_by.get(tp)
        if other is not None and other != connector and other not in takeover:
            raise PartitionsOwned(
                f"{connector} may not write {tp} to table {self.location}: connector {other!r} "
                f"owns it (epoch {self._epochs.get((other, tp), 0)}); two connectors must not "
                "write the same partitions of one table: give one its own path, or, if "
                f"{connector} replaces {other!r}, set takeover={other} on {connector}"
            )

    def _check_epoch(self, connector: str, epoch: int, tp: TopicPartition) -> None:
        last = self._epochs.get((connector, tp), 0)
        if epoch < last:
            raise ZombieEpoch(
                f"{connector} epoch {epoch} may not write {tp}: epoch {last} already has "
                "(this incarnation is a zombie; it must stop)"
            )

    def _publish(self, check: Callable[[], None], **fields: Any) -> CommitRecord:
        """Check against the latest state, then create the next record; on a lost race re-read
        and check again. Call with ``self._lock`` held."""
        while True:
            self._refresh()
            if self._jump_past_cleaned():
                continue
            check()
            record = CommitRecord(seq=self._seq + 1, **fields)
            try:
                self.fs.publish_exclusive(join(LOG, _name(record.seq)), record.to_json())
            except FileExistsError:
                continue  # another committer took this number: re-read, re-check
            self._account(record)
            if record.seq % self._interval == 0:
                self._due[record.seq] = Checkpoint(
                    record.seq, dict(self._ends), dict(self._epochs), dict(self._claimed_by)
                )
            return record

    def _jump_past_cleaned(self) -> bool:
        """Whether a checkpoint at or past the next number exists, and this instance moved to
        it. A clean-up (of any writer, with any retention) deletes only records a checkpoint
        covers, and that checkpoint is published before the deletion: so a number this
        instance found free after its last read may be a deleted record's, never to be used
        again, exactly when such a checkpoint is there. One small listing per publish."""
        for seq in reversed(checkpoint_seqs(self.fs)):
            if seq <= self._seq:
                return False
            checkpoint = read_checkpoint(self.fs, seq)
            if checkpoint is not None:
                self._reset(checkpoint)
                return True
        return False

    def _checkpoint(self, seq: int) -> None:
        """Publish the checkpoint due at ``seq`` (if any) once every record up to it is done.
        Losing the race to another committer's checkpoint is fine: it holds the same state,
        derived from the same records."""
        with self._lock:
            checkpoint = self._due.pop(seq, None)
            if checkpoint is None:
                return
            try:
                for record in [r for r in self._records if r.seq <= seq and r.seq in self._unsure]:
                    if self.fs.exists(join(DONE, _done(record.seq))):
                        self._unsure.discard(record.seq)
                    else:  # another committer's, not applied yet (or killed): roll it forward
                        self._apply(record)
                with contextlib.suppress(FileExistsError):  # another committer's: same state
                    self.fs.publish_exclusive(join(CHECKPOINT, _name(seq)), checkpoint.to_json())
            except (OSError, StorageCorrupt) as exc:
                # The record that made it due has landed: failing its commit now would make the
                # writer give up a commit that is in the table. The next one covers this state.
                log.warning(
                    "commit log %s: checkpoint at record %d not written (%s); the next one"
                    " covers its state",
                    self.location,
                    seq,
                    exc,
                )
                return
            self._trim(seq)

    def _apply(self, record: CommitRecord) -> None:
        """Move the record's files into place (idempotent), then mark it done."""
        fs = self.fs
        staging = join(STAGING, record.commit_id or "")
        synced: set[str] = set()
        for f in record.files:
            src, dst = join(staging, f.staged), f.final
            synced.update(fs.mkdirs(parent(dst)))
            try:
                fs.rename(src, dst)
            except FileNotFoundError:
                if not fs.is_file(dst):
                    raise StorageCorrupt(
                        f"commit {record.seq} ({record.commit_id}): data file {f.staged} is "
                        f"neither in staging nor at {f.final}; someone deleted it, restore it"
                    ) from None
            synced.add(parent(dst))
        fs.sync_dirs(synced)
        fs.create_marker(join(DONE, _done(record.seq)))
        with self._lock:
            self._unsure.discard(record.seq)
        if record.commit_id:
            fs.remove_tree(staging)

    def _check_open(self, *, write: bool = False) -> None:
        if not self._opened:
            raise RuntimeError("CommitLog.open() was not called")
        if write and self._read_only:
            raise RuntimeError("this CommitLog was opened read-only (open_read_only())")

    def close(self) -> None:
        """Release the staging guards this instance holds (their dirs become orphans)."""
        with self._lock:
            self._held.clear()
            self.fs.close()

    def __enter__(self) -> CommitLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _name(seq: int) -> str:
    return f"{seq:020d}.json"


def _done(seq: int) -> str:
    return f"{seq:020d}"


def _check_relative(name: str, *, hidden_ok: bool) -> None:
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ValueError(f"file name {name!r} must be a relative path inside the table")
    if not hidden_ok and any(p.startswith(("_", ".")) for p in parts):
        raise ValueError(f"file name {name!r}: readers ignore names starting with '_' or '.'")
