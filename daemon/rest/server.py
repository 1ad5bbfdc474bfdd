"""``RestServer``: serves an app on every configured listener, http and https.

``start()`` binds every listener before it returns (port 0 picks a free port; ``bound`` tells
which), or binds none and raises ``BindError`` (an ``OSError``) naming the listener that failed
(and, for a port in use, saying so). ``close()`` stops accepting, lets requests in flight finish
for ``shutdown_timeout`` seconds, then closes every connection. Use ``async with
RestServer(app, settings) as server:``.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from aiohttp import web

from daemon.config import Listener
from daemon.rest.admin import ADMIN_PORTS
from daemon.rest.settings import RestSettings


@dataclass(frozen=True)
class Bound:
    """A listener as bound: its scheme, the host it was asked for, the port it got."""

    listener: Listener
    port: int

    @property
    def url(self) -> str:
        host = self.listener.host or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return f"{self.listener.scheme}://{host}:{self.port}"


class Listening(ABC):
    """What every REST server offers: ``start``/``close`` (also as ``async with``) and its
    bound listeners (kept in ``_bound`` while it serves)."""

    _bound: list[Bound]

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def bound(self) -> tuple[Bound, ...]:
        return tuple(self._bound)

    @property
    def urls(self) -> list[str]:
        """Every bound listener's URL, in configuration order."""
        return [b.url for b in self._bound]

    @property
    def url(self) -> str:
        """The first listener's URL, e.g. ``http://127.0.0.1:8083``."""
        if not self._bound:
            raise RuntimeError("the server is not started")
        return self._bound[0].url


class RestServer(Listening):
    def __init__(self, app: web.Application, settings: RestSettings) -> None:
        self._app = app
        self._settings = settings
        self._runner: web.AppRunner | None = None
        self._bound: list[Bound] = []
        self.admin_bound: list[Bound] = []
        """The admin listeners (``admin.listeners``) as bound."""

    async def start(self) -> None:
        settings = self._settings
        settings.check()
        ssl_context = settings.tls.context() if settings.tls is not None else None
        runner = web.AppRunner(
            self._app, access_log=None, shutdown_timeout=settings.shutdown_timeout
        )
        await runner.setup()
        sockets: list[socket.socket] = []

        async def serve(listener: Listener) -> Bound:
            socks = await bind(listener)
            sockets.extend(socks)
            tls = ssl_context if listener.scheme == "https" else None
            for sock in socks:
                await web.SockSite(runner, sock, ssl_context=tls).start()
            return Bound(listener, socks[0].getsockname()[1])

        try:
            for listener in settings.listeners:
                self._bound.append(await serve(listener))
            if settings.admin_listeners:
                ports = self._app.get(ADMIN_PORTS)
                if ports is None:
                    raise RuntimeError("admin listeners need an app made by create_app")
                for listener in settings.admin_listeners:
                    first = len(sockets)
                    self.admin_bound.append(await serve(listener))
                    ports.update(tuple(sock.getsockname()[:2]) for sock in sockets[first:])
        except BaseException:
            await runner.cleanup()
            for sock in sockets:
                sock.close()
            self._bound.clear()
            self.admin_bound.clear()
            raise
        self._runner = runner

    async def close(self) -> None:
        """Stop accepting; finish requests in flight (bounded); close. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._bound.clear()
        self.admin_bound.clear()
        ports = self._app.get(ADMIN_PORTS)
        if ports is not None:
            ports.clear()


class BindError(OSError):
    """A listener cannot be bound; the message names it and says why (a port in use: which)."""


async def bind(listener: Listener) -> list[socket.socket]:
    """Listening sockets for every address of the listener's host (all interfaces when the
    host is empty). With port 0 every address gets the port the first one was given.
    ``BindError`` (an ``OSError``) naming the listener if any address cannot be bound (none is
    left open)."""
    try:
        return await _bind_addresses(listener)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = (
                f"port {listener.port} is in use (another connectd or Kafka Connect?); stop what"
                " listens there, or set listeners in the worker file to a free port"
            )
        else:
            why = str(exc.strerror or exc)
        raise BindError(exc.errno, f"cannot listen on {listener}: {why}") from exc


async def _bind_addresses(listener: Listener) -> list[socket.socket]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        listener.host or None,
        listener.port,
        type=socket.SOCK_STREAM,
        flags=socket.AI_PASSIVE,
    )
    socks: list[socket.socket] = []
    port = listener.port
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], port, *address[2:]))
            port = sock.getsockname()[1]
            sock.setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    if not socks:
        raise OSError(0, f"{listener.host!r} has no address")
    return socks
