"""The status mirror: the worker's connector and task states, copied to the REST front process.

The worker side (``snapshot_route``) answers ``GET /_connectd/snapshot`` on the back socket with
every connector's status as ``GET /connectors/{c}/status`` would answer it, numbered by a
counter that only grows. The front side (``Mirror``) keeps the newest snapshot it was given,
pre-serialised, and answers the two status endpoints from it; ``lookup`` says ``None`` whenever
the mirror cannot answer exactly as the worker would (a name or task it does not hold, or a
snapshot older than ``max_age``), and the front then passes the request on to the worker.

The route checks a per-start secret (``TOKEN_HEADER``) the front sends: the back socket is
reachable only by the front (a 0700 directory), and the front drops that header from clients'
requests, so no client reaches the snapshot past authentication.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from daemon.errors import ConnectorNotFound
from daemon.rest.errors import compact_json, error_response
from daemon.runtime.model import WorkerAPI

SNAPSHOT_PATH = "/_connectd/snapshot"
TOKEN_HEADER = "X-Connectd-Front-Token"
FORWARDED_PROTO = "X-Forwarded-Proto"
"""Set by the front to the scheme its client used (the worker's ``Location`` headers name it)."""
ACCESS_LOGGER = "connectd.rest.access"


@web.middleware
async def forwarded_scheme(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Behind the front: the request's scheme is the one the front's client used."""
    proto = request.headers.get(FORWARDED_PROTO)
    if proto in ("http", "https") and proto != request.scheme:
        request = request.clone(scheme=proto)
    return await handler(request)


def snapshot_route(worker: WorkerAPI, token: str) -> web.RouteDef:
    """The back's ``GET SNAPSHOT_PATH``: ``{"seq", "access_log", "connectors": {name: status}}``
    (``access_log``: whether request lines are logged at the worker's current levels).

    ``seq`` grows only when the content changes; a request whose ``If-None-Match`` names the
    current ``seq`` gets 304 and no body (most refreshes: states change rarely)."""
    last = _Last()

    async def snapshot(request: web.Request) -> web.Response:
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return error_response(404, "HTTP 404 Not Found")
        statuses: dict[str, Any] = {}
        for name in worker.connector_names():
            try:
                statuses[name] = worker.connector_status(name).to_json()
            except ConnectorNotFound:  # deleted between the two calls: not in this snapshot
                continue
        access = logging.getLogger(ACCESS_LOGGER).isEnabledFor(logging.INFO)
        content = compact_json({"access_log": access, "connectors": statuses})
        if content != last.content:
            last.seq, last.content = last.seq + 1, content
        seq = last.seq
        if request.headers.get("If-None-Match") == str(seq):
            return web.Response(status=304)
        return web.Response(text=f'{{"seq":{seq},{content[1:]}', content_type="application/json")

    return web.get(SNAPSHOT_PATH, snapshot)


@dataclass
class _Last:
    seq: int = 0
    content: str = ""


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
