"""Table formats an executor's SparkSession can load: their jars and session settings, and the
recycling of executors whose session lacks a format the pool loads (``SessionFormats``).

A format (Delta Lake, Iceberg) needs its jars on ``spark.jars`` and its SQL extensions set when
the session starts: neither can be added to a running session. The pool loads a format into its
executors' sessions when a write first asks for it (``ExecutorPool.submit(formats=...)``), or
from the start (``executor.spark.formats``); executors started before that are replaced. The
jars come from Maven Central into a local directory (``connectd fetch-jars``, ``make jars``);
nothing is downloaded while the daemon runs.

The jars follow the installed pyspark's Spark line (``daemon.sparklines``): a build of each
format for that line; docs/research/table-formats.md has how the 4.1 builds were chosen.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from daemon.errors import ConfigError, ConnectdError
from daemon.executor.cds import default_cache_dir
from daemon.executor.info import ExecutorState
from daemon.sparklines import Artifact, SparkLine, current

if TYPE_CHECKING:
    import asyncio

    from daemon.executor.handle import ExecutorProcess
    from daemon.executor.process import KillReport

log = logging.getLogger("connectd.executor")

#: Settings whose values are comma-separated lists: a format's entries join the operator's.
LIST_KEYS = ("spark.jars", "spark.sql.extensions")


@dataclass(frozen=True)
class TableFormat:
    name: str
    #: Exactly the jars the session needs; transitive dependencies are left out on purpose
    #: (most duplicate, in older versions, jars pyspark ships).
    artifacts: tuple[Artifact, ...]
    conf: Mapping[str, str]


_ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

#: The formats, by name; ``table_format`` gives one with the jars of a Spark line.
NAMES = ("delta", "iceberg")

#: Each format's session settings (the same on every supported line).
_CONF: Mapping[str, Mapping[str, str]] = {
    "delta": {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        # Both this and the extension are needed: DeltaLog.forTable (read through py4j)
        # refuses to run without them.
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # The default (50) makes each small commit run 100 tasks of state reconstruction:
        # measured 10-30 s -> 2.5-4 s per small commit with local[1].
        "spark.databricks.delta.snapshotPartitions": "1",
    },
    "iceberg": {"spark.sql.extensions": _ICEBERG_EXTENSIONS},
}


def table_format(name: str, line: SparkLine | None = None) -> TableFormat:
    """Format ``name`` (checked) with the jars of ``line``, by default the installed one's."""
    check_names([name])
    line = line if line is not None else current()
    jars = line.delta if name == "delta" else line.iceberg
    return TableFormat(name, jars, _CONF[name])


class JarsMissing(ConfigError):
    """A table format's jars are not in the jars directory. Not retriable: the same write fails
    the same way until an operator fetches them (the message says how)."""

    retriable = False


def default_jars_dir() -> Path:
    """``$XDG_CACHE_HOME/connectd/jars`` or ``~/.cache/connectd/jars``."""
    return default_cache_dir() / "jars"


def known() -> str:
    return ", ".join(NAMES)


def check_names(names: Iterable[str]) -> frozenset[str]:
    """``names`` as a set; ``ConfigError`` naming the known formats for an unknown one."""
    chosen = frozenset(names)
    unknown = sorted(chosen - set(NAMES))
    if unknown:
        raise ConfigError(
            f"unknown table format {', '.join(map(repr, unknown))}; known formats: {known()}"
        )
    return chosen


def artifacts(names: Iterable[str], line: SparkLine | None = None) -> list[Artifact]:
    """The artifacts of ``names`` (checked) for ``line`` (the installed one's by default), in a
    stable order."""
    line = line if line is not None else current()
    return [a for name in sorted(check_names(names)) for a in table_format(name, line).artifacts]


def jar_paths(
    names: Iterable[str], jars_dir: Path | None = None, line: SparkLine | None = None
) -> list[Path]:
    """Where the jars of ``names`` are expected (``jars_dir``, default ``default_jars_dir()``)."""
    directory = jars_dir if jars_dir is not None else default_jars_dir()
    return [directory / a.file_name for a in artifacts(names, line)]


def jar_problem(path: Path) -> str | None:
    """Why ``path`` cannot serve as a jar: ``"missing"``, or ``"incomplete"`` when it is not a
    whole zip file (an interrupted copy lacks the zip's closing directory); None when fine.
    Blocking: a ``stat`` and a read of the file's last bytes."""
    if not path.is_file():
        return "missing"
    try:
        whole = zipfile.is_zipfile(path)
    except OSError:
        whole = False
    return None if whole else "incomplete"


