"""A benchmarked process and its whole tree: launch, sample CPU and RSS, stop by PID, reap.

The bench makes itself a child subreaper first (``become_subreaper``): a process of the tree
whose parent exits (a JVM after its Python driver, PySpark's workers after their daemon) is
re-parented to the bench instead of init, so it stays in the sampled tree, is reaped here and
its CPU time reaches ``RUSAGE_CHILDREN``. One tree runs at a time: every child of the bench
belongs to it.

CPU seconds are the larger of two lower bounds of the truth:
- ``RUSAGE_CHILDREN`` of the bench, after against before: every process of the tree that was
  waited for by its parent (and that parent by its own, up to the bench), to the last tick;
- the samples: the sum of each process's last seen user+system time (short of what it spent
  between its last sample and its exit; a process that lived between two samples is missed).
The children counters of the sampled processes are not added to the second: a process is often
reaped by another than its parent when it was last sampled (an executor's JVM by the daemon, a
subreaper, after the executor's Python child died), so they cannot be told apart from time
already counted. They reach the first bound instead, through the chain of waits up to the bench.
With a Spark cluster on this machine, the applications' executor JVMs are the cluster workers'
children, not the tree's: ``outside`` names those workers, and their descendants are sampled with
the tree (their CPU is the samples' only: no wait of theirs reaches the bench) and counted apart.
Peak RSS is the largest sum of the tree's RSS over the samples (shared pages count once per
process, as ``ps`` shows them), leaving out a child caught between fork and exec (below).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

PR_SET_CHILD_SUBREAPER = 36
SAMPLE_S = 0.15

Key = tuple[int, float]  # (pid, create_time): a pid alone may be reused


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass
class _Seen:
    ppid: int
    cmd: str
    own: float = 0.0  # user + system of the process itself
    rss_peak: int = 0
    outside: bool = False  # a descendant of one of ``Tree.outside``


@dataclass
class TreeStats:
    cpu_s: float
    cpu_sampled_s: float
    cpu_rusage_s: float
    cpu_outside_s: float
    peak_rss_mb: float
    processes: int
    samples: int
    by_process: list[dict[str, object]]


@dataclass
class Tree:
    """One benchmarked command, started in a session of its own, with a sampler thread."""

    argv: Sequence[str]
    log_path: Path
    cwd: Path | None = None
    env: dict[str, str] | None = None
    #: Processes outside the tree whose descendants work for it (a Spark cluster's workers).
    outside: Sequence[int] = ()
    #: The bench's own long-lived children that serve the run (a Schema Registry): not part of
    #: the tree, neither sampled nor stopped with it.
    others: Sequence[int] = ()
    started: float = 0.0  # time.time() at launch
    proc: subprocess.Popen[bytes] | None = None
    returncode: int | None = None
    _seen: dict[Key, _Seen] = field(default_factory=dict)
    _peak_rss: int = 0
    _samples: int = 0
    _cpu0: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Descendants of ``outside`` already running at launch (an earlier run's executor on its
    #: way out): not this run's.
    _before: set[Key] = field(default_factory=set)

    def launch(self) -> None:
        self._cpu0 = _children_cpu()
        for p, outside in self._members(psutil.Process()):
            if outside:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
                    self._before.add((p.pid, p.create_time()))
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child holds it; closed below
        try:
            self.started = time.time()
            self.proc = subprocess.Popen(
                list(self.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        finally:
            log.close()
        self._thread = threading.Thread(target=self._sample_loop, name="tree-sampler", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        self._reap()
        return self.returncode is None

    # --- sampling ---------------------------------------------------------------------------

    def _sample_loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            self._sample(me)
            self._stop.wait(SAMPLE_S)

    def _sample(self, me: psutil.Process) -> None:
        now: dict[int, tuple[list[str], float, int, int]] = {}  # pid -> (argv, cpu, rss, ppid)
        for p, outside in self._members(me):
            try:
                with p.oneshot():
                    key = (p.pid, p.create_time())
                    if key in self._before:
                        continue
                    t = p.cpu_times()
                    mem = p.memory_info().rss
                    ppid = p.ppid()
                    argv = p.cmdline()  # every time: spark-class execs java under the same pid
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            now[p.pid] = (argv, t.user + t.system, mem, ppid)
            with self._lock:
                s = self._seen.get(key)
                if s is None:
                    s = self._seen[key] = _Seen(ppid=ppid, cmd="", outside=outside)
                s.ppid = ppid
                s.cmd = " ".join(argv[:3])[:120] or s.cmd  # an exiting process has none
                s.own = t.user + t.system
                s.rss_peak = max(s.rss_peak, mem)
        # A child caught between fork and exec, still running its parent's program with no CPU
        # time of its own, reports its parent's pages as its RSS (a JVM starting a shell
        # command through jspawnhelper showed 350-830 MB for an instant): it is left out.
        rss = 0
        for argv, cpu, mem, ppid in now.values():
            parent = now.get(ppid)
            if parent is not None and cpu == 0 and parent[0] == argv:
                continue
            rss += mem
        with self._lock:
            self._peak_rss = max(self._peak_rss, rss)
            self._samples += 1

    def _children(self, me: psutil.Process) -> list[psutil.Process]:
        """The bench's descendants but ``others`` and theirs."""
        skip = set(self.others)
        for pid in self.others:
            with contextlib.suppress(psutil.NoSuchProcess):
                skip.update(p.pid for p in psutil.Process(pid).children(recursive=True))
        return [p for p in me.children(recursive=True) if p.pid not in skip]

    def _members(self, me: psutil.Process) -> list[tuple[psutil.Process, bool]]:
        out = [(p, False) for p in self._children(me)]
        for pid in self.outside:
            try:
                out += [(p, True) for p in psutil.Process(pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return out

    # --- stopping ---------------------------------------------------------------------------

    def _reap(self) -> None:
        """Reap every exited child of the bench (the root and orphans of the tree)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.proc is not None and pid == self.proc.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self.proc.returncode = self.returncode  # Popen must not wait for it again

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                return True
            time.sleep(0.05)
        return not self.alive()

    def stop(self, grace_s: float) -> list[str]:
        """SIGTERM the root by PID, SIGKILL it past ``grace_s``; then wait for the rest of the
        tree (it dies with its root) and SIGKILL, by PID, whatever remains after 10 s.
        Returns what had to be killed that way (empty: nothing outlived the root)."""
        notes: list[str] = []
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            if not self.wait(grace_s):
                notes.append(f"root {self.pid} ignored SIGTERM for {grace_s:.0f} s: SIGKILL")
                os.kill(self.pid, signal.SIGKILL)
                self.wait(10)
        me = psutil.Process()
        deadline = time.monotonic() + 10
        while (rest := self._children(me)) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for p in self._children(me):
            try:
                notes.append(f"left running: {p.pid} {' '.join(p.cmdline()[:3])}; SIGKILL")
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        deadline = time.monotonic() + 10
        while (rest := self._children(me)) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        self._reap()
        if rest:
            notes.append(f"still running after SIGKILL: {[p.pid for p in rest]}")
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return notes

    def stats(self) -> TreeStats:
        with self._lock:
            seen = dict(self._seen)
        sampled = sum(s.own for s in seen.values() if not s.outside)
        outside = sum(s.own for s in seen.values() if s.outside)
        rusage = _children_cpu() - self._cpu0
        return TreeStats(
            cpu_s=max(sampled, rusage) + outside,
            cpu_sampled_s=sampled,
            cpu_rusage_s=rusage,
            cpu_outside_s=outside,
            peak_rss_mb=self._peak_rss / 2**20,
            processes=len(seen),
            samples=self._samples,
            by_process=[
                {
                    "pid": k[0],
                    "ppid": s.ppid,
                    "cmd": s.cmd,
                    "cpu_s": round(s.own, 2),
                    "outside": s.outside,
                    "rss_peak_mb": round(s.rss_peak / 2**20),
                }
                for k, s in sorted(seen.items(), key=lambda kv: -kv[1].own)
            ],
        )
