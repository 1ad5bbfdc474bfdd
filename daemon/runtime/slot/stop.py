"""THE stop sequence. Every path that ends a task incarnation comes here: a REST restart, pause to
stop, a config change, deletion, a rebalance of the worker's connectors, daemon shutdown.

1. ask: the incarnation stops taking records; a poll or a backoff is interrupted; a callback
   in progress may finish, then the close path runs (``pre_commit`` with ``is_closing``,
   ``close`` of its partitions, ``stop``);
2. wait up to ``task.shutdown.graceful.timeout.ms`` for the coroutine to end;
3. kill: cancel the coroutine and its rebalance callbacks. Cancelling an executor write kills
   the executor's whole process tree and returns only once it is reaped (the pool's guarantee);
4. reap: confirm through /proc that the executor that was writing for the task is gone and that
   the pool holds no executor for the task id any more. If that cannot be confirmed within the
   kill deadline, ``StopFailed`` is raised and the caller must NOT start a new incarnation;
5. only then is the task id free for a new incarnation (with a new, larger epoch).

The log says what happened, truthfully: whether the stop was graceful, which executor was
killed with which process tree, and how long the reap took.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from daemon.errors import StopFailed
from daemon.executor.process import ProcStat, read_stat, scan, still_running, tree
from daemon.runtime.incarnation.incarnation import Incarnation

log = logging.getLogger("connectd.stop")


class ReapUnconfirmed(StopFailed):
    """``StopFailed`` that remembers the executor it could not confirm gone (``suspect``: its
    /proc entry when the kill came), so that a later attempt checks that very process again
    even when the pool no longer tracks it."""

    def __init__(self, message: str, suspect: ProcStat | None) -> None:
        super().__init__(message)
        self.suspect = suspect


@dataclass(frozen=True)
class StopReport:
    """What one run of the stop sequence did."""

    task: str
    epoch: int
    graceful: bool
    seconds: float
    killed_pid: int | None = None
    tree: tuple[int, ...] = ()
    reap_seconds: float | None = None

    def describe(self, graceful_timeout: float) -> str:
        if self.graceful:
            return (
                f"Task {self.task} (epoch {self.epoch}) stopped gracefully in {self.seconds:.2f} s"
            )
        head = (
            f"Graceful stop of task {self.task} (epoch {self.epoch}) timed out after"
            f" {graceful_timeout * 1000:.0f} ms; "
        )
        if self.killed_pid is None:
            return head + "cancelled it (no executor was writing for it)"
        return (
            head + f"killed executor pid {self.killed_pid} (tree: {list(self.tree)}),"
            f" reaped in {self.reap_seconds or 0.0:.2f} s"
        )


def _walk(pid: int) -> dict[int, ProcStat]:
    procs = scan()
    root = procs.get(pid)
    session = pid if root is not None and root.sid == pid else None
    return tree(pid, procs, session=session)


async def stop_incarnation(
    inc: Incarnation,
    *,
    graceful_timeout: float,
    kill_timeout: float,
    reason: str,
    suspect: ProcStat | None = None,
) -> StopReport:
    """Run the stop sequence on ``inc``; returns once its executor is reaped.

    The invariant enforced here: the task id is free for a new incarnation only once this has
    returned. By then the incarnation's coroutine has ended; the executor that held its write,
    if any, was SIGKILLed with its whole process tree and reaped by the pool (``waitpid``
    returned, and ``kill_tree`` waited until no process of the tree ran); and this function has
    confirmed that the pool holds no executor for the task id any more and, through /proc, that
    the executor it saw writing is gone. If that cannot be confirmed within ``kill_timeout``
    after the kill, it raises ``StopFailed`` and the caller must not start a new incarnation
    (``TaskSlot._restart`` does not). Safe to call on an incarnation that already ended.

    ``suspect`` is the executor an earlier attempt could not confirm gone
    (``ReapUnconfirmed.suspect``): this attempt succeeds only once that process, too, is gone.
    """
    started = time.monotonic()
    task = str(inc.id)
    if not inc.done:
        log.info("Stopping task %s (epoch %d): %s", task, inc.epoch, reason)
    inc.ask()
    try:
        async with asyncio.timeout(graceful_timeout):
            await inc.wait()
    except TimeoutError:
        pass
    if inc.done:
        await _confirm_released(inc, [suspect], kill_timeout)
        report = StopReport(task, inc.epoch, True, time.monotonic() - started)
        if inc.failure is None:
            log.info(report.describe(graceful_timeout))
        return report

    pid = inc.binding.current_pid()
    members: dict[int, ProcStat] = {}
    if pid is not None:
        members = await asyncio.to_thread(_walk, pid)
    killed_at = time.monotonic()
    inc.kill(f"graceful stop timed out ({reason})")
    try:
        async with asyncio.timeout(kill_timeout):
            await inc.wait()
    except TimeoutError:
        writing = (
            f"; executor pid {pid} was writing for it and is not confirmed reaped"
            if pid is not None
            else ""
        )
        raise ReapUnconfirmed(
            f"task {task} (epoch {inc.epoch}) did not end within {kill_timeout:g} s after it was"
            " cancelled (a callback that swallows cancellation, a blocked event loop, or a kill"
            f" that does not finish){writing}; no new incarnation is started while it may still"
            " run",
            _leader(members, pid, suspect),
        ) from None
    leader = _leader(members, pid, suspect)
    await _confirm_released(inc, [leader, suspect], kill_timeout - (time.monotonic() - killed_at))
    # The write seen at the deadline may have ended with its outcome in the instant before the
    # kill: its executor went back to the pool, alive and rightly so, and nothing was killed.
    finished = pid is not None and inc.binding.released(pid)
    report = StopReport(
        task,
        inc.epoch,
        False,
        time.monotonic() - started,
        killed_pid=None if finished else pid,
        tree=() if finished else tuple(sorted(members)),
        reap_seconds=None if finished else time.monotonic() - killed_at,
    )
    log.warning(report.describe(graceful_timeout))
    return report


def suspect_of(failure: StopFailed | None) -> ProcStat | None:
    """The executor an earlier ``StopFailed`` could not confirm gone, if it names one."""
    return failure.suspect if isinstance(failure, ReapUnconfirmed) else None


def _leader(
    members: dict[int, ProcStat], pid: int | None, suspect: ProcStat | None
) -> ProcStat | None:
    """The executor to confirm gone: the one writing when the kill came, else the suspect."""
    leader = members.get(pid) if pid is not None else None
    return leader if leader is not None else suspect


def _running(stats: list[ProcStat | None]) -> list[ProcStat]:
    """Those of ``stats`` that still run (same pid and start time, not a zombie)."""
    return [s for s in dict.fromkeys(stats) if s is not None and still_running(s)]


async def _confirm_released(
    inc: Incarnation, executors: list[ProcStat | None], budget: float
) -> None:
    """Step 4: the pool holds no executor for the task id, and none of ``executors`` (the one
    writing when the kill came, one an earlier attempt suspected) runs, as /proc shows.

    A zombie counts as ended: it runs nothing and holds no memory. The pool waits for its
    executors (``waitpid``) before it lets the task id go, which the holder check covers.

    So does an executor the pool has taken back (idle, or writing for another task): the write
    it did for this task ended with its outcome reported, in the instant between the deadline
    that named it and the kill. Waiting for it to die would wait forever."""
    deadline = time.monotonic() + max(budget, 0.5)
    while True:
        holder = inc.binding.current_pid()
        running = await asyncio.to_thread(_running, executors)
        alive = [s for s in running if not inc.binding.released(s.pid)]
        if holder is None and not alive:
            return
        if time.monotonic() >= deadline:
            what = []
            if holder is not None:
                what.append(f"the pool still has executor pid {holder} writing for it")
            for stat in alive:
                now = read_stat(stat.pid)
                what.append(f"executor pid {stat.pid} still runs (state {now and now.state})")
            # Who a later attempt must find gone, even if the pool lets go of it meanwhile.
            held = read_stat(holder) if holder is not None else None
            suspect = next(iter(alive), held or next((s for s in executors if s), None))
            raise ReapUnconfirmed(
                f"task {inc.id} (epoch {inc.epoch}) could not be reaped: {'; '.join(what)};"
                " no new incarnation is started while it may still write",
                suspect,
            )
        await asyncio.sleep(0.02)
