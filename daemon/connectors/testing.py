"""Connectors that misbehave on purpose, and helpers to test connectors without Spark.

Shipped in the package because operators use them to check a deployment:

- ``HangSink``: every ``put`` (even an empty one) runs an executor function that blocks forever
  in the executor's Python code, as the seed demo's ``LatchHangSinkTask`` blocks on a latch.
  The executor writes ``Starting to block in executor pid N for task T`` to its log (stderr)
  and the daemon logs the same line. ``hang.after.records=N`` first writes N records with a
  trivial executor function, then hangs. The write's deadline (``task.write.timeout.ms``) or a
  stop kills the executor's process tree.
- ``EchoSink``: logs a sample of the records (the first ``log.first.records`` and every
  ``log.every.records``-th), counts them; ``fail.task.after.records=N`` fails the task
  (retriable ``InjectedFailure``) once it has received N records, as Strimzi's echo sink does.
  It calls no executor (``needs_executors = False``): a worker running only echo sinks starts
  no JVM unless ``executor.pool.start=eager``.

For connector authors: ``LocalRunner`` runs write functions in this process with
``spark=None`` (an ``ExecutorRunner`` for unit tests), ``sample_batch`` builds a batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from daemon import __version__
from daemon.connectors.api import (
    ConfigDef,
    ConfigType,
    Importance,
    SinkConnector,
    SinkTask,
    SinkTaskContext,
    in_range,
)
from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.records import RawBatch, RecordBatch
from daemon.connectors.tables.settings import write_timeout
from daemon.errors import ConnectdError, WriteFailed, WriteTimeout

__all__ = [
    "EchoSinkConnector",
    "EchoSinkTask",
    "HangSinkConnector",
    "HangSinkTask",
    "InjectedFailure",
    "LocalRunner",
    "__version__",
    "sample_batch",
]

log = logging.getLogger("connectd.connectors.testing")

_HERE = "daemon.connectors.testing"
BLOCK_FUNCTION = f"{_HERE}:block_forever"
COUNT_FUNCTION = f"{_HERE}:count_batch"


class InjectedFailure(ConnectdError):
    """A test connector failed on purpose (``fail.task.after.records``). Retriable, so the
    restart policy restarts the task."""

    retriable = True


# --- executor side ---------------------------------------------------------------------------


def block_message(pid: int, task: str) -> str:
    return f"Starting to block in executor pid {pid} for task {task}"


def block_forever(spark: Any, batch: Any, *, task: str, marker: str | None = None) -> None:
    """Block forever in the executor's own Python code, like a task stuck on a latch.

    Writes ``block_message`` to the executor's stderr (its log) and, if ``marker`` is given,
    the executor's pid to that file, so the daemon can log it too.
    """
    print(block_message(os.getpid(), task), file=sys.stderr, flush=True)
    if marker:
        tmp = f"{marker}.tmp"
        Path(tmp).write_text(str(os.getpid()))
        os.replace(tmp, marker)
    threading.Event().wait()


def count_batch(spark: Any, batch: Any) -> int:
    """A trivial write: the batch's row count."""
    return 0 if batch is None else int(batch.num_rows)


def read_as_spark(spark: Any, batch: Any, *, path: str) -> dict[str, Any]:
    """How Spark reads the Parquet table under ``path`` (Hive partitions included): its schema
    as Spark's JSON, and its rows as Spark's JSON lines, sorted (to compare two writers)."""
    df = spark.read.parquet(path)
    return {"schema": df.schema.json(), "rows": sorted(df.toJSON().collect())}


def write_staged_then_block(
    spark: Any, batch: Any, *, marker: str | None = None, **kwargs: Any
) -> None:
    """ParquetSink's write, then block forever: a write killed after its files were staged."""
    from daemon.connectors.parquet.write import write_staged

    write_staged(spark, batch, **kwargs)
    block_forever(spark, batch, task="write_staged_then_block", marker=marker)


