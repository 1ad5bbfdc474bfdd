"""The Spark lines connectd supports, and which one this installation runs.

Each executor is the driver of its writes, so its pyspark must be of the same line (major.minor)
as the Spark of a cluster it writes on, and everything built for Spark follows that line: the
table formats' jars (Scala 2.12 on 3.5, 2.13 on 4.x), the Java it runs on, the Python it
needs. The line is read from the installed pyspark's metadata, without importing it (no JVM,
no py4j): ``current()`` at start refuses a pyspark outside ``LINES`` (exit 78).

Coordinates were read from Maven Central's ``maven-metadata.xml`` on 2026-11-30; each line's
jars are the newest build for that line (the README's "Spark lines" table says the same).
"""

from __future__ import annotations

import functools
import re
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

from daemon.errors import ConfigError, ServiceUnavailable


@dataclass(frozen=True)
class Artifact:
    """One jar on Maven Central (``group:artifact:version``)."""

    group: str
    artifact: str
    version: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        """The name Maven gives the jar (``dependency:copy`` keeps it)."""
        return f"{self.artifact}-{self.version}.jar"


@dataclass(frozen=True)
class SparkLine:
    """One supported Spark line and what is built for it."""

    name: str  # "3.5"
    scala: str
    #: Java feature versions Spark supports on this line, from its documentation; connectd's own
    #: floor (17) cuts older ones.
    java: tuple[int, ...]
    python: str  # the Python versions this line's pyspark supports, as its docs say
    #: Exactly the jars a session needs; transitive dependencies are left out on purpose (most
    #: duplicate, in older versions, jars pyspark ships).
    delta: tuple[Artifact, ...]
    iceberg: tuple[Artifact, ...]

    @property
    def extra(self) -> str:
        """The pip extra that pins this line: ``connectd[spark35]``."""
        return "spark" + self.name.replace(".", "")


LINES: dict[str, SparkLine] = {
    "3.5": SparkLine(
        "3.5",
        scala="2.12",
        java=(8, 11, 17),
        python="3.8 and newer",
        # Delta 3.3 is the last Delta line for Spark 3.5 (Scala 2.12).
        delta=(
            Artifact("io.delta", "delta-spark_2.12", "3.3.3"),
            Artifact("io.delta", "delta-storage", "3.3.3"),
        ),
        iceberg=(Artifact("org.apache.iceberg", "iceberg-spark-runtime-3.5_2.12", "1.12.0"),),
    ),
    "4.0": SparkLine(
        "4.0",
        scala="2.13",
        java=(17, 21),
        python="3.9 and newer",
        # From Delta 4.1 on, artifacts carry the Spark line they are built for; the unsuffixed
        # delta-spark_2.13 follows the newest Spark and fails on older lines.
        delta=(
            Artifact("io.delta", "delta-spark_4.0_2.13", "4.4.0"),
            Artifact("io.delta", "delta-storage", "4.4.0"),
        ),
        # Iceberg 1.12 dropped Spark 4.0's runtime: 1.11.0 is its newest.
        iceberg=(Artifact("org.apache.iceberg", "iceberg-spark-runtime-4.0_2.13", "1.11.0"),),
    ),
    "4.1": SparkLine(
        "4.1",
        scala="2.13",
        java=(17, 21),
        python="3.10 and newer",
        # delta-spark_2.13:4.4.0 targets Spark 4.2 and fails on 4.1 (NoSuchMethodError at the
        # first save): docs/research/table-formats.md.
        delta=(
            Artifact("io.delta", "delta-spark_4.1_2.13", "4.4.0"),
            Artifact("io.delta", "delta-storage", "4.4.0"),
        ),
        iceberg=(Artifact("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", "1.12.0"),),
    ),
}

#: The line the project's own venv and ``make test`` run.
DEFAULT = "4.1"


class UnsupportedSpark(ConfigError):
    """The installed pyspark is of no supported line (or missing): nothing can write."""

    retriable = False


def line_of(version: str) -> str:
    """``"3.5.9"`` → ``"3.5"``; ``"4.1.0.dev1"`` → ``"4.1"``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise UnsupportedSpark(f"cannot read a Spark line from the version {version!r}")
    return f"{match.group(1)}.{match.group(2)}"


def supported() -> str:
    return ", ".join(f"{name}.x" for name in LINES)


def for_version(version: str) -> SparkLine:
    """The line of pyspark ``version``; ``UnsupportedSpark`` naming it and the supported ones."""
    line = LINES.get(line_of(version))
    if line is None:
        raise UnsupportedSpark(
            f"pyspark {version} is installed; connectd supports the Spark lines {supported()}:"
            f" install one of them in its environment (pip install 'connectd[spark41]', or"
            f" spark40, spark35: the line of the cluster its executors write on)"
        )
    return line


def installed_version() -> str:
    """The installed pyspark's version, from its package metadata (pyspark is not imported)."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        raise UnsupportedSpark(
            f"pyspark is not installed; connectd needs one of the Spark lines {supported()}"
            " (pip install 'connectd[spark41]')"
        ) from None


@functools.cache
def current() -> SparkLine:
    """The line of the installed pyspark, or ``UnsupportedSpark`` (read once per process)."""
    return for_version(installed_version())


# -- the line of a Spark standalone master --------------------------------------------------

#: Every page of Spark's web UI names the Spark version in its header.
_UI_VERSION = re.compile(r'<span class="version"[^>]*>\s*(\d+\.\d+[^<\s]*)\s*</span>')
_UI_READ_LIMIT = 1 << 20


class SparkLineMismatch(ServiceUnavailable):
    """The Spark master runs another line than the installed pyspark: no executor can register
    with it (Spark's RPC differs between lines). Exit 69 at start; a failed executor start,
    and so a FAILED task naming both versions, later."""

    retriable = False


def read_master_version(urls: Sequence[str], timeout: float = 5.0) -> tuple[str, str, list[str]]:
    """Blocking: the Spark version the first of ``urls`` shows in its header, with that URL,
    and the reasons the others failed; ``("", "", reasons)`` when none shows one."""
    failures = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as reply:
                page = reply.read(_UI_READ_LIMIT).decode("utf-8", "replace")
        except (OSError, ValueError) as exc:
            failures.append(f"{url}: {exc}")
            continue
        match = _UI_VERSION.search(page)
        if match is None:
            failures.append(f"{url}: no Spark version on the page")
            continue
        return match.group(1), url, failures
    return "", "", failures


def mismatch(master: str, version: str, url: str) -> SparkLineMismatch | None:
    """The error when a master running Spark ``version`` (read at ``url``) cannot take this
    installation's executors; None when the lines match."""
    installed = installed_version()
    mine, theirs = line_of(installed), line_of(version)
    if mine == theirs:
        return None
    fix = (
        f"install connectd with that line (pip install 'connectd[{LINES[theirs].extra}]')"
        if theirs in LINES
        else f"run the cluster on a line connectd supports ({supported()})"
    )
    return SparkLineMismatch(
        f"Spark line mismatch: executor.spark.master={master} runs Spark {version} (its web UI"
        f" {url} says so) and this connectd's executors run pyspark {installed} (Spark"
        f" {mine}): an executor of one Spark line cannot register with a master of another."
        f" Either {fix}, or point executor.spark.master at a Spark {mine} cluster"
    )
