"""Process primitives for executors: spawn, parent-death signals, /proc walks, kill and reap.

Everything here is synchronous and Linux-specific. ``kill_tree`` blocks for up to its timeout;
the pool runs it in a thread, never on the event loop.

Why not ``multiprocessing``: its bookkeeping reaps children behind the owner's back, and it
cannot start a child in a new session without a ``preexec_fn``. ``os.posix_spawn`` starts a fresh
interpreter (the ``spawn`` method: nothing of the daemon's memory is inherited) in a new session
atomically, so there is no instant at which the child shares the daemon's process group.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

#: The descriptor number under which a spawned executor finds its end of the control socket.
CHILD_FD = 3

# Signals a spawned child gets back at their default disposition: Python ignores SIGPIPE and
# SIGXFSZ, and an ignored signal stays ignored across exec.
_RESET_SIGNALS = (
    signal.SIGPIPE,
    signal.SIGXFSZ,
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGCHLD,
)


def _prctl(option: int, arg2: int | ctypes.c_void_p = 0) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    arg = arg2 if isinstance(arg2, ctypes.c_void_p) else ctypes.c_ulong(arg2)
    if libc.prctl(option, arg, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when the thread that created it exits.

    Survives ``exec`` (not ``fork``). Callers check ``os.getppid()`` afterwards: if the parent
    died before the call, the signal will never come.
    """
    _prctl(PR_SET_PDEATHSIG, int(sig))


def become_subreaper() -> None:
    """Make this process a child subreaper (``PR_SET_CHILD_SUBREAPER``).

    Orphaned descendants (a JVM whose executor was killed first, PySpark's worker daemon) are
    re-parented to this process instead of to PID 1, so they cannot escape the walk that finds
    them, and the pool can reap them (PID 1 of a container often never does). The daemon calls
    this once at start; it is idempotent.
    """
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def is_subreaper() -> bool:
    """True when this process is a child subreaper."""
    value = ctypes.c_int(0)
    _prctl(PR_GET_CHILD_SUBREAPER, ctypes.c_void_p(ctypes.addressof(value)))
    return value.value != 0


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    pass_fd: int,
    output_fd: int | None = None,
) -> int:
    """Start ``argv`` in a new session with ``pass_fd`` as descriptor ``CHILD_FD``.

    stdin is ``/dev/null``; stdout and stderr go to ``output_fd`` when given, else stdout goes to
    the daemon's stderr (Spark's chatter never lands on the daemon's stdout). Returns the pid;
    the caller owns reaping it.
    """
    # Lift every source above the target numbers first, so no dup2 is a no-op that would
    # leave FD_CLOEXEC set (dup2(3, 3) does not clear it).
    temps: list[int] = []
    try:
        sock_fd = fcntl.fcntl(pass_fd, fcntl.F_DUPFD_CLOEXEC, 10)
        temps.append(sock_fd)
        out_fd = fcntl.fcntl(2 if output_fd is None else output_fd, fcntl.F_DUPFD_CLOEXEC, 10)
        temps.append(out_fd)
        actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_fd, 1),
            (os.POSIX_SPAWN_DUP2, sock_fd, CHILD_FD),
        ]
        if output_fd is not None:
            actions.append((os.POSIX_SPAWN_DUP2, out_fd, 2))
        return os.posix_spawn(
            argv[0],
            list(argv),
            dict(env),
            file_actions=actions,
            setsid=True,
            setsigdef=_RESET_SIGNALS,
            setsigmask=(),
        )
    finally:
        for fd in temps:
            os.close(fd)


def describe_status(status: int) -> str:
    """'exit code 1' or 'killed by signal 9 (SIGKILL)' for a ``waitpid`` status."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "unknown"
    return f"killed by signal {-code} ({name})"


def try_reap(pid: int) -> int | None:
    """``waitpid(pid, WNOHANG)``: the wait status if ``pid`` was our child and has ended."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return status if done == pid else None


