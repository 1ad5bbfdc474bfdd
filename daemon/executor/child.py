"""The executor process: one SparkSession, opened once, reused for every write (or none: an
executor started while no write needs Spark, ``PoolSettings.spark_on_demand``, runs its writes
with ``spark=None`` in this Python process; steps 3 and 4 are then an import of pyarrow).

Started by the pool as ``python -m daemon.executor.child`` in a session of its own, with its end
of the control socket on descriptor 3. In order:

1. Die with the daemon: a parent-death signal (SIGKILL), and a check that the parent is still
   the one that started us (it may have died before the signal was armed).
2. Lower its priority (the JVM and Python workers inherit it), read ``Start``.
3. Open the SparkSession. The JVM gets a parent-death signal too (armed between fork and exec
   of ``spark-submit``), and with a ``local`` master PySpark's worker daemon is
   ``daemon.executor.pyworker``, which arms one for itself and each worker: killing any link
   kills everything below it. (On a cluster the JVM is only the application's driver: the
   cluster ends the application's executors once it is gone.)
4. Warm up (a Python job, so PySpark's workers are up; a small Arrow → DataFrame → Parquet write)
   and only then send ``Ready``.
5. Serve: wait for ``Run`` with a timeout of one heartbeat interval; send a ``Heartbeat`` on each
   timeout. The heartbeat comes from this same thread, the one that runs the writes, so a stuck
   write stops it. A closed socket means the daemon is gone: exit at once.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import signal
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from daemon import sparklines as lines
from daemon.executor import cds, process, protocol
from daemon.executor.causes import leaves_state, root_cause
from daemon.executor.handoff import Batch
from daemon.sparkcheck import master_ui_urls


def _arm_parent_death(expected_parent: int) -> None:
    process.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != expected_parent:
        os._exit(70)  # the daemon died before the signal was armed


def _patch_gateway_launch() -> None:
    """Arm a parent-death signal in the JVM, between fork and exec of ``spark-submit``."""
    import pyspark.java_gateway as gateway

    original = vars(gateway)["Popen"]

    def popen(*args: Any, **kwargs: Any) -> Any:
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:
            process.set_parent_death_signal(signal.SIGKILL)
            if inner is not None:
                inner()

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    vars(gateway)["Popen"] = popen


def _open_session(start: protocol.Start) -> Any:
    _check_master_line(start)
    _patch_gateway_launch()
    from pyspark.sql import SparkSession

    role = "cds-builder" if start.archive_out is not None else "executor"
    builder = SparkSession.builder.master(start.master).appName(f"connectd-{role}-{os.getpid()}")
    for key, value in start.conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _check_master_line(start: protocol.Start) -> None:
    """A ``spark://`` master of another Spark line would let the session try to register for a
    minute and then fail with a stack trace: read the master's version from its web UI first,
    and fail the start at once naming both versions (``lines.SparkLineMismatch``). A UI that
    cannot be read leaves the check to Spark."""
    urls = master_ui_urls(start.master, start.master_ui)
    if not urls:
        return
    version, url, _ = lines.read_master_version(urls)
    if version and (error := lines.mismatch(start.master, version, url)) is not None:
        raise error


def _warm_up(spark: Any, directory: str) -> None:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    # A Python job, so PySpark's worker daemon and a worker are running.
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).sum()
    table = pa.table({"kafka_offset": pa.array(range(64), pa.int64()), "value": ["x" * 32] * 64})
    # As a write's rows reach Spark (``Batch.df``): a Parquet file pyarrow wrote, read by Spark.
    staged = os.path.join(directory, "warmup-rows.parquet")
    pq.write_table(table, staged, compression="none")
    df = spark.read.parquet(staged)
    df.write.mode("overwrite").parquet(os.path.join(directory, "warmup"))
    if "DeltaSparkSessionExtension" in spark.conf.get("spark.sql.extensions", ""):
        # Delta's first two commits in a session load its classes and build its first
        # snapshot (12-24 s here, docs/research/table-formats.md): pay that before Ready.
        for _ in range(2):
            df.write.format("delta").mode("append").save(os.path.join(directory, "warmup-delta"))


def _jvm_process(spark: Any) -> Any:
    return spark.sparkContext._gateway.proc if spark is not None else None


def _jvm_failure(spark: Any) -> str | None:
    """Why the session cannot serve another write, or None if it can."""
    if spark is None:
        return None
    proc = _jvm_process(spark)

    def died() -> str | None:
        if proc is None or proc.poll() is None:
            return None
        code = proc.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return f"the executor's JVM (pid {proc.pid}) died: {how}"

    if (dead := died()) is not None:
        return dead
    try:
        if spark.sparkContext._jsc.sc().isStopped():
            return "the executor's SparkContext was stopped"
    except Exception as exc:
        # A JVM that was just killed takes a moment to exit; name that as the cause if so.
        with contextlib.suppress(Exception):
            proc.wait(timeout=2.0)
        return died() or f"the executor's JVM does not answer: {exc}"
    return None


def _resolve(ref: str) -> Any:
    module_name, _, qualname = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _execute(sock: socket.socket, spark: Any, msg: protocol.Run) -> bool:
    """Run one write; False if the executor must exit afterwards."""
    protocol.send_blocking(sock, protocol.Accepted(msg.seq))
    began = time.monotonic()
    batch = Batch(Path(msg.batch_path), spark) if msg.batch_path else None
    try:
        value = _resolve(msg.fn)(spark, batch, **msg.kwargs)
        pickle.dumps(value)  # fail here, as the write's error, if the result cannot travel
        reply: protocol.Done | protocol.Failed = protocol.Done(
            msg.seq, value, time.monotonic() - began
        )
    except BaseException as exc:
        broken = _jvm_failure(spark)
        target = msg.kwargs.get("path")
        reply = protocol.Failed(
            seq=msg.seq,
            error=type(exc).__name__,
            message=broken or str(exc),
            traceback=traceback.format_exc(),
            seconds=time.monotonic() - began,
            fatal=broken is not None,
            cause=root_cause(exc, target if isinstance(target, str) else None),
            recycle=leaves_state(exc),
        )
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            reply = protocol.Failed(
                msg.seq, type(exc).__name__, str(exc), reply.traceback, reply.seconds, True
            )
    finally:
        if batch is not None:
            batch.release()
    try:
        protocol.send_blocking(sock, reply)
    except protocol.FrameError as exc:
        protocol.send_blocking(
            sock,
            protocol.Failed(msg.seq, "FrameError", str(exc), "", time.monotonic() - began),
        )
    return not (isinstance(reply, protocol.Failed) and reply.fatal)


def _build_archive(spark: Any) -> None:
    """Stop the session and let the JVM exit cleanly: ``-XX:ArchiveClassesAtExit`` dumps then."""
    proc = _jvm_process(spark)
    spark.stop()
    proc.stdin.close()  # PySpark's gateway exits on EOF of its stdin
    proc.wait(timeout=600)


def serve(sock: socket.socket, start: protocol.Start) -> None:
    began = time.monotonic()
    os.nice(start.nice)
    spark = None
    try:
        if start.with_spark:
            spark = _open_session(start)
            if start.warmup:
                _warm_up(spark, start.warmup_dir)
        else:
            # No session (``PoolSettings.spark_on_demand``, or a pool without Spark): warm what
            # a pyarrow write uses, so the first hand-off does not pay the imports.
            import pyarrow.ipc
            import pyarrow.parquet  # noqa: F401
    except lines.SparkLineMismatch as exc:  # one clear line, no stack trace
        protocol.send_blocking(sock, protocol.StartFailed(str(exc)))
        os._exit(1)
    except BaseException:
        protocol.send_blocking(sock, protocol.StartFailed(traceback.format_exc()))
        os._exit(1)
    java = _jvm_process(spark)
    version = spark.version if spark is not None else None
    protocol.send_blocking(
        sock,
        protocol.Ready(
            os.getpid(),
            time.monotonic() - began,
            java.pid if java else None,
            version,
            cds.mapped(java.pid, start.archive_in) if java and start.archive_in else None,
        ),
    )
    if start.archive_out is not None:
        _build_archive(spark)
        os._exit(0)
    while True:
        try:
            msg = protocol.recv_blocking(sock, start.heartbeat_interval)
        except (EOFError, OSError):
            os._exit(0)  # the daemon is gone; the parent-death signals take the JVM down
        if msg is None:
            broken = _jvm_failure(spark)
            if broken is not None:
                print(f"connectd executor {os.getpid()}: {broken}; exiting", file=sys.stderr)
                os._exit(3)
            protocol.send_blocking(sock, protocol.Heartbeat(time.time()))
        elif isinstance(msg, protocol.Run):
            if not _execute(sock, spark, msg):
                os._exit(3)
        elif isinstance(msg, protocol.Stop):
            if spark is not None:
                spark.stop()
            os._exit(0)


def main() -> None:
    _arm_parent_death(int(os.environ["CONNECTD_PARENT_PID"]))
    os.set_inheritable(process.CHILD_FD, False)  # the JVM must not hold the daemon's socket
    sock = socket.socket(fileno=process.CHILD_FD)
    try:
        start = protocol.recv_blocking(sock, 60.0)
    except (EOFError, OSError):
        os._exit(0)
    if not isinstance(start, protocol.Start):
        os._exit(2)
    tempfile.tempdir = None  # honour the TMPDIR the pool set
    serve(sock, start)


if __name__ == "__main__":
    main()
