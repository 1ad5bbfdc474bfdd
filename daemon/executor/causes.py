"""The root cause of a failed write, in one line, for the task's error line and the log.

A failed Spark write reaches Python as ``Py4JJavaError: An error occurred while calling
o574.save.`` with the reason 100 lines down a Java trace (``Caused by: java.io.IOException: No
space left on device``). ``root_cause`` digs it out: the disk-full and read-only cases by name
and with the path the write went to (``No space left on device on /data/table/...``), any other
Java failure as its deepest ``Caused by:``, a Python ``OSError`` as its errno text and file.
``leaves_state`` says whether the failure may have left something behind in the executor's
session (open files of a failed Spark job), so the pool should replace the executor.

Runs in the executor process: standard library only, and never raises.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re

_NO_SPACE = "No space left on device"
_READ_ONLY = "Read-only file system"
_QUOTA = "Disk quota exceeded"
#: Errno → the words used for it (Java prints the C library's text, as Python does).
_BY_ERRNO = {errno.ENOSPC: _NO_SPACE, errno.EROFS: _READ_ONLY, errno.EDQUOT: _QUOTA}

# ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] ..." (Py4J's top line) and
# "Caused by: java.io.IOException: No space left on device" (at any indentation).
_JAVA_LINE = re.compile(
    r"^\s*(?:Caused by: |: )(?P<cls>[a-zA-Z_$][\w$]*(?:\.[\w$]+)+): ?(?P<msg>.*)$", re.M
)
_WRITING_TO = re.compile(r"writing rows to (?P<path>\S+?)\.?(?:\s|$)")
_URI = re.compile(r"(?:file:|[a-z][a-z0-9+.-]*://)[^\s,;()'\"]+")


def root_cause(exc: BaseException, path: str | None = None) -> str | None:
    """One line naming what went wrong, when ``str(exc)`` does not lead with it; else None.

    ``path``: where the write was going (its staging directory), named when the error text
    names no path of its own.
    """
    try:
        return _root_cause(exc, path)
    except Exception:  # a best effort: the full message still travels
        return None


def leaves_state(exc: BaseException) -> bool:
    """Whether the failure may have left state in the executor's session: an I/O error, or a
    Java exception thrown while a Spark job ran (its tasks' open files stay open in the JVM,
    deleted or not). Python errors and Spark's analysis errors (raised before any job) do not."""
    if _is_analysis(exc):
        return False  # PySpark raises it "from None" over the Py4JJavaError it converts
    for link in _chain(exc):
        if isinstance(link, OSError):
            return True
        module = type(link).__module__ or ""
        if module.startswith("py4j"):
            return True
        if module.startswith("pyspark") and not _is_analysis(link):
            return True
    return False


def _is_analysis(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"AnalysisException", "ParseException", "PySparkTypeError"})


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in seen and len(seen) < 20:
        seen.append(link)
        if link.__cause__ is not None:
            link = link.__cause__
        else:
            link = None if link.__suppress_context__ else link.__context__
    return seen


def _root_cause(exc: BaseException, path: str | None) -> str | None:
    chain = _chain(exc)
    text = "\n".join(str(link) for link in chain)
    where = _path_in(text) or path
    for link in chain:
        if isinstance(link, OSError) and link.errno in _BY_ERRNO:
            return _on(_BY_ERRNO[link.errno], _filename(link) or where)
    for words in (_NO_SPACE, _READ_ONLY, _QUOTA):
        if words in text:
            return _on(words, where)
    causes = list(_JAVA_LINE.finditer(text))
    if causes:
        if where is not None and _read_only(where):
            # Hadoop says "Mkdirs failed to create ..." for a read-only mount: name the mount.
            return _on(_READ_ONLY, where)
        deepest = causes[-1]
        message = deepest["msg"].strip() or deepest["cls"]
        return f"{_strip_file_scheme(message)} ({deepest['cls']})"
    for link in chain:
        if isinstance(link, OSError) and link.strerror:
            return _on(link.strerror, _filename(link) or where)
    return None


def _on(words: str, where: str | None) -> str:
    return f"{words} on {where}" if where else words


def _filename(exc: OSError) -> str | None:
    return None if exc.filename is None else os.fsdecode(exc.filename)


def _path_in(text: str) -> str | None:
    """The path a Java failure names: Spark's "writing rows to <uri>", else the first URI."""
    found = _WRITING_TO.search(text) or _URI.search(text)
    if found is None:
        return None
    uri = found["path"] if "path" in found.groupdict() else found[0]
    # Hadoop's committer works under <dir>/_temporary/...: the directory written to is <dir>.
    uri = uri.split("/_temporary", 1)[0]
    return _strip_file_scheme(uri.rstrip("."))


def _strip_file_scheme(text: str) -> str:
    """``file:/a/b`` → ``/a/b`` (a local path as people type it); other schemes stay."""
    return re.sub(r"file:(?=/)", "", text)


def _read_only(path: str) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing parent) is mounted
    read-only. Local paths only."""
    if "://" in path:
        return False
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent
    with contextlib.suppress(OSError):
        return bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    return False