@dataclass(frozen=True)
class ProcStat:
    """One line of ``/proc/<pid>/stat``; ``starttime`` tells a pid from its reuse."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int
    sid: int
    starttime: int
    rss_bytes: int

    @property
    def running(self) -> bool:
        """Not a zombie (a zombie runs nothing and holds no memory; only its parent can reap it)."""
        return self.state not in ("Z", "X")


_PAGE = os.sysconf("SC_PAGE_SIZE")


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat line, or None if it does not exist (any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return parse_stat(pid, raw)


def parse_stat(pid: int, raw: str) -> ProcStat:
    """Parse a ``/proc/<pid>/stat`` line."""
    # comm may itself contain spaces and parentheses: it ends at the last ')'.
    head, _, rest = raw.rpartition(")")
    fields = rest.split()
    return ProcStat(
        pid=pid,
        comm=head.partition("(")[2],
        state=fields[0],
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        starttime=int(fields[19]),
        rss_bytes=int(fields[21]) * _PAGE,
    )


def scan() -> dict[int, ProcStat]:
    """Every process visible in /proc."""
    procs: dict[int, ProcStat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None:
                procs[stat.pid] = stat
    return procs


def tree(
    root: int, procs: Mapping[int, ProcStat], *, session: int | None = None
) -> dict[int, ProcStat]:
    """``root`` and its descendants, plus every process of ``session`` (a process that lost its
    parent keeps its session id, so this still finds a dead executor's JVM)."""
    children: dict[int, list[int]] = {}
    for stat in procs.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found: dict[int, ProcStat] = {}
    if session is not None:
        found.update({p: s for p, s in procs.items() if s.sid == session})
    stack = [root, *found]
    while stack:
        pid = stack.pop()
        if pid in procs and pid not in found:
            found[pid] = procs[pid]
        for child in children.get(pid, ()):
            if child not in found:
                stack.append(child)
    return found


def _same(stat: ProcStat) -> bool:
    now = read_stat(stat.pid)
    return now is not None and now.starttime == stat.starttime


def still_running(stat: ProcStat) -> bool:
    """True if the very process ``stat`` describes (same pid and start time) still runs."""
    now = read_stat(stat.pid)
    return now is not None and now.starttime == stat.starttime and now.running


@dataclass(frozen=True)
class KillReport:
    """What ``kill_tree`` did: the processes it killed, and what (if anything) survived."""

    leader: int
    pids: tuple[int, ...]
    leader_status: int | None
    seconds: float
    leftovers: tuple[int, ...] = ()
    foreign_zombies: tuple[int, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return not self.leftovers

    def describe(self) -> str:
        text = f"killed its process tree (PIDs {list(self.pids)}) in {self.seconds:.3f} s"
        if self.leftovers:
            text += f"; STILL RUNNING after the kill: {list(self.leftovers)}"
        return text


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


#: The test seam of ``kill_tree`` (``set_kill_hook``): leader pid -> hook. Empty in production.
_kill_hooks: dict[int, Callable[[], bool]] = {}


def set_kill_hook(leader: int, hook: Callable[[], bool] | None) -> None:
    """TEST SEAM, never used by connectd itself: make ``kill_tree(leader)`` call ``hook()`` in
    its thread before it signals anything (``None`` removes the hook).

    The hook may block: the kill, and so the reap, hangs until the test lets it go. If it
    returns False, nothing is signalled and the report lists ``leader`` as still running: a
    kill that did not take (as for a process stuck in uninterruptible sleep). Tests use it to
    check that nothing starts in the place of an executor whose reap is not confirmed; keyed by
    pid so that it touches no other executor.
    """
    if hook is None:
        _kill_hooks.pop(leader, None)
    else:
        _kill_hooks[leader] = hook


def kill_tree(
    leader: int,
    *,
    reap_leader: bool,
    session: int | None = None,
    known: Iterable[ProcStat] = (),
    timeout: float = 5.0,
) -> KillReport:
    """SIGKILL ``leader``'s whole tree, reap what is ours, and confirm through /proc.

    The tree is ``leader``, its descendants, every process of ``session`` and any still-running
    process of ``known`` (an earlier walk). It is frozen first with SIGSTOP and walked again until
    no new process appears, so nothing forks behind the walk; then every member and every process
    group inside the session gets SIGKILL. ``reap_leader`` says whether ``leader`` is our child
    and not yet waited for. Members re-parented to us (we are a subreaper) are reaped too.
    Returns when no member runs any more, or at ``timeout`` with the survivors in ``leftovers``.
    """
    started = time.monotonic()
    hook = _kill_hooks.get(leader)
    if hook is not None and not hook():
        return KillReport(leader, (leader,), None, time.monotonic() - started, leftovers=(leader,))
    deadline = time.monotonic() + timeout
    me, my_pgid = os.getpid(), os.getpgrp()
    # Zombies stay in the set too: the ones re-parented to us must be reaped.
    targets: dict[int, ProcStat] = {s.pid: s for s in known if _same(s)}
    for s in targets.values():
        _signal(s.pid, signal.SIGSTOP)
    for _ in range(20):
        found = tree(leader, scan(), session=session)
        new = {p: s for p, s in found.items() if p not in targets and p != me}
        if not new:
            break
        targets.update(new)
        for s in new.values():
            _signal(s.pid, signal.SIGSTOP)
    targets.pop(me, None)
    for s in targets.values():
        _signal(s.pid, signal.SIGKILL)
    groups = {s.pgid for s in targets.values() if session is None or s.sid == session}
    for pgid in groups - {my_pgid, 0, 1}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    if reap_leader and leader not in targets:
        _signal(leader, signal.SIGKILL)

    leader_status: int | None = None
    while True:
        pending: list[int] = []
        foreign: list[int] = []
        current = {}
        for s in targets.values():
            now = read_stat(s.pid)
            if now is not None and now.starttime == s.starttime:
                current[s.pid] = now  # else gone (reaped by us or by its new parent)
        for pid, now in current.items():
            if now.running:
                pending.append(pid)
            elif now.ppid == me:
                status = try_reap(pid)
                if status is None:
                    pending.append(pid)
                elif pid == leader:
                    leader_status = status
            elif now.ppid in current:
                # A zombie whose parent, in the tree, was still exiting when it was read: the
                # parent's exit re-parents it to us (the subreaper) and the next pass reaps it.
                pending.append(pid)
            else:
                foreign.append(pid)  # a zombie whose parent is not us: dead, not ours to reap
        if reap_leader and leader_status is None and leader not in targets:
            leader_status = try_reap(leader)
            if leader_status is None and read_stat(leader) is not None:
                pending.append(leader)
        if not pending and session is not None:
            # A child forked in the instant before the group kill is not in the set yet.
            late = {p: s for p, s in tree(leader, scan(), session=session).items() if p != me}
            pending = [p for p in late if p not in targets]
            for pid in pending:
                targets[pid] = late[pid]
                _signal(pid, signal.SIGKILL)
        if not pending or time.monotonic() >= deadline:
            return KillReport(
                leader=leader,
                pids=tuple(sorted(targets)),
                leader_status=leader_status,
                seconds=time.monotonic() - started,
                leftovers=tuple(sorted(set(pending))),
                foreign_zombies=tuple(sorted(foreign)),
            )
        time.sleep(0.002)


#: How long the shutdown waits for orphans of killed trees that are still exiting.
ORPHAN_GRACE = 2.0


def reap_exited_children(grace: float) -> int:
    """Reap every child that has ended (``waitpid(-1, WNOHANG)``), waiting up to ``grace``
    seconds for children that still run to end. Only when nothing else waits for children
    any more (the end of the shutdown). Returns how many were reaped."""
    reaped = 0
    deadline = time.monotonic() + grace
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped  # no children left
        if pid:
            reaped += 1
            continue
        if time.monotonic() >= deadline:
            return reaped
        time.sleep(0.01)