def write_staged_then_hang_in_udf(
    spark: Any, batch: Any, *, marker: str | None = None, **kwargs: Any
) -> None:
    """ParquetSink's write, then a Spark job whose Python UDF sleeps forever: with a cluster
    master the write hangs on the cluster's executors, not in the executor process.

    ``marker`` (default ``$CONNECTD_HANG_MARKER``) is a file the UDF writes its pid to once it
    sleeps; the UDF is self-contained (standard library only), so a cluster node needs nothing
    of connectd to run it.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from daemon.connectors.parquet.write import write_staged

    write_staged(spark, batch, **kwargs)
    where = marker or os.environ.get("CONNECTD_HANG_MARKER")

    def stall(_value, where=where):  # type: ignore[no-untyped-def]  # hints: a pandas UDF
        import os
        import time

        if where:
            with open(f"{where}.tmp", "w") as out:
                out.write(str(os.getpid()))
            os.replace(f"{where}.tmp", where)
        while True:
            time.sleep(3600)

    spark.range(1, numPartitions=1).select(F.udf(stall, LongType())("id")).collect()


# --- HangSink --------------------------------------------------------------------------------


class HangSinkConnector(SinkConnector):
    """Tasks whose writes block forever in the executor (see the module docs)."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "hang.after.records",
            ConfigType.INT,
            0,
            Importance.MEDIUM,
            "Write this many records normally (a trivial executor function), then block "
            "every put. 0: the first put blocks.",
            validator=in_range(0, None),
        )

    def task_class(self) -> type[SinkTask]:
        return HangSinkTask


class HangSinkTask(SinkTask):
    """``put`` blocks in the executor once ``hang.after.records`` records were written."""

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        values = HangSinkConnector().config_def().parse(config)
        self.context = context
        self.hang_after: int = values["hang.after.records"]
        self.timeout = write_timeout(config)
        self.written = 0
        #: The executor pid of the last block, once the executor reported it.
        self.executor_pid: int | None = None
        self._seq = itertools.count(1)
        # One marker file per block, removed when the block ends (also when it is cancelled):
        # a task that is killed, not stopped, leaves nothing behind.
        self._marker_prefix = f"connectd-hang-{os.getpid()}-{id(self):x}-"

    async def put(self, batch: RecordBatch) -> None:
        table = batch.table if len(batch) else None
        if self.written < self.hang_after:
            self.written += await self.context.run_in_executor(
                COUNT_FUNCTION, table, timeout=self.timeout
            )
            return
        marker = Path(tempfile.gettempdir(), f"{self._marker_prefix}{next(self._seq)}")
        task = str(self.context.task_id)
        run = asyncio.ensure_future(
            self.context.run_in_executor(
                BLOCK_FUNCTION, table, timeout=self.timeout, task=task, marker=str(marker)
            )
        )
        try:
            while not run.done():
                pid = await asyncio.to_thread(_read_pid, marker)
                if pid is not None:
                    self.executor_pid = pid
                    log.warning("%s", block_message(pid, task))
                    break
                await asyncio.wait({run}, timeout=0.05)
            await run
        finally:
            if not run.done():
                run.cancel()  # the runner kills the executor before the cancellation completes
                await asyncio.wait({run})
            with contextlib.suppress(OSError):
                marker.unlink()

    async def stop(self) -> None:
        """Nothing to release: each block's marker file goes when the block ends."""


def _read_pid(marker: Path) -> int | None:
    try:
        return int(marker.read_text())
    except (FileNotFoundError, ValueError):
        return None


# --- EchoSink --------------------------------------------------------------------------------


class EchoSinkConnector(SinkConnector):
    """Logs a sample of the records and counts them; can fail on purpose."""

    needs_executors = False  # it writes nothing: a worker running only echo sinks starts no JVM

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "log.first.records",
                ConfigType.INT,
                5,
                Importance.LOW,
                "Log the first this many records.",
                validator=in_range(0, None),
            )
            .define(
                "log.every.records",
                ConfigType.INT,
                1000,
                Importance.LOW,
                "Then log every this-many-th record; 0 logs no more.",
                validator=in_range(0, None),
            )
            .define(
                "fail.task.after.records",
                ConfigType.INT,
                0,
                Importance.MEDIUM,
                "Fail the task (retriable) once it has received this many records; 0 never.",
                validator=in_range(0, None),
            )
        )

    def task_class(self) -> type[SinkTask]:
        return EchoSinkTask


class EchoSinkTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        values = EchoSinkConnector().config_def().parse(config)
        self.context = context
        self.first: int = values["log.first.records"]
        self.every: int = values["log.every.records"]
        self.fail_after: int = values["fail.task.after.records"]
        self.count = 0
        self.logged = 0

    async def put(self, batch: RecordBatch) -> None:
        n = len(batch)
        picks = sample_indices(self.count, n, self.first, self.every)
        if picks:
            for record in _take(batch, picks).records():
                log.info(
                    "%s: received %s-%d@%d key=%r value=%r",
                    self.context.task_id,
                    record.topic,
                    record.partition,
                    record.offset,
                    record.key,
                    record.value,
                )
            self.logged += len(picks)
        self.count += n
        if self.fail_after and self.count >= self.fail_after:
            log.warning(
                "%s: failing as requested after %d records", self.context.task_id, self.count
            )
            raise InjectedFailure(
                f"intentional task failure after receiving {self.count} records "
                f"(fail.task.after.records={self.fail_after})"
            )

    async def stop(self) -> None:
        if hasattr(self, "context"):  # start succeeded
            log.info("%s: received %d records", self.context.task_id, self.count)


