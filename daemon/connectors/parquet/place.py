"""Whether a ParquetSink's ``path`` can hold its table, checked before the connector is
created (REST ``POST``/``PUT``, ``/config/validate``, ``check-config``, daemon start):

- ``scheme_problem``: the filesystem must keep the commit log exactly-once (an atomic,
  exclusive create); others (``gs://``, ``wasb://``, ``s3://`` …) are refused by name.
- ``place_problems`` (local tables): the path is a directory or can be created as one, and the
  process can write there. Cheap ``stat``/``access`` calls only: validation may run on the
  event loop.
- ``owner_problems``: the table's commit log shows no other connector owning (having
  committed to or fenced) a partition of this connector's topics. Reads the log: may block;
  the runtime calls it in a thread under a deadline (``SinkConnector.check_existing``).
  Hadoop tables are not read here (their log is reachable only from an executor's JVM); the
  commit log refuses the second connector there at its first fence, naming the first.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from daemon.config.problems import Problem, error
from daemon.storage.commitlog import META, CommitLog
from daemon.storage.hadoopfs import ATOMIC_RENAME

#: Schemes a table may use (see docs/connectors.md, "Tables on Hadoop filesystems"): ``file``,
#: the atomic-rename filesystems, ``viewfs`` (resolved to one of those when the table opens)
#: and ``s3a`` (checked for conditional writes when the table opens).
SCHEMES = ("file", *ATOMIC_RENAME, "viewfs", "s3a")


def scheme_problem(uri: str) -> str | None:
    """Why ``uri``'s scheme cannot hold a table, or ``None``."""
    scheme = urllib.parse.urlsplit(uri.strip()).scheme.lower()
    if scheme in ("", *SCHEMES) or len(scheme) == 1:  # "C:" is no scheme
        return None
    hint = " (use s3a:// with conditional writes)" if scheme in ("s3", "s3n") else ""
    return (
        f"{uri.strip()!r}: {scheme}:// offers no atomic exclusive create, so the commit log "
        f"cannot keep each offset exactly once there{hint}; supported: "
        + ", ".join(f"{s}://" for s in SCHEMES)
        + " (docs/connectors.md)"
    )


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


def _covers(config: Mapping[str, str]) -> tuple[set[str], re.Pattern[str] | None]:
    topics = {t.strip() for t in config.get("topics", "").split(",") if t.strip()}
    regex = config.get("topics.regex", "").strip()
    try:
        return topics, re.compile(regex) if regex else None
    except re.error:
        return topics, None  # reported by the framework's own check


def owner_problems(path: Path, name: str, config: Mapping[str, str]) -> list[Problem]:
    """Another connector owns partitions of the topics ``config`` reads in the table at
    ``path`` (its commit log): an error naming it. Blocks on the log's files."""
    if not (path / META / "log").is_dir():
        return []
    topics, regex = _covers(config)
    log = CommitLog(path)
    log.open_read_only()
    takeover = {c.strip() for c in config.get("takeover", "").split(",") if c.strip()}
    owned: dict[str, set[str]] = {}
    for tp, other in log.owners().items():
        covered = tp.topic in topics or (regex is not None and regex.fullmatch(tp.topic))
        if covered and other != name and other not in takeover:
            owned.setdefault(other, set()).add(str(tp))
    return [
        error(
            "path",
            f"table {path} already holds {', '.join(sorted(tps)[:5])}"
            f"{' …' if len(tps) > 5 else ''} written by connector {other!r}; two connectors "
            "must not write the same partitions of one table",
            f"another path, or, if this connector replaces {other!r}, takeover={other}",
        )
        for other, tps in sorted(owned.items())
    ]
