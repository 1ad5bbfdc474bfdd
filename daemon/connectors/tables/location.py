"""Where a table is: a ``path`` setting as a local directory or a Hadoop filesystem URI
(ParquetSink's and DeltaSink's tables), and whether its scheme can keep a table exactly once.
Pure text: no filesystem access."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from daemon.connectors.tables.settings import topic_table
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


def table_path(uri: str) -> Path:
    """The local directory of a ``path`` setting: a plain absolute path or a ``file://`` URI.

    ``ValueError`` for other schemes (see ``table_location``) or a relative path.
    """
    parsed = urllib.parse.urlsplit(uri.strip())
    if parsed.scheme in ("", "file"):
        if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise ValueError(f"{uri!r} names host {parsed.netloc!r}; use file:///absolute/path")
        text = urllib.parse.unquote(parsed.path) if parsed.scheme else uri.strip()
        path = Path(text)
        if not path.is_absolute():
            raise ValueError(
                f"{uri!r} is relative; give an absolute path (the daemon's working"
                " directory is not a place for tables)"
            )
        return path
    raise ValueError(f"{uri!r} is not a local path")


def is_hadoop_uri(uri: str) -> bool:
    """``True`` for a URI with a scheme other than ``file`` (``hdfs://``, ``viewfs://`` …)."""
    scheme = urllib.parse.urlsplit(uri.strip()).scheme
    return scheme not in ("", "file") and len(scheme) > 1  # "C:" is no scheme


def table_location(uri: str) -> str:
    """A ``path`` setting as the commit log takes it: a local directory for a plain path or
    ``file:`` URI (the daemon's own filesystem calls), else the Hadoop URI as given (its
    commit log runs in the executors' JVMs; ``daemon.storage.hadoopfs`` says which
    filesystems are accepted there). ``ValueError`` if it is malformed."""
    if not is_hadoop_uri(uri):
        return str(table_path(uri))
    parsed = urllib.parse.urlsplit(uri.strip())
    if not parsed.path.startswith("/") or parsed.path.rstrip("/") == "":
        raise ValueError(
            f"{uri!r}: give the table's directory, e.g. {parsed.scheme}://authority/dir/table"
        )
    if parsed.query or parsed.fragment:
        raise ValueError(f"{uri!r}: a table URI has no query or fragment")
    return uri.strip().rstrip("/")


def check_path(value: Any) -> None:
    """A ``path`` setting's validator (``${topic}`` may stand in it; empty: not given)."""
    if not str(value):
        return
    text = topic_table(str(value), "topic")
    problem = scheme_problem(text)
    if problem is not None:
        raise ValueError(problem)
    table_location(text)
