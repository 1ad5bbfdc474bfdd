"""Process bookkeeping for tests: every process a test starts must be gone when it ends.

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


def reap_zombies() -> None:
    """Collect exit statuses of orphans reparented to us that nobody else waits for."""
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)


def live_descendants() -> dict[int, str]:
    """Live (non-zombie) descendants of this process that no session owner claims."""
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
    """Poll until no new descendant beyond `baseline` is alive, or the deadline passes."""
    end = time.monotonic() + deadline_s
    while True:
        reap_zombies()
        leaked = {p: c for p, c in live_descendants().items() if p not in baseline}
        if not leaked or time.monotonic() >= end:
            return leaked
        time.sleep(0.05)
