"""The runtime's view of the executor pool, and the per-incarnation binding a task writes through.

``Executors`` is the part of ``daemon.executor.ExecutorPool`` the runtime uses, so a daemon can
run on a pool it owns or on one it is given (tests share one warm pool between daemons). The
runtime has one call signature for a write: ``submit``, which returns the write's
``WriteLease`` (``daemon.executor.lease``); whatever stands in for a pool implements it.

``ExecutorBinding`` is the ``ExecutorRunner`` of one task incarnation: it names the task id to
the pool (so the pool never leases two executors to one task id at once), applies the worker's
``task.write.timeout.ms`` when a sink passes no deadline, and refuses new writes once the
incarnation is being killed: a zombie cannot start a write. Each write's lease says which
executor accepted it and whether the pool killed that executor. With ``metrics``, every
successful call records its rows and duration (``record_written``) and every executor the pool
killed under this binding is counted: ``write deadline`` (``WriteTimeout``) and ``write
cancelled`` (a write cancelled while an executor held it, e.g. by a callback deadline). A kill
by the stop sequence (the binding is closed first) is counted by the slot as ``task stop``, not
here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from daemon.errors import PoolClosed, WriteTimeout
from daemon.executor.info import ExecutorState
from daemon.executor.lease import WriteLease

if TYPE_CHECKING:
    import pyarrow as pa

    from daemon.executor.info import ExecutorInfo, PoolStatus


class Executors(Protocol):
    """What the runtime needs of an executor pool (``ExecutorPool`` fits, and so does the test
    suite's ``ThreadedPool``)."""

    def submit(
        self,
        task_id: str,
        fn: str,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
        formats: Collection[str] = (),
        group: str | None = None,
        group_limit: int | None = None,
        spark: bool = True,
    ) -> WriteLease:
        """Hand ``fn(spark, batch, **kwargs)`` over for ``task_id`` in a session with the table
        formats ``formats`` loaded (``spark`` False: ``fn`` needs no session, any executor may
        run it); ``timeout`` counts from the executor's acknowledgement.
        ``group`` is the task's connector, whose writes hold at most ``group_limit`` executors
        at once (``executor.writes.max``; None: the pool's size).
        Cancelling the await of the lease's ``result()`` kills the write's executor tree and
        re-raises only once it is reaped; ``killed`` then says whether an executor held it.
        A pool that has not started starts now; the write waits for it within its acquire
        timeout."""
        ...

    def start_soon(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        """Start the executors in the background unless they started (``RuntimeEnv``'s
        ``executors_needed``), with sessions that load the table formats ``formats`` too, and
        (``spark``) with a SparkSession; returns at once and never raises."""
        ...

    async def ready(self, timeout: float) -> bool:
        """Whether an executor can take a write within ``timeout`` seconds (the executors
        started first if they were not); False past it, or if they could not start."""
        ...

    def current_pid(self, task_id: str) -> int | None: ...

    def snapshot(self) -> list[ExecutorInfo]: ...

    def status(self) -> PoolStatus: ...


class WriteMetrics(Protocol):
    """What a binding records (``daemon.metrics.Metrics`` fits); calls never block."""

    def record_written(self, connector: str, task: int, count: int, seconds: float) -> None: ...

    def executor_killed(self, reason: str) -> None: ...


def task_labels(task_id: str) -> tuple[str, int]:
    """``(connector, task)`` of a task id's string (Connect's ``name-N``; names may hold ``-``)."""
    connector, _, number = task_id.rpartition("-")
    return (connector, int(number)) if connector and number.isdigit() else (task_id, 0)


class ExecutorBinding:
    """One incarnation's door to the executors (the ``ExecutorRunner`` of its ``TaskContext``)."""

    def __init__(
        self,
        executors: Executors,
        task_id: str,
        default_timeout: float,
        *,
        metrics: WriteMetrics | None = None,
        group: str | None = None,
    ) -> None:
        self.executors = executors
        self.task_id = task_id
        self.default_timeout = default_timeout
        self.metrics = metrics
        self._labels = task_labels(task_id)
        #: The connector: its writes share ``group_limit`` executors (``executor.writes.max``).
        self.group = self._labels[0] if group is None else group
        self.group_limit: int | None = None
        self._closed: str | None = None

    def close(self, reason: str) -> None:
        """Refuse writes from now on (the incarnation is being killed, or is over)."""
        self._closed = reason

    async def run_in_executor(
        self,
        fn: str,
        batch: pa.Table | None,
        *,
        timeout: float,
        formats: Collection[str] = (),
        spark: bool = True,
        **kwargs: Any,
    ) -> Any:
        """``fn`` in an executor under ``timeout`` seconds (the worker's write timeout when
        ``timeout`` is 0 or less), in a session with the table formats ``formats`` loaded
        (``spark`` False: ``fn`` needs no session)."""
        if self._closed is not None:
            raise PoolClosed(f"task {self.task_id}: no more writes ({self._closed})")
        deadline = timeout if timeout > 0 else self.default_timeout
        began = time.monotonic()
        lease = self.executors.submit(
            self.task_id,
            fn,
            batch,
            timeout=deadline,
            kwargs=kwargs,
            formats=formats,
            group=self.group,
            group_limit=self.group_limit,
            spark=spark,
        )
        try:
            result = await lease.result()
        except WriteTimeout:
            self._killed("write deadline")
            raise
        except asyncio.CancelledError:
            # The pool killed the executor that held the write (none if it was not leased yet).
            if lease.killed and self._closed is None:
                self._killed("write cancelled")
            raise
        if self.metrics is not None:
            rows = 0 if batch is None else batch.num_rows
            self.metrics.record_written(*self._labels, rows, time.monotonic() - began)
        return result

    def _killed(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.executor_killed(reason)

    def current_pid(self) -> int | None:
        """The executor writing for this task id now, if any."""
        return self.executors.current_pid(self.task_id)

    def released(self, pid: int) -> bool:
        """Whether the pool holds ``pid`` as a live executor that writes nothing for this task
        id (idle, or leased to another task): the write it did for this task, if any, ended
        with its outcome reported, so it is no threat to a new incarnation."""
        for info in self.executors.snapshot():
            if info.pid == pid:
                return info.state is ExecutorState.IDLE or (
                    info.state is ExecutorState.BUSY and info.task_id != self.task_id
                )
        return False
