"""Whether a ParquetSink's ``path`` can hold its table, checked before the connector is
created (REST ``POST``/``PUT``, ``/config/validate``, ``check-config``, daemon start):

- ``scheme_problem`` (``tables.location``): the filesystem must keep the commit log
  exactly-once (an atomic, exclusive create); others (``gs://``, ``wasb://`` …) are refused.
- ``place_problems`` (local tables): the path is a directory or can be created as one, and the
  process can write there. Cheap ``stat``/``access`` calls only: validation may run on the
  event loop.
- ``table_owners``: which connector owns (committed to or fenced last) each partition in the
  table's commit log, for ``check_existing`` (``tables.owners`` words the refusal). Reads
  the log: may block; the runtime calls it in a thread under a deadline
  (``SinkConnector.check_existing``). Hadoop tables are not read here (their log is
  reachable only from an executor's JVM); the commit log refuses the second connector there
  at its first fence, naming the first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from daemon.config.problems import Problem, error
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.owners import owner_problems as _owner_problems
from daemon.storage.commitlog import META, CommitLog


def place_problems(path: Path) -> list[Problem]:
    """Problems with the local directory ``path`` for a table (``[]`` if none)."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # missing, or below a regular file
        st = None
    except OSError as e:
        return [error("path", f"{path} cannot be examined: {e.strerror or e}")]
    if st is not None:
        if not path.is_dir():
            return [
                error(
                    "path",
                    f"{path} exists and is not a directory",
                    "a directory for the table (it is created if missing)",
                )
            ]
        return _writable("path", path, f"the table directory {path}")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return [error("path", f"{path} cannot be created: {ancestor} is not a directory")]
    return _writable("path", ancestor, f"{path} cannot be created: its parent {ancestor}")


def _writable(key: str, directory: Path, what: str) -> list[Problem]:
    try:
        read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        return [error(key, f"{what} is on a read-only filesystem", "a writable directory")]
    if not os.access(directory, os.W_OK | os.X_OK):
        return [
            error(
                key,
                f"{what} is not writable by this process (uid {os.geteuid()})",
                "a directory the daemon's user can write",
            )
        ]
    return []


def table_owners(path: Path) -> dict[TopicPartition, str]:
    """Per partition, the connector that owns it in the table at ``path`` (its commit log;
    ``{}`` if there is none). Blocks on the log's files."""
    if not (path / META / "log").is_dir():
        return {}
    log = CommitLog(path)
    log.open_read_only()
    return log.owners()


def owner_problems(path: Path, name: str, config: Mapping[str, str]) -> list[Problem]:
    """Another connector owns partitions of the topics ``config`` reads in the table at
    ``path`` (its commit log): an error naming it. Blocks on the log's files."""
    return _owner_problems("path", str(path), table_owners(path), name, config)
