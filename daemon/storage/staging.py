"""The staging dirs of a table's commit log: where a write puts its files before its commit,
who may still commit them, and which are orphans of killed writes.

``Staging`` holds the table's ``TableFs`` and the commit ids whose staging dir this process
writes (each guarded: ``TableFs.hold``). ``CommitLog`` holds one and asks it to create, list,
check and delete staging dirs; whether a staging dir's data was committed is the log's
question, asked back through ``finish_if_named``; moving a committed record's files into
place is this module's (``move_into_place``), marking it done in memory the log's.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from pathlib import PurePosixPath

from daemon.errors import StorageCorrupt
from daemon.storage.checkpoint import DONE, done_name
from daemon.storage.fs import TableFs, join, parent
from daemon.storage.records import CommitRecord, DataFile

META = "_connectd"
STAGING = f"{META}/staging"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def new_commit_id() -> str:
    """A fresh, unique commit id (sortable by creation time: it starts with the creation time
    in ms, which the Hadoop backend's staging lease reads)."""
    return f"{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:16]}"


class Staging:
    """The staging dirs of the table on ``fs`` (see the module docs). Not thread-safe: the
    owning ``CommitLog`` calls it under its lock, except ``remove_orphans``."""

    def __init__(self, fs: TableFs) -> None:
        self.fs = fs
        #: Commit ids whose staging dir this instance writes (guarded until commit or abort).
        self.held: set[str] = set()

    def stage(self, commit_id: str) -> str:
        """Create and guard the staging dir for ``commit_id``; where the write puts its files."""
        if not _ID.match(commit_id):
            raise ValueError(f"commit id {commit_id!r}: use letters, digits, '.', '_', '-'")
        name = join(STAGING, commit_id)
        if commit_id not in self.held:
            self.fs.hold(commit_id)
            try:
                self.fs.mkdirs(name)
                self.fs.sync_dirs([STAGING])
            except BaseException:
                self.fs.release(commit_id)
                raise
            self.held.add(commit_id)
        return self.fs.uri(name)

    def staged_files(self, commit_id: str) -> list[DataFile]:
        """The data files in ``commit_id``'s staging dir, each with its final name
        ``<same subdirs>/part-<commit-id>-NNNNN<extensions>``; hidden names are skipped."""
        files = []
        for i, staged in enumerate(self.fs.walk_files(join(STAGING, commit_id))):
            p = PurePosixPath(staged)
            ext = p.name[p.name.index(".") :] if "." in p.name else ""
            files.append(DataFile(staged, str(p.parent / f"part-{commit_id}-{i:05d}{ext}")))
        return files

    def files_to_commit(
        self, commit_id: str, files: Sequence[DataFile] | None
    ) -> tuple[DataFile, ...]:
        """``files`` (default: ``staged_files``) after checking they can be committed:
        staged here, present in staging, not yet in the table. ``ValueError`` if not."""
        staging = join(STAGING, commit_id)
        fs = self.fs
        if commit_id not in self.held and (files or fs.exists(staging)):
            raise ValueError(f"commit {commit_id} was not staged with stage() here")
        if files is None:
            files = self.staged_files(commit_id) if commit_id in self.held else []
        for f in files:
            _check_relative(f.staged, hidden_ok=True)
            _check_relative(f.final, hidden_ok=False)
            if not fs.is_file(join(staging, f.staged)):
                raise ValueError(f"commit {commit_id}: staged file {f.staged} is missing")
            if fs.exists(f.final):
                raise ValueError(f"commit {commit_id}: {f.final} exists in the table")
        return tuple(files)

    def move_into_place(self, record: CommitRecord) -> None:
        """Rename the record's files from its staging dir to their final names (idempotent:
        a file already moved is fine), sync their directories, write the ``done`` marker."""
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
        fs.create_marker(join(DONE, done_name(record.seq)))

    def remove(self, commit_id: str) -> None:
        self.fs.remove_tree(join(STAGING, commit_id))

    def release(self, commit_id: str) -> None:
        if commit_id in self.held:
            self.held.discard(commit_id)
            self.fs.release(commit_id)

    def remove_orphans(
        self, finished: Collection[str], finish_if_named: Callable[[str], bool]
    ) -> None:
        """Delete the staging dirs of ``finished`` commits (leftovers of a kill after the
        ``done`` marker) and of killed writes that no record names and no live writer can
        still commit; then the guards of writes whose staging dir is gone."""
        fs = self.fs
        for entry in sorted(fs.listdir(STAGING)):
            if entry in finished:
                self.remove(entry)
            elif entry not in self.held:
                with fs.orphan(entry) as orphan:
                    # The writer publishes its record while it holds the guard: re-read
                    # the log under it.
                    if orphan and not finish_if_named(entry):
                        self.remove(entry)
        fs.sweep_guards(set(fs.listdir(STAGING)), set(self.held))

    def close(self) -> None:
        self.held.clear()


def _check_relative(name: str, *, hidden_ok: bool) -> None:
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ValueError(f"file name {name!r} must be a relative path inside the table")
    if not hidden_ok and any(p.startswith(("_", ".")) for p in parts):
        raise ValueError(f"file name {name!r}: readers ignore names starting with '_' or '.'")
