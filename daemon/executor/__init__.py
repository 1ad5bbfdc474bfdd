"""The killable executor pool: every blocking Spark write runs in a process that can be killed
outright with its whole process tree, and is reaped before anything takes its place.

Public API (imported lazily: PySpark's worker daemon imports ``daemon.executor.pyworker`` and
must not pay for asyncio and pyarrow)::

    from daemon.executor import ExecutorPool, PoolSettings, become_subreaper

    become_subreaper()                      # once, at daemon start
    async with ExecutorPool(PoolSettings(size=1, spares=1)) as pool:
        result = await pool.run("conn-0", "pkg.mod:write", table, timeout=60.0)
        await pool.run("conn-0", "pkg.mod:write_delta", table, timeout=60.0, formats=["delta"])
        lease = pool.submit("conn-0", "pkg.mod:write", table, timeout=60.0)
        accepted = await lease.accepted()   # which executor (id, pid), when (monotonic)
        result = await lease.result()

Modules: ``pool`` (writes; holds a ``supervisor``), ``lease`` (a submitted write: acceptance
and result), ``startup`` (the pool's one start: eager, in the background, or by the first
write), ``gates`` (one write per task id), ``supervisor`` (start, replace, reap; holds an
``archive`` keeper and the sessions' ``formats``), ``backoff`` (start failures), ``formats``
(table formats: jars, session settings, recycling executors that lack one, fetching),
``archive`` (keeping the class-data-sharing archive: build, rejections),
``launch`` (spawning), ``handle`` (one executor seen from the daemon), ``child`` (the
executor's main loop), ``pyworker`` (PySpark's worker daemon, made mortal), ``process`` (spawn,
/proc, kill_tree), ``protocol`` (messages), ``handoff`` (Arrow batch files), ``cds`` (JDK
class-data sharing), ``info`` (observability), ``settings``, ``testing`` (write functions that
hang or crash on purpose, for tests and deployment checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daemon.executor.formats import JarsMissing
    from daemon.executor.handoff import Batch
    from daemon.executor.info import ExecutorInfo, ExecutorState, PoolStatus
    from daemon.executor.lease import Acceptance, WriteLease
    from daemon.executor.pool import ExecutorPool
    from daemon.executor.process import KillReport, become_subreaper, is_subreaper
    from daemon.executor.protocol import function_ref
    from daemon.executor.settings import PoolSettings

_EXPORTS = {
    "Acceptance": "daemon.executor.lease",
    "WriteLease": "daemon.executor.lease",
    "Batch": "daemon.executor.handoff",
    "JarsMissing": "daemon.executor.formats",
    "ExecutorInfo": "daemon.executor.info",
    "ExecutorState": "daemon.executor.info",
    "PoolStatus": "daemon.executor.info",
    "ExecutorPool": "daemon.executor.pool",
    "function_ref": "daemon.executor.protocol",
    "KillReport": "daemon.executor.process",
    "become_subreaper": "daemon.executor.process",
    "is_subreaper": "daemon.executor.process",
    "PoolSettings": "daemon.executor.settings",
}

__all__ = [
    "Acceptance",
    "Batch",
    "ExecutorInfo",
    "ExecutorPool",
    "ExecutorState",
    "JarsMissing",
    "KillReport",
    "PoolSettings",
    "PoolStatus",
    "WriteLease",
    "become_subreaper",
    "function_ref",
    "is_subreaper",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'daemon.executor' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
