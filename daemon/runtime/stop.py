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
from daemon.runtime.task import Incarnation

log = logging.getLogger("connectd.stop")


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
    inc: Incarnation, *, graceful_timeout: float, kill_timeout: float, reason: str
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
        await _confirm_released(inc, None, kill_timeout)
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
        raise StopFailed(
            f"task {task} (epoch {inc.epoch}) did not end within {kill_timeout:g} s after it was"
            " cancelled (a callback that swallows cancellation, or a blocked event loop);"
            " no new incarnation is started while it may still run"
        ) from None
    leader = members.get(pid) if pid is not None else None
    await _confirm_released(inc, leader, kill_timeout - (time.monotonic() - killed_at))
    report = StopReport(
        task,
        inc.epoch,
        False,
        time.monotonic() - started,
        killed_pid=pid,
        tree=tuple(sorted(members)),
        reap_seconds=time.monotonic() - killed_at,
    )
    log.warning(report.describe(graceful_timeout))
    return report


async def _confirm_released(inc: Incarnation, leader: ProcStat | None, budget: float) -> None:
    """Step 4: the pool holds no executor for the task id, and ``leader`` (the executor that
    was writing when the kill came) no longer runs, as /proc shows."""
    deadline = time.monotonic() + max(budget, 0.5)
    while True:
        holder = inc.binding.current_pid()
        alive = leader is not None and await asyncio.to_thread(still_running, leader)
        if holder is None and not alive:
            return
        if time.monotonic() >= deadline:
            what = []
            if holder is not None:
                what.append(f"the pool still has executor pid {holder} writing for it")
            if alive and leader is not None:
                stat = read_stat(leader.pid)
                what.append(f"executor pid {leader.pid} still runs (state {stat and stat.state})")
            raise StopFailed(
                f"task {inc.id} (epoch {inc.epoch}) could not be reaped: {'; '.join(what)};"
                " no new incarnation is started while it may still write"
            )
        await asyncio.sleep(0.02)
