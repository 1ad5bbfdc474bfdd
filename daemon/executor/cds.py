"""JDK class-data sharing (AppCDS) for executor JVMs: a fresh executor starts in about half
the time when Spark's classes come from an archive.

Measured here (JDK 17, pyspark 4.1, 2 cores): 13-19 s to a first write without an archive,
6.5-9.6 s with one. On JDK 19+ the JVM maintains the archive itself
(``-XX:+AutoCreateSharedArchive``). JDK 17 lacks that: the archive is dumped once, at the
clean exit of a dedicated builder executor started with ``-XX:ArchiveClassesAtExit`` (it takes
about 30 s of CPU, at low priority, in the background), and later executors start with
``-XX:SharedArchiveFile``. The archive name carries a hash of the JDK, the Spark jars (names,
sizes and modification times: the JVM checks each class-path jar's size and time against the
archive's) and the flags that matter, so an upgrade or a reinstall builds a new one. Nothing
here may fail a start: without an archive, or with one the JVM rejects (``-Xshare:auto`` falls
back silently), executors start the slow way. Each executor tells whether its JVM mapped the
archive (``mapped``); the pool replaces an archive the JVM rejected (``archive.ArchiveKeeper``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.executor.handoff import pid_alive

if TYPE_CHECKING:
    from daemon.executor.handle import ExecutorProcess

log = logging.getLogger("connectd.executor")

# Options that must be the same when the archive is dumped and when it is used.
_SHAPING = (
    "spark.driver.memory",
    "spark.driver.extraClassPath",
    "spark.jars",
    "spark.jars.packages",
)
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: Archives no pool has used for this long are removed (each upgrade leaves one of ~150 MB).
UNUSED_DAYS = 30


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/connectd`` or ``~/.cache/connectd``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "connectd"


@dataclass(frozen=True)
class JavaRuntime:
    home: Path
    version: str
    major: int


def find_java() -> JavaRuntime | None:
    """The JDK Spark will run on (``JAVA_HOME``, else ``java`` on PATH), or None."""
    home_env = os.environ.get("JAVA_HOME")
    if home_env:
        home = Path(home_env).resolve()
    else:
        java = shutil.which("java")
        if java is None:
            return None
        home = Path(java).resolve().parent.parent
    try:
        release = (home / "release").read_text()
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="([^"]+)"', release, re.MULTILINE)
    if not found:
        return None
    version = found.group(1)
    head = version.split(".")[0]
    major = int(version.split(".")[1]) if head == "1" else int(head)
    return JavaRuntime(home=home, version=version, major=major)


def _spark_fingerprint() -> str:
    import pyspark

    return jars_fingerprint(pyspark.__version__, Path(pyspark.__file__).parent / "jars")


def jars_fingerprint(version: str, jars: Path) -> str:
    """A hash of Spark's version and class-path jars as the JVM checks them against an
    archive: each jar's name, size and modification time (a reinstall changes the times)."""
    h = hashlib.sha256(f"{version}|{jars}".encode())
    with contextlib.suppress(OSError):
        for jar in sorted(jars.iterdir()):
            st = jar.stat()
            h.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class CdsPlan:
    """Where the archive for this JDK + Spark + settings lives, and how a JVM uses it."""

    java: JavaRuntime
    archive: Path

    @property
    def auto(self) -> bool:
        """JDK 19+: every executor maintains the archive itself; no builder needed."""
        return self.java.major >= 19

    def ready(self) -> bool:
        return self.archive.is_file() and self.archive.stat().st_size > 0

    def executor_options(self) -> str:
        """Java options for a serving executor ('' when there is nothing to use yet)."""
        if self.auto:
            return f"-XX:+AutoCreateSharedArchive -XX:SharedArchiveFile={self.archive} {_QUIET}"
        if self.ready():
            return f"-XX:SharedArchiveFile={self.archive} {_QUIET}"
        return ""

    def builder_output(self) -> Path:
        return self.archive.with_name(f".{self.archive.name}.{os.getpid()}.tmp")

    def builder_options(self, output: Path) -> str:
        return f"-XX:ArchiveClassesAtExit={output} {_QUIET}"

    @contextlib.contextmanager
    def build_lock(self) -> Iterator[bool]:
        """Yields True if this process may build now (no other process is building)."""
        self.archive.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.archive.with_suffix(".lock"), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def discard(self) -> None:
        """Remove an archive the JVM rejected (executors already running keep their mapping)."""
        _unlink(self.archive)

    def tidy(self) -> None:
        """Blocking: mark this archive used now, and remove what is left in its directory by
        builders that died mid-dump and archives unused for ``UNUSED_DAYS`` (with their locks).
        """
        directory = self.archive.parent
        if self.ready():
            with contextlib.suppress(OSError):
                os.utime(self.archive)
        cutoff = time.time() - UNUSED_DAYS * 86400
        try:
            entries = list(directory.iterdir())
        except OSError:
            return
        for entry in entries:
            name = entry.name
            if name.startswith(".spark-jdk") and name.endswith(".tmp"):
                owner = name.rsplit(".", 2)[-2]
                if owner.isdigit() and not pid_alive(int(owner)):
                    _unlink(entry)
            elif name.startswith("spark-jdk") and name.endswith(".jsa") and entry != self.archive:
                with contextlib.suppress(OSError):
                    if entry.stat().st_mtime < cutoff:
                        _unlink(entry)
                        _unlink(entry.with_suffix(".lock"))

    def install(self, output: Path) -> bool:
        """Move a finished builder output into place; False (and nothing moved) if unusable."""
        try:
            if output.stat().st_size == 0:
                output.unlink()
                return False
            os.replace(output, self.archive)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                output.unlink()
            return False


