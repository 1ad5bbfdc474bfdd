"""When a ParquetSink task cleans its table's commit log up, so the log stays small over months.

The clean-up (``CommitLog.clean_up``) deletes the records no opener needs any more. A task runs
it after its first commit, then at most every ``commit.log.cleanup.interval.ms`` (default
``CLEAN_UP_EVERY``, a minute) after a commit, within ``CLEAN_UP_BUDGET`` seconds, never for a
closing flush:

- a local table's in a thread, in the background; a stop cancels it (a clean-up is safe to stop
  at any instant, the next one goes on);
- a Hadoop table's in the flush job itself (``parquet.jobs.flush`` with ``clean_up_budget``),
  after its commit landed: a job of its own would run under the task's id and hold its one
  write slot, so the next flush, and the closing flush of a rebalance or stop, would wait
  behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from daemon.connectors.parquet.settings import CLEAN_UP_EVERY
from daemon.connectors.parquet.table import TableLog
from daemon.storage.commitlog import CleanUp

log = logging.getLogger("connectd.connectors.parquet")

#: Seconds one clean-up may take (short: a stop cancels it, and its thread ends by it, so the
#: daemon's exit never waits longer).
CLEAN_UP_BUDGET = 5.0


class LogUpkeep:
    """One task's clean-ups of its table's commit log (module docstring)."""

    def __init__(self, table_log: TableLog, task_id: object, every: float = CLEAN_UP_EVERY) -> None:
        self._log = table_log
        self._task_id = task_id
        self._every = every
        self._cleaning: asyncio.Task[None] | None = None
        # The first clean-up comes after the first commit: a task restarted more often than
        # the interval (reloads, rebalances, a daemon restarted often) still cleans up.
        self._cleaned_at = time.monotonic() - every

    def _due(self, closing: bool) -> bool:
        """Whether a clean-up starts now (and if so, the next one only an interval later)."""
        if closing or time.monotonic() - self._cleaned_at < self._every:
            return False
        self._cleaned_at = time.monotonic()
        return True

    def flush_budget(self, closing: bool) -> float:
        """Seconds the next flush job may spend cleaning a Hadoop table's log up (0: none)."""
        if self._log.kind == "local" or not self._due(closing):
            return 0.0
        return CLEAN_UP_BUDGET

    def committed(self, outcome: CleanUp | str | None, closing: bool) -> None:
        """A flush committed: report the clean-up its job ran (Hadoop tables), or start a
        local table's in a thread if one is due."""
        self._report(outcome)
        if self._log.kind != "local" or (self._cleaning is not None and not self._cleaning.done()):
            return
        if self._due(closing):
            self._cleaning = asyncio.create_task(self._clean_up())

    async def stop(self) -> None:
        """Cancel a running clean-up, not waited for to the end: the graceful stop has better
        use for its seconds."""
        cleaning = self._cleaning
        if cleaning is not None and not cleaning.done():
            cleaning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await cleaning

    async def _clean_up(self) -> None:
        try:
            report: CleanUp | str = await self._log.clean_up(CLEAN_UP_BUDGET)
        except Exception as exc:  # the log stays correct; the next run tries again
            report = f"{type(exc).__name__}: {exc}"
        self._report(report)

    def _report(self, outcome: CleanUp | str | None) -> None:
        if isinstance(outcome, str):
            log.warning("%s: commit log clean-up failed: %s", self._task_id, outcome)
        elif outcome is not None and (outcome.records or not outcome.finished):
            log.info("%s: commit log clean-up: %s", self._task_id, outcome)
