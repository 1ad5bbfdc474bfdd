"""How an executor is launched: its environment, its JVM's options, its ``Start`` message."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from daemon.executor import protocol
from daemon.executor.settings import PoolSettings


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
    if settings.spark_master.startswith("local"):
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


def start_message(
    settings: PoolSettings, work_dir: Path, java_options: str, archive_out: Path | None = None
) -> protocol.Start:
    """What an executor is told to open; with ``archive_out``, the class-data-sharing archive
    builder (``java_options`` then carry ``-XX:ArchiveClassesAtExit``)."""
    builder = archive_out is not None
    conf = settings.session_conf()
    java = [
        conf.get("spark.driver.extraJavaOptions", ""),
        f"-Djava.io.tmpdir={work_dir}",
        "-XX:-UsePerfData",  # no hsperfdata files left behind by killed JVMs
        java_options,
    ]
    conf["spark.driver.extraJavaOptions"] = " ".join(o for o in java if o)
    return protocol.Start(
        parent_pid=os.getpid(),
        with_spark=settings.with_spark,
        master=settings.spark_master,
        conf=conf,
        heartbeat_interval=settings.heartbeat_interval,
        nice=19 if builder else settings.nice,
        warmup=settings.warmup,
        warmup_dir=str(work_dir),
        archive_out=str(archive_out) if archive_out is not None else None,
    )
