"""One executor pool's start, begun by whichever comes first: ``ExecutorPool.start`` (a daemon
with ``executor.pool.start=eager``), ``begin`` (a task of a connector that needs executors, under
``auto``) or the first write (``ExecutorPool.submit``, whatever the setting).

There is one start at a time: all of them share it. A start that failed (a table format's jars
missing, the scratch directories not writable) is not kept: the next caller starts again and
meets the error itself. A write waits for the start under its own acquire deadline, as it then
waits for a free executor: its write deadline only starts when an executor acknowledges it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from daemon.errors import ExecutorStartFailed, ExecutorUnavailable, PoolClosed

log = logging.getLogger("connectd.executor")


class Startable(Protocol):
    """What a start needs of the supervisor it starts (on the event loop)."""

    @property
    def started(self) -> bool:
        """It started: it takes writes, its executors exist or are starting."""

    @property
    def closed(self) -> bool:
        """Its pool closed (a start then cleans up after itself and starts nothing)."""

    @property
    def replacing(self) -> bool:
        """False once its owner shuts down: no executor would be started."""

    async def start(self) -> None:
        """Prepare (in a thread) and start the executors in the background."""


class Startup:
    """The start of one pool (see the module docstring)."""

    def __init__(self, sup: Startable) -> None:
        self._sup = sup
        self._task: asyncio.Task[None] | None = None

    def task(self) -> asyncio.Task[None]:
        """The start, begun now unless one is running or succeeded."""
        task = self._task
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._task = asyncio.get_running_loop().create_task(self._sup.start())
            # Its failure is raised to whoever awaits it; a write that gave up waiting does not.
            task.add_done_callback(_retrieve)
        return task

    def begin(self) -> None:
        """Start in the background, from the event loop; nothing if the pool started, is
        starting or shuts down. A failure is logged (the next write meets it again)."""
        if self._sup.started or self._sup.closed or not self._sup.replacing:
            return
        if self._task is None or self._task.done():
            self.task().add_done_callback(_log_failure)

    async def wait(self, deadline: float, task_id: str) -> None:
        """The start, for ``task_id``'s write submitted before it, until ``deadline`` (loop
        time): ``ExecutorUnavailable`` past it, ``ExecutorStartFailed`` if the start could not
        prepare its directories, ``PoolClosed`` if the pool closed meanwhile; what else the
        start raised (``JarsMissing``: a configuration error) as it is."""
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(self.task())
        except TimeoutError:
            raise ExecutorUnavailable(
                f"task {task_id}: the executor pool did not start in time"
            ) from None
        except OSError as exc:
            raise ExecutorStartFailed(
                f"task {task_id}: the executor pool could not start: {exc}"
            ) from exc
        if not self._sup.started:
            raise PoolClosed("the executor pool closed while it was starting")

    async def settled(self) -> None:
        """Until a start in progress has ended (how it ended is its callers' business)."""
        if self._task is not None:
            await asyncio.wait([self._task])


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("executor pool: the start failed: %s", task.exception())