class Rejections:
    """What a pool does when an executor's JVM was given the archive and started without it
    (the jars or the JDK changed under the same name, a corrupt file): it replaces the archive
    once; when the replacement is rejected too, executors start without one from then on."""

    REPLACE = "replace"
    GIVE_UP = "give up"
    NOTHING = "nothing"

    def __init__(self) -> None:
        #: A replacement was asked for (``pending`` until it is installed).
        self.replacing = False
        #: When the replacement was installed (monotonic); None: not (yet).
        self.replaced_at: float | None = None

    def rejected(self, spawned_at: float, can_build: bool) -> str:
        """The action for a rejection by an executor spawned at ``spawned_at`` (monotonic)."""
        if not can_build:
            return self.GIVE_UP
        if self.replaced_at is not None:
            # One spawned before the replacement was given the old archive: nothing new.
            return self.GIVE_UP if spawned_at > self.replaced_at else self.NOTHING
        if self.replacing:
            return self.NOTHING
        self.replacing = True
        return self.REPLACE

    @property
    def pending(self) -> bool:
        """A replacement was asked for and is not installed yet."""
        return self.replacing and self.replaced_at is None

    def built(self, at: float) -> None:
        if self.pending:
            self.replaced_at = at


def plan(cache_dir: Path | None, conf: Mapping[str, str]) -> CdsPlan | None:
    """The archive plan for these settings, or None when no JDK can be identified."""
    java = find_java()
    if java is None:
        return None
    h = hashlib.sha256(f"{java.home}|{java.version}|{_spark_fingerprint()}".encode())
    for key in _SHAPING:
        h.update(f"|{key}={conf.get(key, '')}".encode())
    directory = cache_dir if cache_dir is not None else default_cache_dir()
    return CdsPlan(java=java, archive=directory / f"spark-jdk{java.major}-{h.hexdigest()[:16]}.jsa")


async def build(
    plan: CdsPlan,
    start_builder: Callable[[Path, asyncio.Event], ExecutorProcess],
    *,
    threads: ThreadPoolExecutor,
    timeout: float,
    kill_timeout: float,
) -> bool:
    """Build the archive with a builder executor (JDK < 19) unless it exists or another
    process is building it. ``start_builder(output, exited)`` spawns an executor that dumps the
    archive to ``output`` at its clean exit and sets ``exited``. True if an archive is ready."""
    loop = asyncio.get_running_loop()
    if await loop.run_in_executor(threads, plan.ready):
        return True
    with plan.build_lock() as mine:
        if not mine:
            return False
        output = plan.builder_output()
        exited = asyncio.Event()
        try:
            builder = start_builder(output, exited)
        except OSError as exc:
            log.warning("cannot build the class-data-sharing archive: %s", exc)
            return False
        try:
            async with asyncio.timeout(timeout):
                await exited.wait()
        except TimeoutError:
            log.warning("class-data-sharing archive not built within %g s", timeout)
        finally:
            await asyncio.shield(builder.terminate(threads, kill_timeout))
        if builder.exit_status == 0 and await loop.run_in_executor(threads, plan.install, output):
            log.info("class-data-sharing archive ready: %s", plan.archive)
            return True
        await loop.run_in_executor(threads, _unlink, output)
        return False


def mapped(java_pid: int, archive: str) -> bool | None:
    """Whether the JVM ``java_pid`` has ``archive`` mapped (None when that cannot be read). A
    file replaced since the JVM mapped it shows as ``<path> (deleted)``: mapped all the same."""
    names = (archive, f"{archive} (deleted)")
    try:
        with open(f"/proc/{java_pid}/maps") as maps:
            return any(line.rstrip("\n").endswith(names) for line in maps)
    except OSError:
        return None


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
