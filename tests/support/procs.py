"""Process bookkeeping for tests: every process a test starts must be gone when it ends, and
reaped: a zombie left behind counts as a leak.

The test session makes pytest a child subreaper, so an orphan of a killed daemon or executor is
reparented to pytest instead of init and stays visible here. Session fixtures that own
long-lived processes (the broker, a warm executor pool whose members are replaced during tests)
register a function returning the PIDs they own; those processes and their descendants are not
counted as leaks.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterable

import psutil

_PR_SET_CHILD_SUBREAPER = 36
_owners: list[Callable[[], Iterable[int]]] = []


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def register_session_owner(owner: Callable[[], Iterable[int]]) -> Callable[[], None]:
    """Exempt the processes `owner()` names (and their trees) from the leak check.

    Returns a function that removes the registration.
    """
    _owners.append(owner)
    return lambda: _owners.remove(owner)


def _owned() -> set[int]:
    pids: set[int] = set()
    for owner in list(_owners):
        with contextlib.suppress(Exception):
            pids.update(owner())
    return pids


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those of ``pids`` that are our ended children.

    Only for cleaning up after a leak was reported: the code under test must reap its own
    children, and the daemon (a subreaper) the orphans of the trees it kills.
    """
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def live_descendants() -> dict[int, str]:
    """Live (non-zombie) descendants of this process that no session owner claims."""
    return _descendants(zombies=False)


def leftovers() -> dict[int, str]:
    """Descendants that no session owner claims, zombies included.

    A zombie is a process that ended and that its parent never waited for. Left by a test, it
    is a leak like a running process: a child whose exit nobody collects (a ``Popen`` dropped
    without ``wait``), or an orphan re-parented to the subreaper that nothing reaped (the
    daemon is a subreaper in production too, where such zombies would pile up).
    """
    return _descendants(zombies=True)


def _descendants(*, zombies: bool) -> dict[int, str]:
    owned = _owned()
    me = psutil.Process()
    skip: set[int] = set()
    found: dict[int, str] = {}
    children = me.children(recursive=True)
    by_pid = {c.pid: c for c in children}
    for child in children:
        # Skip a process if it, or any ancestor below us, is owned by a session fixture.
        pid = child.pid
        chain = []
        node: psutil.Process | None = child
        while node is not None and node.pid != me.pid:
            chain.append(node.pid)
            if node.pid in owned or node.pid in skip:
                skip.update(chain)
                break
            try:
                parent_pid = node.ppid()
            except psutil.Error:
                break
            node = by_pid.get(parent_pid)
        if pid in skip:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                if zombies:
                    found[pid] = f"<zombie> {child.name()} (parent {child.ppid()} never reaped it)"
                continue
            found[pid] = " ".join(child.cmdline()[:6])[:200]
        except psutil.Error:
            continue
    return found


def kill_pids(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def wait_gone(baseline: set[int], deadline_s: float) -> dict[int, str]:
    """Poll until no descendant beyond `baseline` exists, running or zombie, or the deadline
    passes; returns what is left. Reaps nothing: a zombie disappears only when its parent
    waits for it, and the deadline gives the parent (an asyncio child watcher thread, a pool's
    reaper) the time to do so."""
    end = time.monotonic() + deadline_s
    while True:
        leaked = {p: c for p, c in leftovers().items() if p not in baseline}
        if not leaked or time.monotonic() >= end:
            return leaked
        time.sleep(0.05)


def clean_up(baseline: set[int], deadline_s: float) -> dict[int, str]:
    """After a leak was reported: SIGKILL what runs beyond `baseline` and reap the zombies that
    are ours (killing a zombie's parent re-parents it to us, the subreaper). Returns what is
    still there at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        left = {p: c for p, c in leftovers().items() if p not in baseline}
        kill_pids(left)
        reap(left)
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.05)
