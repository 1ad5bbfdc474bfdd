"""What every handler shares: the worker, the settings, the plugin registry and the metrics.

One ``RestContext`` per application, stored under ``CONTEXT``; nothing is global, so several
apps (over several workers) can live in one process, as tests do.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from aiohttp import web
from aiohttp.typedefs import Handler

from daemon.connectors.api import ConnectorRegistry
from daemon.errors import ConnectorNotFound, TaskNotFound
from daemon.logs.levels import LoggerLevels
from daemon.metrics import Metrics
from daemon.rest.errors import RestError
from daemon.rest.settings import RestSettings
from daemon.runtime.distributed.forward import FORWARDED, HEADER, RETRIED, RETRY_HEADER
from daemon.runtime.model import Herder, Stall

log = logging.getLogger("connectd.rest")
T = TypeVar("T")


@runtime_checkable
class ClusterIdentified(Protocol):
    """Optional worker hook: the Kafka cluster id for ``GET /`` (sync or async; ``None`` when
    not known yet). Without it ``kafka_cluster_id`` is ``null``."""

    def kafka_cluster_id(self) -> str | Awaitable[str | None] | None: ...


@runtime_checkable
class HealthReporting(Protocol):
    """Optional worker hook for ``GET /health`` (Connect's KIP-1017).

    ``is_ready()``: startup is complete. ``health_check()`` returns once the worker's own loop
    has done a no-op round trip; if it does not return within ``health_timeout`` the worker is
    ``starting`` (503) when not ready, else ``unhealthy`` (500). It may raise to report a
    failure with a message. Without these hooks a worker that answers is healthy.
    """

    def is_ready(self) -> bool: ...

    async def health_check(self) -> None: ...

    def stalled_tasks(self) -> list[tuple[str, int, Stall]]:
        """(connector, task, stall) of each task with lag and no commit for
        ``task.stall.warn.ms``, by name and index: only the stalls, not whole statuses."""
        ...


@dataclass
class RestContext:
    herder: Herder
    settings: RestSettings
    registry: ConnectorRegistry
    metrics: Metrics
    loggers: LoggerLevels = field(default_factory=LoggerLevels)
    _config_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = field(
        default_factory=weakref.WeakValueDictionary
    )
    openapi: dict[str, Any] | None = None
    started: float = field(default_factory=time.time)
    _loaded: bool = False

    def starting(self) -> bool:
        """The worker has not finished loading its connectors yet (``is_ready`` has never been
        true): until then its list of connectors is incomplete, and a connector missing from
        it may just not be loaded. Once ready, it stays loaded (a shutdown is not a start)."""
        if self._loaded:
            return False
        is_starting = getattr(self.herder, "is_starting", None)
        if callable(is_starting):  # a worker that says so: a shutdown is not a start
            if is_starting():
                return True
        elif isinstance(self.herder, HealthReporting) and not self.herder.is_ready():
            return True
        self._loaded = True
        return False

    def config_lock(self, name: str) -> asyncio.Lock:
        """Serialises configuration changes of one connector (a PATCH reads, merges and
        writes: two at once must not lose one). Locks of idle names are garbage-collected."""
        lock = self._config_locks.get(name)
        if lock is None:
            lock = self._config_locks[name] = asyncio.Lock()
        return lock

    async def call(self, work: Awaitable[T]) -> T:
        """Await a worker operation under ``request_timeout``.

        The operation is shielded: a timeout (answered 500 "Request timed out", as Connect) or
        a client that hangs up does not cancel it half-way through a stop sequence; it finishes
        on its own and a late failure is logged.
        """
        task = asyncio.ensure_future(work)
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.settings.request_timeout)
        except TimeoutError:
            task.add_done_callback(_log_late_failure)
            raise RestError(500, "Request timed out") from None
        except asyncio.CancelledError:
            task.add_done_callback(_log_late_failure)
            raise

    async def cluster_id(self) -> str | None:
        if not isinstance(self.herder, ClusterIdentified):
            return None
        value = self.herder.kafka_cluster_id()
        if inspect.isawaitable(value):
            value = await self.call(value)
        return None if value is None else str(value)


def _log_late_failure(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("a worker operation failed after its request had ended: %s", exc)


CONTEXT = web.AppKey("connectd.rest.context", RestContext)

STILL_STARTING = (
    "Worker is still starting up: its connectors are not loaded yet; try again in a moment"
)
"""The 503 message of connector requests made before the connectors are loaded."""


def context(request: web.Request) -> RestContext:
    return request.app[CONTEXT]


@web.middleware
async def not_loaded_yet(request: web.Request, handler: Handler) -> web.StreamResponse:
    """While the worker is still loading its connectors, a change to connectors is answered
    503 (try again): start-up is deciding from the stored connectors which ones exist, and a
    create or delete meanwhile could be undone by it. A connector or task not found then is
    503 too, not 404: it may be one of those not loaded yet."""
    changes = request.method not in ("GET", "HEAD", "OPTIONS")
    if changes and request.path.startswith("/connectors") and context(request).starting():
        raise RestError(503, STILL_STARTING)
    try:
        return await handler(request)
    except (ConnectorNotFound, TaskNotFound):
        if context(request).starting():
            raise RestError(503, STILL_STARTING) from None
        raise


@web.middleware
async def forwarded_request(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Distributed mode: a request another worker forwarded here is never forwarded again
    (``daemon.runtime.distributed.forward``)."""
    if request.headers.get(HEADER) != "1":
        return await handler(request)
    token = FORWARDED.set(True)
    retried = RETRIED.set(request.headers.get(RETRY_HEADER) == "1")
    try:
        return await handler(request)
    finally:
        RETRIED.reset(retried)
        FORWARDED.reset(token)
