"""Keeping one pool's class-data-sharing archive: built in the background once the pool is warm,
replaced once when an executor's JVM rejects it, given up when the replacement is rejected too
or when it breaks an executor's start (``cds.py`` has the JDK's side: where the archive lives,
how a JVM uses it, how a builder dumps it).

``ArchiveKeeper`` is held by the ``Supervisor``; it hears from it when an executor is ready or
failed to start, and reads back from it only what ``ArchiveOwner`` names. It owns the builder
(a process of its own, started with its own callbacks: the supervisor never sees it) and the
task that runs the build, and ends both in ``stop``. Nothing here may fail an executor's start:
without an archive, executors start the slow way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from daemon.executor import cds
from daemon.executor.handle import ExecutorProcess
from daemon.executor.launch import Launcher
from daemon.executor.settings import PoolSettings

log = logging.getLogger("connectd.executor")


class ArchiveOwner(Protocol):
    """What the archive keeper reads from the supervisor that holds it (on the event loop)."""

    @property
    def closed(self) -> bool:
        """The pool is closing: no build starts any more."""

    def all_ready(self) -> bool:
        """Every executor the pool keeps is ready: a build now competes with no JVM start."""


class ArchiveKeeper:
    """The archive of one pool's executors (see the module docstring)."""

    def __init__(
        self,
        settings: PoolSettings,
        launcher: Launcher,
        threads: ThreadPoolExecutor,
        owner: ArchiveOwner,
    ) -> None:
        self.settings = settings
        self._launcher = launcher
        self._threads = threads
        self._owner = owner
        self._builder: ExecutorProcess | None = None
        self._build: asyncio.Task[None] | None = None
        self._build_requested = False
        self._rejections = cds.Rejections()

    # -- what the supervisor tells it ----------------------------------------------------------

    def executor_ready(self, ex: ExecutorProcess, mapped: bool | None) -> None:
        """``ex``'s session is up; ``mapped``: whether its JVM mapped the archive it was given
        (None when that could not be read). An executor that started without an archive asks
        for one to be built."""
        if not ex.spark:
            return  # no JVM: nothing to build an archive for yet
        if ex.uses_cds and mapped is False:
            self._rejected(ex)
        if self._launcher.cds is not None and not ex.uses_cds:
            self._maybe_build()

    def start_failed(self, ex: ExecutorProcess) -> None:
        """``ex`` exited during its start-up: if it was given the archive, executors start
        without one from now on (a bad archive never keeps executors from starting)."""
        if self._launcher.cds is not None and ex.uses_cds:
            self._launcher.cds_off = True

    # -- what it shows -------------------------------------------------------------------------

    def in_use(self) -> str | None:
        """The archive new executors are given, if any."""
        plan = self._launcher.cds
        if plan is None or self._launcher.cds_off or not plan.ready():
            return None
        return str(plan.archive)

    def pids(self) -> list[int]:
        """The builder's pid while it runs (its JVM is its descendant)."""
        if self._builder is not None and not self._builder.exited:
            return [self._builder.pid]
        return []

    # -- building ------------------------------------------------------------------------------

    async def build_now(self) -> Path | None:
        """Build the archive now if it is missing (waits for the build); the archive's path,
        or None when there is none (no JDK found, disabled, failed)."""
        plan = self._launcher.cds
        if plan is None or self._launcher.cds_off:
            return None
        if not plan.auto:
            await self._build_archive(plan)
        return plan.archive if plan.ready() else None

    def _rejected(self, ex: ExecutorProcess) -> None:
        """``ex``'s JVM was given the archive and started without it: ``cds.Rejections``."""
        ex.uses_cds = False
        plan = self._launcher.cds
        if plan is None or self._launcher.cds_off or plan.auto:
            return  # JDK 19+: the JVM writes a new archive itself at its exit
        action = self._rejections.rejected(ex.started_mono, self.settings.cds_build)
        if action == cds.Rejections.REPLACE:
            log.warning(
                "executor %d's JVM rejected the class-data-sharing archive %s (built for other"
                " jars or another JDK?) and started without it; replacing the archive",
                ex.ident,
                plan.archive,
            )
            self._build_requested = False  # ``_maybe_build`` builds the replacement
        elif action == cds.Rejections.GIVE_UP:
            self._launcher.cds_off = True
            log.warning(
                "executor %d's JVM rejected the %sclass-data-sharing archive %s; executors start"
                " without an archive from now on",
                ex.ident,
                "rebuilt " if self._rejections.replaced_at is not None else "",
                plan.archive,
            )

    def _maybe_build(self) -> None:
        plan = self._launcher.cds
        if plan is None or plan.auto or not self.settings.cds_build:
            return
        if self._build_requested or self._owner.closed:
            return
        if not self._owner.all_ready():
            return  # build once the pool is warm, not while executors compete for the CPU
        self._build_requested = True
        self._build = asyncio.get_running_loop().create_task(self._build_archive(plan))

    async def _build_archive(self, plan: cds.CdsPlan) -> None:
        loop = asyncio.get_running_loop()
        if self._rejections.pending:
            await loop.run_in_executor(self._threads, plan.discard)

        def start_builder(output: Path, exited: asyncio.Event) -> ExecutorProcess:
            self._builder = self._launcher.spawn(
                0, lambda ex, msg: None, lambda ex: exited.set(), archive_out=output
            )
            return self._builder

        built = await cds.build(
            plan,
            start_builder,
            threads=self._threads,
            timeout=self.settings.cds_build_timeout,
            kill_timeout=self.settings.kill_timeout,
        )
        if built:
            self._rejections.built(time.monotonic())

    # -- shutdown ------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Cancel a build in progress and kill the builder; returns once it is reaped."""
        waits: list[asyncio.Future[Any]] = []
        if self._builder is not None:
            waits.append(self._builder.terminate(self._threads, self.settings.kill_timeout))
        if self._build is not None:
            self._build.cancel()
            waits.append(self._build)
        await asyncio.gather(*waits, return_exceptions=True)
