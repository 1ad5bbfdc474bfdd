"""How an executor is launched: its environment, its JVM's options, its ``Start`` message, and
the ``Launcher`` that holds what a pool's launches share (scratch directories, log file, the
class-data-sharing plan)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from daemon.executor import cds, handoff, protocol
from daemon.executor import formats as table_formats
from daemon.executor.handle import ExecutorProcess
from daemon.executor.settings import PoolSettings


class Launcher:
    """Spawns one pool's executors (and its archive builder). ``prepare`` runs in a thread,
    ``open`` on the loop, before the first ``spawn``; ``close`` after the last reap."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.handoff = handoff.ScratchDir(settings.handoff_dir or handoff.default_handoff_root())
        self.work = handoff.ScratchDir(settings.work_dir or handoff.default_work_root())
        self.cds: cds.CdsPlan | None = None
        #: No archive is used or built (disabled, no Spark, or one broke an executor's start).
        self.cds_off = not settings.cds or not settings.with_spark
        self._env: dict[str, str] = {}
        self._output_fd: int | None = None

    def prepare(self) -> None:
        """Blocking: check the jars of the formats loaded from the start (``JarsMissing``),
        sweep stale scratch directories, create ours, plan the archive (and tidy its directory:
        ``CdsPlan.tidy``)."""
        table_formats.require_jars(self.settings.formats, self.settings.jars_dir)
        for scratch in (self.handoff, self.work):
            handoff.sweep_stale(scratch.daemon_dir.parent)
            scratch.create()
        if not self.cds_off:
            # Without the formats' jars: Spark adds ``spark.jars`` to a class loader of its own
            # at run time, not to the JVM's class path that an archive is checked against, so
            # one archive serves executors with and without formats (and loading a format on
            # demand does not leave every later executor without an archive).
            self.cds = cds.plan(self.settings.cds_dir, self.settings.base_conf())
            if self.cds is not None:
                self.cds.tidy()

    def open(self) -> None:
        self._env = environment(self.settings)
        if self.settings.log_path is not None:
            self._output_fd = os.open(
                self.settings.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )

    def spawn(
        self,
        ident: int,
        on_message: Callable[[ExecutorProcess, protocol.Message], None],
        on_exit: Callable[[ExecutorProcess], None],
        archive_out: Path | None = None,
        *,
        formats: frozenset[str] = frozenset(),
        spark: bool = True,
    ) -> ExecutorProcess:
        """Spawn an executor whose session loads the table formats ``formats`` (``spark``
        False: one that opens no session, ``PoolSettings.spark_on_demand``), or with
        ``archive_out`` the archive builder (``ident`` 0)."""
        spark = (spark or archive_out is not None) and self.settings.with_spark
        java, uses_cds = "", False
        if self.cds is not None and not self.cds_off and spark:
            if archive_out is not None:
                java = self.cds.builder_options(archive_out)
            else:
                java = self.cds.executor_options()
                uses_cds = bool(java)
        work_dir = self.work.path / (f"executor-{ident}" if ident else "cds-builder")
        # The archive builder loads no format on demand: the archive does not depend on them.
        loaded = formats if archive_out is None else frozenset()
        return ExecutorProcess.spawn(
            ident,
            start_message(
                self.settings,
                work_dir,
                java,
                archive_out,
                loaded,
                archive_in=self.cds.archive if uses_cds and self.cds is not None else None,
                spark=spark,
            ),
            env=self._env,
            work_dir=work_dir,
            uses_cds=uses_cds,
            formats=loaded,
            output_fd=self._output_fd,
            on_message=on_message,
            on_exit=on_exit,
            argv_extra=("--build-archive",) if archive_out is not None else (),
        )

    def close(self) -> None:
        """Blocking: remove the scratch directories, close the log file."""
        self.handoff.remove()
        self.work.remove()
        if self._output_fd is not None:
            os.close(self._output_fd)
            self._output_fd = None


def environment(settings: PoolSettings) -> dict[str, str]:
    """The executors' environment: the daemon's, with PySpark pointed at this interpreter and
    the daemon's own import path (so ``package.module:function`` resolves the same there)."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONUNBUFFERED"] = "1"
    paths = import_path()
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if settings.local:
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # and no warning about the hostname
    return env


def import_path() -> list[str]:
    """Entries of ``sys.path`` that a fresh interpreter would not have (project and test dirs)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    out = []
    for entry in sys.path:
        path = os.path.abspath(entry or os.getcwd())
        if os.path.isdir(path) and not any(path.startswith(p) for p in prefixes):
            out.append(path)
    return out


#: The archive builder's master (``start_message``).
BUILDER_MASTER = "local[1]"


def start_message(
    settings: PoolSettings,
    work_dir: Path,
    java_options: str,
    archive_out: Path | None = None,
    formats: Iterable[str] = (),
    *,
    archive_in: Path | None = None,
    spark: bool = True,
) -> protocol.Start:
    """What an executor is told to open, with the table formats ``formats`` loaded (besides
    ``settings.formats``); with ``archive_out``, the class-data-sharing archive builder
    (``java_options`` then carry ``-XX:ArchiveClassesAtExit``); ``archive_in``: the archive
    ``java_options`` give the JVM (the executor reports whether the JVM mapped it); ``spark``
    False: no session is opened (nor is one when the pool runs ``with_spark=False``)."""
    builder = archive_out is not None
    conf = settings.session_conf(formats)
    java = [
        conf.get("spark.driver.extraJavaOptions", ""),
        f"-Djava.io.tmpdir={work_dir}",
        "-XX:-UsePerfData",  # no hsperfdata files left behind by killed JVMs
        java_options,
    ]
    conf["spark.driver.extraJavaOptions"] = " ".join(o for o in java if o)
    return protocol.Start(
        parent_pid=os.getpid(),
        with_spark=settings.with_spark and spark,
        # The builder dumps the classes of the executor's JVM, whose class path is the same
        # whatever the master: it runs in local mode, so it never registers on a user's cluster
        # (as a second application named like a writer) nor takes a core there.
        master=BUILDER_MASTER if builder else settings.spark_master,
        conf=conf,
        heartbeat_interval=settings.heartbeat_interval,
        nice=19 if builder else settings.nice,
        warmup=settings.warmup,
        warmup_dir=str(work_dir),
        archive_out=str(archive_out) if archive_out is not None else None,
        archive_in=str(archive_in) if archive_in is not None else None,
        master_ui=() if builder else settings.spark_master_ui,
    )