def sample_indices(seen: int, n: int, first: int, every: int) -> list[int]:
    """Indices into a batch of ``n`` after ``seen`` records whose 1-based number is ≤ ``first``
    or a multiple of ``every``. Work is proportional to the sample, not to ``n``."""
    picks = set(range(max(0, min(n, first - seen))))
    if every > 0:
        k = (seen // every + 1) * every  # first multiple above `seen`
        picks.update(range(k - seen - 1, n, every))
    return sorted(picks)


def _take(batch: RecordBatch, indices: Sequence[int]) -> RecordBatch:
    idx = pa.array(indices, pa.int64())
    return replace(
        batch,
        table=batch.table.take(idx),
        tombstones=None if batch.tombstones is None else batch.tombstones.take(idx),
        timestamp_types=None if batch.timestamp_types is None else batch.timestamp_types.take(idx),
    )


# --- for tests of connectors -----------------------------------------------------------------


class LocalRunner:
    """An ``ExecutorRunner`` that runs write functions in this process, in a thread, with
    ``spark=None`` and a real ``daemon.executor.handoff.Batch``. For unit tests only: it cannot
    kill a write; past ``timeout`` it raises ``WriteTimeout`` and abandons the thread (a daemon
    thread). ``calls`` records ``(fn, rows, kwargs)`` of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []

    async def run_in_executor(
        self,
        fn: str,
        batch: pa.Table | None,
        *,
        timeout: float,
        formats: Collection[str] = (),  # no session here: nothing to load
        spark: bool = True,  # nor to open: ``spark`` is None either way
        **kwargs: Any,
    ) -> Any:
        from daemon.executor.handoff import Batch, write_table

        module, _, name = fn.partition(":")
        self.calls.append((fn, 0 if batch is None else batch.num_rows, dict(kwargs)))
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, exc: BaseException | None) -> None:
            if not done.done():
                done.set_exception(exc) if exc is not None else done.set_result(value)

        def call() -> None:
            handoff: Batch | None = None
            path: str | None = None
            try:
                if batch is not None:
                    fd, path = tempfile.mkstemp(suffix=".arrow", prefix="connectd-local-")
                    os.close(fd)
                    handoff = Batch(write_table(batch, Path(path)), None)
                func = getattr(importlib.import_module(module), name)
                value, exc = func(None, handoff, **kwargs), None
            except BaseException as e:
                value, exc = None, e
            finally:
                if handoff is not None:
                    handoff.release()
                if path is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            with contextlib.suppress(RuntimeError):  # the loop may be closed by now
                loop.call_soon_threadsafe(settle, value, exc)

        threading.Thread(target=call, name=f"local-write-{name}", daemon=True).start()
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(done)
        except TimeoutError:
            raise WriteTimeout(f"local write {fn} ran past its deadline of {timeout:g} s") from None
        except ConnectdError:
            raise
        except Exception as e:
            raise WriteFailed(f"write function {fn} raised {type(e).__name__}: {e}") from e


def sample_batch(
    topic: str = "t",
    partition: int = 0,
    start: int = 0,
    count: int = 10,
    *,
    values: Sequence[bytes | None] | None = None,
    value_size: int = 24,
) -> RecordBatch:
    """A batch of ``count`` records of one partition from offset ``start``, converted like the
    runtime converts (String converters by default). Values default to ``value-<offset>``
    padded to ``value_size`` bytes; keys are ``key-<offset>``; every record has a header."""
    offsets = range(start, start + count)
    if values is None:
        values = [f"value-{o}".ljust(value_size, ".").encode() for o in offsets]
    raw = RawBatch(
        topics=[topic] * count,
        partitions=[partition] * count,
        offsets=list(offsets),
        timestamps=[1_700_000_000_000 + o for o in offsets],
        keys=[f"key-{o}".encode() for o in offsets],
        values=list(values),
        headers=[(("source", b"sample"),)] * count,
        timestamp_types=[0] * count,
    )
    key, value = (
        make_converter("string", {}, is_key=True),
        make_converter("string", {}, is_key=False),
    )
    return convert_poll(raw, key, value).batch
