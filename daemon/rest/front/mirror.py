"""The status mirror: the front process's copy of the worker's connector and task states.

``Mirror`` keeps the newest snapshot the worker gave (``protocol.snapshot_route``),
pre-serialised, and answers the two status endpoints from it; ``lookup`` says ``None`` whenever
the mirror cannot answer exactly as the worker would (a name or task it does not hold, or a
snapshot older than ``max_age``), and the front then passes the request on to the worker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.rest.errors import compact_json


@dataclass
class _Entry:
    status: bytes
    tasks: dict[int, bytes]


@dataclass
class Mirror:
    """The front's copy of the worker's states (see the module docstring)."""

    max_age: float = 2.0
    """Seconds a snapshot is answered from; older, requests go to the worker."""
    seq: int = 0
    access_log: bool = True
    _connectors: dict[str, _Entry] = field(default_factory=dict)
    _taken: float = float("-inf")

    def install(self, snapshot: Mapping[str, Any], taken: float | None = None) -> bool:
        """Keep ``snapshot`` unless a newer one is held already; whether it was kept.
        ``taken``: the ``time.monotonic()`` when it was asked for (default: now)."""
        seq = int(snapshot["seq"])
        if seq <= self.seq:
            return False
        connectors: dict[str, _Entry] = {}
        for name, status in snapshot["connectors"].items():
            tasks = {int(t["id"]): compact_json(t).encode() for t in status.get("tasks", ())}
            connectors[str(name)] = _Entry(compact_json(status).encode(), tasks)
        self.seq = seq
        self.access_log = bool(snapshot.get("access_log", True))
        self._connectors = connectors
        self._taken = time.monotonic() if taken is None else taken
        return True

    def confirm(self, seq: int, taken: float) -> None:
        """The worker's states were still those of snapshot ``seq`` at ``taken``."""
        if seq == self.seq:
            self._taken = max(self._taken, taken)

    def invalidate(self) -> None:
        """Answer nothing until the next snapshot (a change was made that none shows yet)."""
        self._taken = float("-inf")

    @property
    def fresh(self) -> bool:
        return time.monotonic() - self._taken <= self.max_age

    def lookup(self, connector: str, task: int | None = None) -> bytes | None:
        """The JSON body of the connector's (or its task's) status, or ``None`` (ask the worker)."""
        if not self.fresh:
            return None
        entry = self._connectors.get(connector)
        if entry is None:
            return None
        return entry.status if task is None else entry.tasks.get(task)
