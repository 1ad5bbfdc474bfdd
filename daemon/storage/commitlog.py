"""The exactly-once commit log of a file table (Parquet, ORC, JSON, CSV written by Spark).

Layout under the table directory ``<path>/`` (underscore-prefixed names are ignored by Spark,
pyarrow and Hive readers, so readers only ever see data files moved into place)::

    _connectd/staging/<commit-id>/...   a write's data files; the Spark write goes here only
    _connectd/locks/<commit-id>.lock    flock held by the live writer of that staging dir
    _connectd/log/<seq:020d>.json       commit records, created exclusively, never changed
    _connectd/done/<seq:020d>           the record is fully applied (its files are in place)
    part-<commit-id>-NNNNN.<ext>        data files in place (also under ``col=value/`` dirs)

A commit: (1) the data is written into ``stage_dir(commit_id)`` (by a killable executor);
(2) ``commit`` checks the offset ranges continue exactly where the last commit of each partition
ended and that the epoch is not older than the partition's last one, then publishes record
``seq = last + 1`` atomically and exclusively (written and fsynced under a temporary name, then
hard-linked: ``EEXIST`` means another committer won that number, so re-read and re-check);
the record is the commit point; (3) files are renamed into place and their directories fsynced;
(4) the ``done`` marker is written and the staging dir removed. ``open`` rolls every commit
without its ``done`` marker forward, and deletes staging dirs that no record names and no live
writer holds (killed writes). A kill at any instant therefore leaves readers seeing each Kafka
offset exactly once after ``open``.

Concurrency: one ``CommitLog`` is thread-safe; several instances and processes on one host may
commit to one table (different partitions, e.g. several tasks of a connector) — the exclusive
creation of the next record is the serialisation point.

Local filesystem only for now (atomic ``rename``/``link``, ``fsync``, ``flock``); all
filesystem access is in this module and ``atomic.py`` so a Hadoop filesystem backend (rename
without overwrite as the exclusive create, a lease instead of ``flock``) can be added later.
Every method blocks on disk I/O: call them off the event loop (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import CommitRejected, StorageCorrupt
from daemon.storage.atomic import create_marker, fsync_dir, publish_exclusive, remove_stale_temps

META = "_connectd"
FORMAT = 1
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SEQ = re.compile(r"^(\d{20})\.json$")
Kind = Literal["commit", "fence", "offsets"]


@dataclass(frozen=True, order=True)
class DataFile:
    """A data file of a commit: ``staged`` relative to its staging dir, ``final`` relative to the
    table directory."""

    staged: str
    final: str


@dataclass(frozen=True)
class CommitRecord:
    """One record of the log. ``kind``: ``commit`` (data + ranges), ``fence`` (an incarnation
    claims partitions: older epochs are refused from then on) or ``offsets`` (an operator set
    or reset partitions' next offsets; ``None`` forgets a partition)."""

    seq: int
    kind: Kind
    connector: str
    task: int | None = None
    epoch: int | None = None
    commit_id: str | None = None
    ranges: tuple[OffsetRange, ...] = ()
    files: tuple[DataFile, ...] = ()
    offsets: tuple[tuple[TopicPartition, int | None], ...] = ()
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_json(self) -> bytes:
        body = self._body()
        body["checksum"] = _checksum(body)
        return json.dumps(body, sort_keys=True, indent=1).encode()

    def _body(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "seq": self.seq,
            "kind": self.kind,
            "connector": self.connector,
            "task": self.task,
            "epoch": self.epoch,
            "commit_id": self.commit_id,
            "created_ms": self.created_ms,
            "ranges": [
                {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end}
                for r in self.ranges
            ],
            "files": [{"staged": f.staged, "final": f.final} for f in self.files],
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": o}
                for tp, o in self.offsets
            ],
        }

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> CommitRecord:
        """Parse and verify a record; ``StorageCorrupt`` naming ``source`` if it is damaged."""
        try:
            body = json.loads(data)
            checksum = body.pop("checksum")
            if checksum != _checksum(body):
                raise ValueError("checksum mismatch")
            if body["format"] != FORMAT:
                raise ValueError(f"format {body['format']} is not {FORMAT}")
            return cls(
                seq=body["seq"],
                kind=body["kind"],
                connector=body["connector"],
                task=body["task"],
                epoch=body["epoch"],
                commit_id=body["commit_id"],
                created_ms=body["created_ms"],
                ranges=tuple(OffsetRange(**r) for r in body["ranges"]),
                files=tuple(DataFile(**f) for f in body["files"]),
                offsets=tuple(
                    (TopicPartition(o["topic"], o["partition"]), o["offset"])
                    for o in body["offsets"]
                ),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StorageCorrupt(
                f"commit record {source} is damaged ({type(e).__name__}: {e}); the table's "
                "progress cannot be trusted: restore the file from a backup, or stop the "
                "connector and move the table's _connectd directory aside to start over"
            ) from e


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


class CommitLog:
    """The commit log of the table at ``path`` (created if missing). Call ``open()`` first."""

    def __init__(self, path: str | os.PathLike[str], *, stale_after: float = 600.0) -> None:
        self.path = Path(path)
        self.meta = self.path / META
        self._stale_after = stale_after
        self._lock = threading.RLock()
        self._seq = 0
        self._records: list[CommitRecord] = []
        self._ends: dict[TopicPartition, int] = {}
        self._epochs: dict[tuple[str, TopicPartition], int] = {}
        self._held: dict[str, int] = {}  # commit id -> fd of the staging lock we hold
        self._opened = False

    # ---- opening and recovery ----

    def open(self) -> CommitLog:
        """Read the log, roll incomplete commits forward, delete killed writes' staging dirs."""
        with self._lock:
            if not self.path.is_dir():
                self.path.mkdir(parents=True)
                fsync_dir(self.path.parent)
            for sub in ("log", "staging", "locks", "done"):
                _mkdirs(self.meta / sub, self.path)
            names = sorted(n for n in os.listdir(self.meta / "log") if _SEQ.match(n))
            expected = [_name(s) for s in range(1, len(names) + 1)]
            if names != expected:
                missing = sorted(set(expected) - set(names))[:3]
                raise StorageCorrupt(
                    f"commit log {self.meta / 'log'} has gaps (missing {missing}); records are "
                    "never deleted, so files were removed by hand: restore them"
                )
            self._refresh()
            self._opened = True
            self.recover()
        return self

    def recover(self) -> None:
        """Finish commits without ``done`` markers; remove orphaned staging dirs, stale
        temporary files and leftover locks. Safe to run at any time, concurrently too."""
        with self._lock:
            self._refresh()
            done = set(os.listdir(self.meta / "done"))
            pending = [r for r in self._records if _done(r.seq) not in done]
            finished = {r.commit_id for r in self._records if _done(r.seq) in done}
        for record in pending:
            self._apply(record)
        remove_stale_temps(self.meta / "log", self._stale_after)
        for entry in sorted(os.listdir(self.meta / "staging")):
            if entry in finished:
                shutil.rmtree(self.meta / "staging" / entry, ignore_errors=True)
            elif entry not in self._held:
                self._remove_if_orphan(entry)
        for entry in os.listdir(self.meta / "locks"):
            commit_id = entry.removesuffix(".lock")
            if commit_id not in self._held and not (self.meta / "staging" / commit_id).exists():
                # Left by a writer killed before it made its staging dir, or after its commit.
                fd = _try_lock(self.meta / "locks" / entry)
                if fd is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.meta / "locks" / entry)
                    os.close(fd)

    def _remove_if_orphan(self, commit_id: str) -> None:
        fd = _try_lock(self.meta / "locks" / f"{commit_id}.lock")
        if fd is None:
            return  # a live writer holds it
        try:
            # The writer publishes its record while holding the lock: re-read under the lock.
            if not self._finish_if_named(commit_id):
                shutil.rmtree(self.meta / "staging" / commit_id, ignore_errors=True)
                os.unlink(self.meta / "locks" / f"{commit_id}.lock")
        finally:
            os.close(fd)

    def _finish_if_named(self, commit_id: str) -> bool:
        """Roll forward the commit record naming ``commit_id`` if there is one; ``False`` if
        none does (its staged data was never committed)."""
        with self._lock:
            self._refresh()
            named = [r for r in self._records if r.commit_id == commit_id and r.kind == "commit"]
        for record in named:
            self._apply(record)
        return bool(named)

    def _refresh(self) -> None:
        """Read the records created since the last read (by anyone)."""
        while True:
            path = self.meta / "log" / _name(self._seq + 1)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return
            record = CommitRecord.from_json(data, source=str(path))
            if record.seq != self._seq + 1:
                raise StorageCorrupt(f"commit record {path} says seq {record.seq}")
            self._account(record)

    def _account(self, record: CommitRecord) -> None:
        self._records.append(record)
        self._seq = record.seq
        for r in record.ranges:
            self._ends[r.tp] = r.end
        if record.epoch is not None:
            claimed = [r.tp for r in record.ranges] + [tp for tp, _ in record.offsets]
            for tp in claimed:
                key = (record.connector, tp)
                self._epochs[key] = max(self._epochs.get(key, 0), record.epoch)
        if record.kind == "offsets":
            for tp, offset in record.offsets:
                if offset is None:
                    self._ends.pop(tp, None)
                else:
                    self._ends[tp] = offset

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

    def records(self) -> list[CommitRecord]:
        """Every record so far, in order (the audit trail)."""
        with self._lock:
            self._check_open()
            self._refresh()
            return list(self._records)

    # ---- staging ----

    @staticmethod
    def new_commit_id() -> str:
        """A fresh, unique commit id (sortable by creation time)."""
        return f"{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:16]}"

    def stage_dir(self, commit_id: str) -> Path:
        """Create and lock the staging dir for ``commit_id``; the write puts its files there.
        The lock (held until ``commit`` or ``abort``) keeps ``recover`` from deleting it."""
        if not _ID.match(commit_id):
            raise ValueError(f"commit id {commit_id!r}: use letters, digits, '.', '_', '-'")
        with self._lock:
            self._check_open()
            if commit_id in self._held:
                return self.meta / "staging" / commit_id
            fd = _lock(self.meta / "locks" / f"{commit_id}.lock")
            try:
                (self.meta / "staging" / commit_id).mkdir()
                fsync_dir(self.meta / "staging")
            except BaseException:
                os.close(fd)
                raise
            self._held[commit_id] = fd
        return self.meta / "staging" / commit_id

    def staged_files(self, commit_id: str) -> list[DataFile]:
        """The data files written into ``commit_id``'s staging dir, each with its final name
        ``<same subdirs>/part-<commit-id>-NNNNN<extensions>``. Names starting with ``_`` or
        ``.`` (``_SUCCESS``, ``_temporary/``, ``.crc`` files) are not data and are skipped."""
        root = self.meta / "staging" / commit_id
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
            rel = Path(dirpath).relative_to(root)
            found += [str(rel / n) for n in sorted(filenames) if not n.startswith(("_", "."))]
        files = []
        for i, staged in enumerate(sorted(found)):
            p = Path(staged)
            ext = p.name[p.name.index(".") :] if "." in p.name else ""
            files.append(DataFile(staged, str(p.parent / f"part-{commit_id}-{i:05d}{ext}")))
        return files

    def abort(self, commit_id: str) -> bool:
        """Give up a staged write (its executor must be gone): delete its files, drop the lock.

        If a record names ``commit_id`` after all (``commit`` raised after its record was
        created, e.g. an I/O error in a later step), the commit is finished instead and
        ``True`` returned: the record, not the exception, says what was committed.
        """
        with self._lock:
            self._check_open()
            finished = self._finish_if_named(commit_id)
            if not finished:
                shutil.rmtree(self.meta / "staging" / commit_id, ignore_errors=True)
            self._release(commit_id)
            return finished

    def _release(self, commit_id: str) -> None:
        fd = self._held.pop(commit_id, None)
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.meta / "locks" / f"{commit_id}.lock")
            os.close(fd)

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

        ``CommitRejected`` if a range does not start exactly where the partition's last commit
        ended (gap or overlap) or ``epoch`` is older than the last epoch of ``connector`` that
        committed to or fenced the partition (a zombie); the staged data is kept (``abort`` it).
        A partition never committed accepts any start. Ranges may be empty (progress without
        rows, e.g. when every record was bad); ``files`` may be empty.
        """
        ranges = tuple(sorted(ranges))
        if not ranges:
            raise ValueError("a commit needs at least one offset range")
        if len({r.tp for r in ranges}) != len(ranges):
            raise ValueError("a commit has at most one range per partition")
        with self._lock:
            self._check_open()
            staging = self.meta / "staging" / commit_id
            if commit_id not in self._held and (files or staging.exists()):
                raise ValueError(f"commit {commit_id} was not staged with stage_dir() here")
            if files is None:
                files = self.staged_files(commit_id) if commit_id in self._held else []
            for f in files:
                _check_relative(f.staged, hidden_ok=True)
                _check_relative(f.final, hidden_ok=False)
                if not (staging / f.staged).is_file():
                    raise ValueError(f"commit {commit_id}: staged file {f.staged} is missing")
                if (self.path / f.final).exists():
                    raise ValueError(f"commit {commit_id}: {f.final} exists in the table")

            def check() -> None:
                for r in ranges:
                    self._check_epoch(connector, epoch, r.tp)
                    end = self._ends.get(r.tp)
                    if end is not None and r.start != end:
                        what = "gap" if r.start > end else "overlap (duplicate)"
                        raise CommitRejected(
                            f"commit of {r.tp} offsets {r.start}..{r.end} refused: {what}, the "
                            f"last commit ended at {end}; seek to {end} and write from there"
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
        return record

    def fence(
        self, connector: str, task: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> CommitRecord | None:
        """Claim ``partitions`` for the incarnation with ``epoch``: from now on commits of older
        epochs are refused even before this one commits. ``CommitRejected`` if a newer epoch
        already claimed one. ``None`` (nothing written) if the claim is already in place."""
        tps = sorted(set(partitions))
        with self._lock:
            self._check_open()
            self._refresh()
            if all(self._epochs.get((connector, tp), 0) >= epoch for tp in tps):
                for tp in tps:
                    self._check_epoch(connector, epoch, tp)
                return None

            def check() -> None:
                for tp in tps:
                    self._check_epoch(connector, epoch, tp)

            offsets = tuple((tp, self._ends.get(tp)) for tp in tps)
            record = self._publish(
                check, kind="fence", connector=connector, task=task, epoch=epoch, offsets=offsets
            )
            self._apply(record)
            return record

    def alter_offsets(
        self, offsets: Mapping[TopicPartition, int | None], *, connector: str = ""
    ) -> CommitRecord:
        """An operator sets partitions' next offsets (``None``: forget the partition, so its
        next commit may start anywhere). Epochs are kept. Stop the writers first."""
        for tp, o in offsets.items():
            if o is not None and o < 0:
                raise ValueError(f"offset {o} for {tp} is negative")
        with self._lock:
            self._check_open()
            items = tuple(sorted(offsets.items()))
            record = self._publish(lambda: None, kind="offsets", connector=connector, offsets=items)
            self._apply(record)
            return record

    def reset_offsets(
        self, partitions: Iterable[TopicPartition] | None = None, *, connector: str = ""
    ) -> CommitRecord:
        """Forget the committed offsets of ``partitions`` (all if ``None``)."""
        with self._lock:
            self._check_open()
            self._refresh()
            tps = list(self._ends) if partitions is None else list(partitions)
            return self.alter_offsets(dict.fromkeys(tps), connector=connector)

    def _check_epoch(self, connector: str, epoch: int, tp: TopicPartition) -> None:
        last = self._epochs.get((connector, tp), 0)
        if epoch < last:
            raise CommitRejected(
                f"{connector} epoch {epoch} may not write {tp}: epoch {last} already has "
                "(this incarnation is a zombie; it must stop)"
            )

    def _publish(self, check: Callable[[], None], **fields: Any) -> CommitRecord:
        """Check against the latest state, then create the next record; on a lost race re-read
        and check again. Call with ``self._lock`` held."""
        while True:
            self._refresh()
            check()
            record = CommitRecord(seq=self._seq + 1, **fields)
            try:
                publish_exclusive(self.meta / "log" / _name(record.seq), record.to_json())
            except FileExistsError:
                continue  # another committer took this number: re-read, re-check
            self._account(record)
            return record

    def _apply(self, record: CommitRecord) -> None:
        """Move the record's files into place (idempotent), then mark it done."""
        staging = self.meta / "staging" / (record.commit_id or "")
        synced: set[Path] = set()
        for f in record.files:
            src, dst = staging / f.staged, self.path / f.final
            synced.update(_mkdirs(dst.parent, self.path))
            try:
                os.rename(src, dst)
            except FileNotFoundError:
                if not dst.is_file():
                    raise StorageCorrupt(
                        f"commit {record.seq} ({record.commit_id}): data file {f.staged} is "
                        f"neither in staging nor at {f.final}; someone deleted it, restore it"
                    ) from None
            synced.add(dst.parent)
        for directory in sorted(synced):
            fsync_dir(directory)
        create_marker(self.meta / "done" / _done(record.seq))
        if record.commit_id:
            shutil.rmtree(staging, ignore_errors=True)

    def _check_open(self) -> None:
        if not self._opened:
            raise RuntimeError("CommitLog.open() was not called")

    def close(self) -> None:
        """Release the staging locks this instance holds (their dirs become orphans)."""
        with self._lock:
            for commit_id in list(self._held):
                os.close(self._held.pop(commit_id))

    def __enter__(self) -> CommitLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _name(seq: int) -> str:
    return f"{seq:020d}.json"


def _done(seq: int) -> str:
    return f"{seq:020d}"


def _check_relative(name: str, *, hidden_ok: bool) -> None:
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        raise ValueError(f"file name {name!r} must be a relative path inside the table")
    if not hidden_ok and any(p.startswith(("_", ".")) for p in parts):
        raise ValueError(f"file name {name!r}: readers ignore names starting with '_' or '.'")


def _mkdirs(directory: Path, root: Path) -> set[Path]:
    """``mkdir -p`` that fsyncs the parent of each directory it creates; returns those parents."""
    if directory.is_dir():
        return set()
    parents = _mkdirs(directory.parent, root) if directory.parent != root else set()
    with contextlib.suppress(FileExistsError):
        directory.mkdir()
    fsync_dir(directory.parent)
    return parents | {directory.parent}


def _lock(path: Path) -> int:
    """Hold an exclusive ``flock`` on ``path`` (waits); the fd keeps it until closed."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(fd, path):
            return fd
        os.close(fd)  # a cleaner unlinked it between our open and flock: take the new one


def _try_lock(path: Path) -> int | None:
    """``_lock`` without waiting: ``None`` if someone holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if not _same_file(fd, path):
        os.close(fd)
        return None
    return fd


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
