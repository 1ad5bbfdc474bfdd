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

Checkpoints (``daemon.storage.logfile``): every ``checkpoint_interval`` records the state is
published; ``open`` reads the latest checkpoint and only the records after it, and a
``CommitLog`` keeps in memory only the records since then (``records()`` reads the audit trail
from disk). ``clean_up`` (in a thread, with a deadline) deletes what no opener needs once older
than ``retention_ms`` (``daemon.storage.cleanup``).

``CommitLog`` is the public face; it holds its parts, each with its own state: ``LogState``
(in memory), ``LogFile`` (the records on disk), ``Staging`` and ``Cleaner``.

Concurrency: one ``CommitLog`` is thread-safe; several instances and processes (and hosts, on a
shared filesystem) may commit to one table (different partitions, e.g. several tasks of a
connector) — the exclusive creation of the next record is the serialisation point.

Ownership and epochs (which connector may write a partition, which incarnation is a zombie):
``daemon.storage.logstate``.

The filesystem is a ``TableFs`` (``daemon.storage.fs``): ``LocalFs`` for plain paths and
``file:`` URIs (the default: ``CommitLog(path)``), ``HadoopFs`` for any Hadoop filesystem URI,
used inside an executor process, where the JVM is (``daemon.storage.hadoopfs``). Every method
blocks on I/O: call them off the event loop (``asyncio.to_thread``, or an executor job).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from daemon.storage.checkpoint import (
    CHECKPOINT,
    LOG,
    META,
    record_name,
)
from daemon.storage.cleanup import Cleaner, CleanUp, find_low
from daemon.storage.fs import LocalFs, TableFs, join
from daemon.storage.logfile import LogFile
from daemon.storage.logstate import LogState, OffsetsDiverged, PartitionsOwned, ZombieEpoch
from daemon.storage.records import FORMAT, CommitRecord, DataFile, Kind
from daemon.storage.staging import Staging, new_commit_id
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
        self._lock = threading.RLock()
        self._state = LogState(self.location)
        self._staging = Staging(self.fs)
        self._file = LogFile(self.fs, self._state, interval=checkpoint_interval)
        self._cleaner = Cleaner(self.fs, retention_ms=retention_ms, stale_after=stale_after)
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
            self._file.load_latest()
            self._file.check_no_gap()
            self._opened = True
            self.recover()
        return self

    def open_read_only(self) -> CommitLog:
        """Read the log without changing anything (no recovery, nothing created): for checks
        such as a connector's validation. Only the reading methods work afterwards."""
        with self._lock:
            self._file.load_latest()
            self._opened = self._read_only = True
        return self

    def recover(self) -> None:
        """Finish commits without ``done`` markers; remove orphaned staging dirs, stale
        temporary files and leftover guards. Safe to run at any time, concurrently too."""
        fs = self.fs
        with self._lock:
            self._file.refresh()
            pending = self._file.unfinished()
            # Records before the state's base are done by the checkpoint's invariant, so their
            # staging dirs (leftovers of a kill after the marker) go as orphans below.
            finished = {r.commit_id for r in self._state.records if r.seq not in self._state.unsure}
        for record in pending:
            self._apply(record)
        # Not the log's temporary files: listing the log costs as much as it retains
        # records (``clean_up`` sweeps them now and then).
        fs.remove_stale_temps(CHECKPOINT, self._stale_after)
        self._staging.remove_orphans({c for c in finished if c}, self._finish_if_named)

    def _finish_if_named(self, commit_id: str) -> bool:
        """Roll forward the commit record naming ``commit_id`` if there is one; ``False`` if
        none does (its staged data was never committed)."""
        with self._lock:
            self._file.refresh()
            named = [
                r for r in self._state.records if r.commit_id == commit_id and r.kind == "commit"
            ]
        for record in named:
            self._apply(record)
        return bool(named)

    # ---- reading the state ----

    @contextlib.contextmanager
    def _fresh(self) -> Iterator[LogState]:
        """The state with every record published so far read (by anyone), under the lock."""
        with self._lock:
            self._check_open()
            self._file.refresh()
            yield self._state

    def committed_offsets(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Next offset to consume per partition: the end of its last commit (or operator
        setting). Partitions never committed are absent. Includes others' commits (refreshes)."""
        with self._fresh() as state:
            return state.committed_offsets(partitions)

    def last_epoch(self, connector: str, tp: TopicPartition | None = None) -> int:
        """The last epoch of ``connector`` that committed to or fenced ``tp`` (any partition if
        ``tp`` is ``None``); 0 if none."""
        with self._fresh() as state:
            return state.last_epoch(connector, tp)

    def owners(self, topics: Iterable[str] | None = None) -> dict[TopicPartition, str]:
        """Per partition (of ``topics``; all if ``None``), the connector that owns it: the one
        whose commit or fence of it was the last. An earlier writer no longer owns it (it was
        renamed, or the owner took it over: ``fence(takeover=...)``)."""
        with self._fresh() as state:
            return state.owners(topics)

    def owned_by(self, connector: str) -> list[TopicPartition]:
        """The partitions ``connector`` owns (see ``owners``)."""
        return sorted(tp for tp, c in self.owners().items() if c == connector)

    def last_seq(self) -> int:
        """The seq of the last record (0: none yet)."""
        with self._fresh() as state:
            return state.seq

    def records_in_memory(self) -> int:
        """How many records this instance holds (bounded by about the checkpoint interval)."""
        with self._lock:
            return len(self._state.records)

    def records(self, since: int = 1) -> list[CommitRecord]:
        """The records from seq ``since`` on that are still on disk, in order (the audit
        trail; a clean-up deletes the oldest). Read from disk: see ``iter_records``."""
        return list(self.iter_records(since))

    def iter_records(self, since: int = 1) -> Iterator[CommitRecord]:
        """``records`` one at a time: the audit reads history without holding it in memory."""
        with self._lock:
            self._check_open()
            self._file.refresh()
            last = self._state.seq
        # By name from the oldest still on disk (no listing: the log may hold a week of them).
        for seq in range(find_low(self.fs, max(since, 1), last), last + 1):
            name = join(LOG, record_name(seq))
            data = self.fs.read(name)
            if data is not None:  # else deleted by a clean-up meanwhile
                yield CommitRecord.from_json(data, source=self.fs.uri(name))

    def newest_records(self) -> Iterator[CommitRecord]:
        """The records still on disk, newest first, read one at a time (stop when done): for
        what only the latest commits say, such as the columns of the table's newest files."""
        with self._lock:
            self._check_open()
            self._file.refresh()
            last = self._state.seq
        for seq in range(last, 0, -1):
            name = join(LOG, record_name(seq))
            data = self.fs.read(name)
            if data is None:  # cleaned up: a clean-up deletes the oldest first
                return
            yield CommitRecord.from_json(data, source=self.fs.uri(name))

    def clean_up(
        self, *, deadline: float | None = None, sweep_temps: bool | None = None
    ) -> CleanUp:
        """Delete records and ``done`` markers before the checkpoint before the latest and
        older than ``retention_ms``, and checkpoints before that one, by name from the
        low-water mark: no listing of the log (``daemon.storage.cleanup``). ``sweep_temps``:
        also delete killed publishers' temporary files older than ``stale_after`` from the
        log, which lists it (``None``: once every ``TEMP_SWEEP_EVERY`` of this instance).
        ``deadline``: a ``time.monotonic()`` value; it stops at the first step past it (the
        next run goes on). Blocks: run it in a thread, concurrently with commits if need be.
        A kill at any point leaves a log that opens."""
        self._check_open(write=True)
        return self._cleaner.run(deadline=deadline, sweep_temps=sweep_temps)

    # ---- staging ----

    @staticmethod
    def new_commit_id() -> str:
        """A fresh, unique commit id (sortable by creation time: it starts with the creation
        time in ms, which the Hadoop backend's staging lease reads)."""
        return new_commit_id()

    def stage(self, commit_id: str) -> str:
        """Create and guard the staging dir for ``commit_id``; where the write puts its files
        (a path or URI). The guard (held until ``commit`` or ``abort``) keeps ``recover`` from
        deleting it."""
        with self._lock:
            self._check_open(write=True)
            self._file.check_kept()  # a deleted table is not re-created by its staging dir
            return self._staging.stage(commit_id)

    def stage_dir(self, commit_id: str) -> Path:
        """``stage`` as a local ``Path`` (``LocalFs`` only)."""
        self.path  # noqa: B018 - raises TypeError for a non-local table
        return Path(self.stage(commit_id))

    def staged_files(self, commit_id: str) -> list[DataFile]:
        """The data files written into ``commit_id``'s staging dir, each with its final name
        ``<same subdirs>/part-<commit-id>-NNNNN<extensions>``. Names starting with ``_`` or
        ``.`` (``_SUCCESS``, ``_temporary/``, ``.crc`` files) are not data and are skipped."""
        return self._staging.staged_files(commit_id)

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
                self._staging.remove(commit_id)
            self._staging.release(commit_id)
            return finished

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
        with self._lock:
            self._check_open(write=True)
            checked = self._staging.files_to_commit(commit_id, files)
            record = self._file.publish(
                lambda: self._state.check_commit(connector, epoch, ranges),
                kind="commit",
                connector=connector,
                task=task,
                epoch=epoch,
                commit_id=commit_id,
                ranges=ranges,
                files=checked,
            )
        self._apply(record)
        with self._lock:
            self._staging.release(commit_id)
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
        state = self._state
        with self._lock:
            self._check_open(write=True)
            self._file.refresh()
            state.check_fence(connector, epoch, tps, takeover, owners_only=True)
            if state.claimed(connector, epoch, tps):
                state.check_fence(connector, epoch, tps, takeover)
                return None
            offsets = tuple((tp, state.ends.get(tp)) for tp in tps)
            record = self._file.publish(
                lambda: state.check_fence(connector, epoch, tps, takeover),
                kind="fence",
                connector=connector,
                task=task,
                epoch=epoch,
                offsets=offsets,
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

            record = self._file.publish(
                lambda: self._state.check_owners(connector, [tp for tp, _ in items]),
                kind="offsets",
                connector=connector,
                offsets=items,
            )
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
            record = self._file.publish(
                lambda: self._state.check_skip(connector, epoch, tp, start, end),
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
            self._file.refresh()
            if partitions is not None:
                tps = list(partitions)
            else:
                claimed_by = self._state.claimed_by
                tps = [
                    tp
                    for tp in self._state.ends
                    if not connector or claimed_by.get(tp) in (None, connector)
                ]
            return self.alter_offsets(dict.fromkeys(tps), connector=connector)

    def _checkpoint(self, seq: int) -> None:
        with self._lock:
            self._file.checkpoint(seq, self._apply)

    def _apply(self, record: CommitRecord) -> None:
        """Move the record's files into place (idempotent), then mark it done."""
        self._staging.move_into_place(record)
        with self._lock:
            self._state.done([record.seq])
        if record.commit_id:
            self._staging.remove(record.commit_id)

    def _check_open(self, *, write: bool = False) -> None:
        if not self._opened:
            raise RuntimeError("CommitLog.open() was not called")
        if write and self._read_only:
            raise RuntimeError("this CommitLog was opened read-only (open_read_only())")

    def close(self) -> None:
        """Release the staging guards this instance holds (their dirs become orphans)."""
        with self._lock:
            self._staging.close()
            self.fs.close()

    def __enter__(self) -> CommitLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