def missing_jars(names: Iterable[str], jars_dir: Path | None = None) -> list[Path]:
    """The jars of ``names`` that ``jars_dir`` lacks or holds incomplete (``jar_problem``)."""
    return list(_jar_problems(names, jars_dir))


def _jar_problems(names: Iterable[str], jars_dir: Path | None) -> dict[Path, str]:
    problems = {p: jar_problem(p) for p in jar_paths(names, jars_dir)}
    return {p: why for p, why in problems.items() if why is not None}


def require_jars(names: Collection[str], jars_dir: Path | None = None) -> None:
    """``JarsMissing`` naming the missing files, the directory and the fix, if any is missing."""
    missing = _jar_problems(names, jars_dir)
    if not missing:
        return
    directory = jars_dir if jars_dir is not None else default_jars_dir()
    gone = {p.name for p in missing}
    wanted = sorted(n for n in names if any(a.file_name in gone for a in table_format(n).artifacts))
    fix = f"connectd fetch-jars {' '.join(wanted)}"
    if jars_dir is not None:
        fix += f" --dir {directory}"
    listed = ", ".join(
        p.name if why == "missing" else f"{p.name} (incomplete: an interrupted copy?)"
        for p, why in missing.items()
    )
    raise JarsMissing(
        f"the jars of table format {', '.join(wanted)} are missing from {directory}: {listed};"
        f" fetch them with `{fix}` (`make jars` in a source checkout), then restart"
    )


def session_conf(
    base: Mapping[str, str], names: Iterable[str], jars_dir: Path | None = None
) -> dict[str, str]:
    """``base`` (the operator's session settings) with the formats ``names`` loaded.

    ``spark.jars`` and ``spark.sql.extensions`` are comma-joined, the operator's entries first
    (both formats at once give two extensions); for any other key the operator's value wins."""
    chosen = sorted(check_names(names))
    conf = dict(base)
    if not chosen:
        return conf
    lists: dict[str, list[str]] = {
        key: [v.strip() for v in base.get(key, "").split(",") if v.strip()] for key in LIST_KEYS
    }
    lists["spark.jars"] += [str(p) for p in jar_paths(chosen, jars_dir)]
    for name in chosen:
        for key, value in _CONF[name].items():
            if key in lists:
                lists[key].append(value)
            else:
                conf.setdefault(key, value)
    for key, values in lists.items():
        if values:
            conf[key] = ",".join(dict.fromkeys(values))
    return conf


# -- loading into a running pool (``ExecutorPool.submit(formats=...)``) ----------------------


class FormatsOwner(Protocol):
    """What ``SessionFormats`` needs of the supervisor that holds it (on the event loop)."""

    def live(self) -> Iterable[ExecutorProcess]:
        """Its executors not being killed."""

    def recycle(
        self, ex: ExecutorProcess, reason: str, *, when: str | None = None
    ) -> asyncio.Task[KillReport]:
        """Replace ``ex`` (killed and reaped; counted and recorded as a recycle)."""


