"""The runtime's view of the executor pool, and the per-incarnation binding a task writes through.

``Executors`` is the part of ``daemon.executor.ExecutorPool`` the runtime uses, so a daemon can
run on a pool it owns or on one it is given (tests share one warm pool between daemons).

``ExecutorBinding`` is the ``ExecutorRunner`` of one task incarnation: it names the task id to
the pool (so the pool never leases two executors to one task id at once), applies the worker's
``task.write.timeout.ms`` when a sink passes no deadline, remembers every executor pid that wrote
for the incarnation (the stop sequence checks each is gone), and refuses new writes once the
incarnation is being killed: a zombie cannot start a write. With ``metrics``, every successful
call records its rows and duration (``record_written``) and every executor the pool killed under
this binding is counted: ``write deadline`` (``WriteTimeout``) and ``write cancelled`` (a write
cancelled while an executor ran it, e.g. by a callback deadline). A kill by the stop sequence
(the binding is closed first) is counted by the slot as ``task stop``, not here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from daemon.errors import PoolClosed, WriteTimeout
from daemon.executor.process import ProcStat, read_stat

if TYPE_CHECKING:
    import pyarrow as pa

    from daemon.executor.info import ExecutorInfo, PoolStatus


class Executors(Protocol):
    """What the runtime needs of an executor pool (``ExecutorPool`` fits, and so does the test
    suite's ``ThreadedPool``). Cancelling ``run`` kills the write's executor tree and returns
    only after it is reaped."""

    async def run(
        self,
        task_id: str,
        fn: str,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
    ) -> Any: ...

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
    ) -> None:
        self.executors = executors
        self.task_id = task_id
        self.default_timeout = default_timeout
        self.metrics = metrics
        self._labels = task_labels(task_id)
        #: Executor processes that wrote for this incarnation (pid → stat at first sight).
        self.seen: dict[int, ProcStat] = {}
        self._closed: str | None = None
        self._running = 0

    def close(self, reason: str) -> None:
        """Refuse writes from now on (the incarnation is being killed, or is over)."""
        self._closed = reason

    @property
    def busy(self) -> bool:
        return self._running > 0

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        """``fn`` in an executor under ``timeout`` seconds (the worker's write timeout when
        ``timeout`` is 0 or less)."""
        if self._closed is not None:
            raise PoolClosed(f"task {self.task_id}: no more writes ({self._closed})")
        deadline = timeout if timeout > 0 else self.default_timeout
        self._running += 1
        leased: list[int] = []  # the executor that took this call, once the watch saw it
        watch = asyncio.get_running_loop().create_task(self._watch(leased))
        began = time.monotonic()
        try:
            result = await self.executors.run(
                self.task_id, fn, batch, timeout=deadline, kwargs=kwargs
            )
        except WriteTimeout:
            self._killed("write deadline")
            raise
        except asyncio.CancelledError:
            # The pool kills the executor of a cancelled write; not yet leased, nothing to kill.
            if (leased or self.current_pid() is not None) and self._closed is None:
                self._killed("write cancelled")
            raise
        finally:
            self._running -= 1
            watch.cancel()
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

    def note_pid(self) -> None:
        """Record the executor writing for the task now (cheap: one /proc read)."""
        pid = self.current_pid()
        if pid is not None and pid not in self.seen:
            stat = read_stat(pid)
            if stat is not None:
                self.seen[pid] = stat

    async def _watch(self, leased: list[int]) -> None:
        # The pool leases an executor a moment after the call: record it once it is known.
        for _ in range(200):
            self.note_pid()
            pid = self.current_pid()
            if pid is not None:
                leased.append(pid)
                return
            await asyncio.sleep(0.05)
