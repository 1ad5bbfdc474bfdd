"""One executor process as the pool sees it: spawn, messages, exit watch, termination.

Nothing here blocks the event loop. The control socket and a pidfd of the process are watched
with ``loop.add_reader`` (works the same under uvloop); ``waitpid`` runs with WNOHANG once the
pidfd says the process ended. Killing the tree runs in a thread (``process.kill_tree``). From
the moment ``terminate()`` is called, that thread alone waits for the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from daemon.executor import process, protocol
from daemon.executor.info import ExecutorInfo, ExecutorState
from daemon.executor.process import KillReport, ProcStat

#: After the pidfd says "exited" (or the socket says EOF), how long to wait for the other
#: signal, so a last message still in the socket is read before the exit is acted on.
_EXIT_GRACE = 1.0


class ExecutorProcess:
    """The parent's side of one executor. The pool owns the state transitions."""

    def __init__(
        self,
        ident: int,
        pid: int,
        sock: socket.socket,
        *,
        work_dir: Path,
        uses_cds: bool,
        formats: frozenset[str] = frozenset(),
        spark: bool = True,
        on_message: Callable[[ExecutorProcess, protocol.Message], None],
        on_exit: Callable[[ExecutorProcess], None],
    ) -> None:
        self.ident = ident
        self.pid = pid
        self.work_dir = work_dir
        self.uses_cds = uses_cds
        #: The table formats its session loaded (``formats.py``).
        self.formats = formats
        #: It opens a SparkSession (False: a Python process with pyarrow only).
        self.spark = spark
        self.state = ExecutorState.STARTING
        self.task_id: str | None = None
        self.seq: int | None = None
        self.writes_done = 0
        self.last_write_seconds: float | None = None
        self.started_at = time.time()
        self.started_mono = time.monotonic()
        self.startup_seconds: float | None = None
        self.java_pid: int | None = None
        self.last_heartbeat = time.monotonic()
        self.tree: dict[int, ProcStat] = {}
        self.rss_bytes: int | None = None
        self.exit_status: int | None = None
        self.reason: str | None = None  # why it is being killed / how it died
        self._on_message = on_message
        self._on_exit = on_exit
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._frames = protocol.FrameBuffer()
        self._pidfd = os.pidfd_open(pid)
        self._eof = False
        self._exit_reported = False
        self._grace: asyncio.TimerHandle | None = None
        self._terminating: asyncio.Task[KillReport] | None = None
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._on_readable)
        self._loop.add_reader(self._pidfd, self._on_pidfd)

    @classmethod
    def spawn(
        cls,
        ident: int,
        start: protocol.Start,
        *,
        env: Mapping[str, str],
        work_dir: Path,
        uses_cds: bool,
        formats: frozenset[str] = frozenset(),
        output_fd: int | None,
        on_message: Callable[[ExecutorProcess, protocol.Message], None],
        on_exit: Callable[[ExecutorProcess], None],
        argv_extra: tuple[str, ...] = (),
    ) -> ExecutorProcess:
        """Start an executor (``python -m daemon.executor.child``) and send it ``start``."""
        work_dir.mkdir(parents=True, exist_ok=True)
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            child_env = dict(env)
            child_env["CONNECTD_PARENT_PID"] = str(os.getpid())
            child_env["TMPDIR"] = str(work_dir)
            if "spark.local.dir" not in start.conf:
                # Spark's scratch in a directory the pool deletes after the reap (the env
                # variable, unlike spark.local.dir, draws no warning in local mode).
                child_env["SPARK_LOCAL_DIRS"] = str(work_dir / "spark")
            pid = process.spawn(
                [sys.executable, "-m", "daemon.executor.child", *argv_extra],
                child_env,
                pass_fd=child_sock.fileno(),
                output_fd=output_fd,
            )
        except BaseException:
            parent_sock.close()
            shutil.rmtree(work_dir, ignore_errors=True)
            raise
        finally:
            child_sock.close()
        # The Start frame fits the empty socket buffer; send it before going non-blocking.
        with contextlib.suppress(OSError):
            protocol.send_blocking(parent_sock, start)
        return cls(
            ident,
            pid,
            parent_sock,
            work_dir=work_dir,
            uses_cds=uses_cds,
            formats=formats,
            spark=start.with_spark,
            on_message=on_message,
            on_exit=on_exit,
        )

    # -- messages ---------------------------------------------------------------------------

    def send(self, msg: protocol.Message) -> None:
        """Send one (small) message; raises ``OSError`` if the executor cannot take it."""
        frame = protocol.encode(msg)
        sent = self._sock.send(frame)
        if sent != len(frame):
            # The child is not draining its socket: it is as good as hung.
            raise BlockingIOError(f"executor {self.pid} is not reading its control socket")

    def _on_readable(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._loop.remove_reader(self._sock.fileno())
                self._eof = True
                self._exit_signal()
                return
            try:
                messages = self._frames.feed(data)
            except Exception as exc:  # a corrupt stream: treat the executor as broken
                self.reason = f"sent a corrupt frame: {exc}"
                self._loop.remove_reader(self._sock.fileno())
                self._eof = True
                self._exit_signal()
                return
            for msg in messages:
                if isinstance(msg, protocol.Heartbeat | protocol.Ready):
                    self.last_heartbeat = time.monotonic()
                self._on_message(self, msg)

    # -- exit detection ---------------------------------------------------------------------

    def _on_pidfd(self) -> None:
        self._loop.remove_reader(self._pidfd)
        status = process.try_reap(self.pid)
        if status is not None:
            self.exit_status = status
        self._exit_signal()

    def _exit_signal(self) -> None:
        exited = self.exit_status is not None
        if self._exit_reported or self._terminating is not None:
            return
        if exited and self._eof:
            self._report_exit()
        elif self._grace is None:
            self._grace = self._loop.call_later(_EXIT_GRACE, self._report_exit)

    def _report_exit(self) -> None:
        if self._exit_reported or self._terminating is not None:
            return
        self._exit_reported = True
        if self._grace is not None:
            self._grace.cancel()
        self._on_exit(self)

    @property
    def exited(self) -> bool:
        """The process itself (the leader) has been reaped."""
        return self.exit_status is not None

    def exit_description(self) -> str:
        if self.exit_status is not None:
            return process.describe_status(self.exit_status)
        return "closed its control socket"

    # -- termination ------------------------------------------------------------------------

    def terminate(self, threads: ThreadPoolExecutor, timeout: float) -> asyncio.Task[KillReport]:
        """Kill the whole tree, reap, confirm, remove the scratch directory. Idempotent: every
        caller gets the same task. Runs to completion even if its awaiters are cancelled."""
        if self._terminating is None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._pidfd)
            if not self._eof:
                with contextlib.suppress(ValueError, OSError):
                    self._loop.remove_reader(self._sock.fileno())
            if self._grace is not None:
                self._grace.cancel()
            self._terminating = self._loop.create_task(self._terminate(threads, timeout))
        return self._terminating

    @property
    def terminating(self) -> bool:
        return self._terminating is not None

    async def _terminate(self, threads: ThreadPoolExecutor, timeout: float) -> KillReport:
        if self.exit_status is None:
            # The pidfd may have fired without its callback having run yet.
            status = process.try_reap(self.pid)
            if status is not None:
                self.exit_status = status
        kill = partial(
            process.kill_tree,
            self.pid,
            reap_leader=self.exit_status is None,
            session=self.pid,
            known=tuple(self.tree.values()),
            timeout=timeout,
        )
        try:
            report = await self._loop.run_in_executor(threads, kill)
        finally:
            self._sock.close()
            os.close(self._pidfd)
        if report.leader_status is not None:
            self.exit_status = report.leader_status
        await self._loop.run_in_executor(
            threads, partial(shutil.rmtree, self.work_dir, ignore_errors=True)
        )
        return report

    # -- observability ----------------------------------------------------------------------

    def update_tree(self, procs: Mapping[int, ProcStat]) -> None:
        if self.terminating or self.exited:
            return
        members = process.tree(self.pid, procs, session=self.pid)
        if members:
            self.tree = members
            self.rss_bytes = sum(s.rss_bytes for s in members.values())

    def info(self) -> ExecutorInfo:
        return ExecutorInfo(
            id=self.ident,
            pid=self.pid,
            state=self.state,
            task_id=self.task_id,
            writes_done=self.writes_done,
            last_write_seconds=self.last_write_seconds,
            rss_bytes=self.rss_bytes,
            tree_pids=tuple(sorted(self.tree)),
            java_pid=self.java_pid,
            started_at=self.started_at,
            startup_seconds=self.startup_seconds,
            uses_cds=self.uses_cds,
            formats=self.formats,
            spark=self.spark,
            reason=self.reason,
        )