class SessionFormats:
    """What every executor leased from now on has in its session (only grows): the table
    formats (``wanted``) and, under ``PoolSettings.spark_on_demand``, whether it opens a
    SparkSession at all (``spark``); and the replacement of the executors that lack either:
    idle and starting ones at once, busy ones when their write ends. No executor lacking one
    is leased again.

    The supervisor spawns executors with ``wanted`` and ``spark`` and asks ``lacks`` before it
    leases an executor, when one becomes ready and when one finishes a write."""

    def __init__(
        self, initial: frozenset[str], owner: FormatsOwner, *, spark: bool = True, able: bool = True
    ) -> None:
        self.wanted = initial
        #: False: the pool runs without Spark (``PoolSettings.with_spark``); ``spark`` stays
        #: False and formats are only names.
        self._able = able
        #: Executors open a SparkSession (a table format implies one).
        self.spark = able and (spark or bool(initial))
        self._owner = owner

    def load(self, names: frozenset[str], *, spark: bool = False) -> None:
        """Make ``names`` part of every session from now on, and a session itself with
        ``spark`` or any format (see the class docstring)."""
        new = names - self.wanted
        opens = self._able and not self.spark and (spark or bool(names))
        if not new and not opens:
            return
        self.wanted = self.wanted | new
        self.spark = self.spark or opens
        live = [ex for ex in self._owner.live() if self.lacks(ex)]
        now = [ex for ex in live if ex.state in (ExecutorState.IDLE, ExecutorState.STARTING)]
        later = sum(1 for ex in live if ex.state is ExecutorState.BUSY)
        what = []
        if opens:
            what.append("a SparkSession (a write needs Spark)")
        if new:
            what.append(f"table format {', '.join(sorted(new))}")
        log.info(
            "executor pool: loading %s (sessions now load: %s); %d executor(s) recycled now,"
            " %d when their write ends",
            " and ".join(what),
            ", ".join(sorted(self.wanted)) or "no table format",
            len(now),
            later,
        )
        for ex in now:
            self.replace(ex)

    def lacks(self, ex: ExecutorProcess) -> bool:
        """``ex``'s session lacks a format the pool loads now, or Spark itself."""
        return not self.wanted <= ex.formats or (self.spark and not ex.spark)

    def replace(self, ex: ExecutorProcess) -> None:
        """Recycle ``ex``, whose session lacks a format or Spark (its write, if any, has
        ended)."""
        missing = ", ".join(sorted(self.wanted - ex.formats))
        if self.spark and not ex.spark:
            reason = "it opened no SparkSession" + (
                f" (nor table format {missing})" if missing else ""
            )
            when = "to open SparkSessions"
        else:
            reason, when = f"its session lacks table format {missing}", "to load table formats"
        self._owner.recycle(ex, reason, when=when)


# -- fetching (``connectd fetch-jars``, ``make jars``) ---------------------------------------


class MavenUnavailable(ConnectdError):
    """No ``mvn`` on PATH: the jars cannot be fetched (``connectd fetch-jars`` exits 69)."""

    retriable = False


class FetchFailed(ConnectdError):
    """Maven did not deliver a jar (no network, a timeout); the message has Maven's last lines."""

    retriable = True


def fetch(
    names: Iterable[str],
    jars_dir: Path | None = None,
    *,
    timeout: float = 300.0,
    report: Callable[[str], None] = lambda line: None,
    line: SparkLine | None = None,
) -> list[Path]:
    """Copy the jars of ``names`` that ``jars_dir`` lacks or holds incomplete from Maven Central
    (Maven's default repository; through the local ``~/.m2`` cache) with ``mvn
    dependency:copy``, one artifact at a time, each within ``timeout`` seconds. Blocking. The
    jars fetched; ``report`` hears one line per jar (fetched, already there, incomplete).
    ``line``: the Spark line whose builds to fetch, by default the installed pyspark's."""
    chosen = artifacts(names, line)
    directory = jars_dir if jars_dir is not None else default_jars_dir()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenUnavailable(
            "Maven (mvn) is needed to fetch the table formats' jars from Maven Central:"
            " apt-get install maven"
        )
    directory.mkdir(parents=True, exist_ok=True)
    fetched = []
    for artifact in chosen:
        target = directory / artifact.file_name
        problem = jar_problem(target)
        if problem is None:
            report(f"present  {target}")
            continue
        if problem != "missing":
            report(f"{problem}  {target}: fetching it again")
        _fetch_one(mvn, artifact, target, timeout)
        report(f"fetched  {target}  ({artifact.coordinates})")
        fetched.append(target)
    return fetched


def _fetch_one(mvn: str, artifact: Artifact, target: Path, timeout: float) -> None:
    """Maven copies the jar into a staging directory beside ``target``; a whole jar then
    replaces ``target`` at once, so an interrupted fetch leaves no partial jar under its name."""
    staging = target.parent / f".fetch-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    command = [
        mvn,
        "-q",
        "-B",
        "dependency:copy",
        f"-Dartifact={artifact.coordinates}",
        f"-DoutputDirectory={staging}",
    ]
    try:
        try:
            # In the staging directory: Maven would read a pom.xml in the working directory.
            done = subprocess.run(
                command, cwd=staging, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise FetchFailed(
                f"Maven did not fetch {artifact.coordinates} within {timeout:g} s"
            ) from None
        staged = staging / artifact.file_name
        if done.returncode != 0 or jar_problem(staged) is not None:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
            raise FetchFailed(
                f"Maven could not fetch {artifact.coordinates} (exit {done.returncode}):\n{tail}"
            )
        os.replace(staged, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
