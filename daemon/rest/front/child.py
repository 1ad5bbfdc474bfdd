"""The REST front process: ``main()`` of a ``python -c`` child started by ``FrontedRestServer``.

Why a process: the worker's event loop shares one GIL with ten consumers and their conversion
threads, so a request answered in the worker's process waits behind them (p99 about 12 ms for a
status request under streaming, bench/README.md; a thread of its own in the same process made
it worse: each GIL hand-over can cost the 5 ms switch interval). This process has its own GIL.

What it does:
- serves the listening sockets it inherits (http, https with the worker's PEM files);
- answers ``GET /connectors/{c}/status`` and ``GET /connectors/{c}/tasks/{t}/status`` from the
  status mirror (``daemon.rest.front.mirror``), after the same ``Accept`` and basic-auth checks the
  worker makes, logging the request as the worker's access log would;
- passes every other request, and every status request the mirror cannot answer exactly, to
  the worker's own REST app over a Unix socket, headers and body (at most
  ``rest.request.max.bytes`` + 1 bytes: the worker answers 413 past that) as received, and
  relays the answer; the scheme the client used goes along as ``X-Forwarded-Proto`` so
  ``Location`` headers name it;
- refreshes the mirror every ``refresh_interval`` seconds, and after every request it passed on
  that may have changed something (any method but GET/HEAD/OPTIONS), before answering it: a
  client reads its own changes.

Protocol with the parent: one JSON line on stdin (the ``Spec``), ``ready`` (or ``error: ...``)
on stdout once every listener is served; stdin's end (the parent closed it, or died) stops it:
it stops accepting, lets requests in flight finish for ``shutdown_timeout`` seconds, and exits
0. SIGTERM and SIGINT are left to the parent, which stops the front last: systemd's
``KillMode=control-group`` and a terminal's Ctrl-C signal every process of the daemon at once,
and REST answers until the worker has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from daemon.config.httpheaders import Cors, parse_header_rules
from daemon.rest.api import accepts_json
from daemon.rest.auth import BasicAuth
from daemon.rest.errors import error_response
from daemon.rest.front.mirror import Mirror
from daemon.rest.front.protocol import (
    ACCESS_LOGGER,
    ADMIN_HEADER,
    ADMIN_SCHEME,
    FORWARDED_PROTO,
    SNAPSHOT_PATH,
    TOKEN_HEADER,
    Spec,
)
from daemon.rest.headers import install_response_headers
from daemon.runtime.looplag import settle_heap

log = logging.getLogger("connectd.rest.front")
access = logging.getLogger(ACCESS_LOGGER)

BACK_HOST = "connectd-worker"
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Connection",
        "Transfer-Encoding",
        "TE",
        "Trailer",
        "Upgrade",
        "Content-Length",
        "Expect",  # answered here (100 Continue) when the body is read
    )
)
_NOT_RELAYED = _HOP_BY_HOP | {"date", "server"}
_DROPPED_FROM_CLIENTS = {TOKEN_HEADER.lower(), FORWARDED_PROTO.lower(), ADMIN_HEADER.lower()}
_READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})


def status_target(path: str) -> tuple[str, int | None] | None:
    """``(connector, task)`` for the two status paths (``task`` None: the connector's), else
    ``None``. Only canonical task numbers: ``01`` is left to the worker."""
    parts = path.split("/")
    if len(parts) == 4 and parts[1] == "connectors" and parts[3] == "status" and parts[2]:
        return parts[2], None
    if (
        len(parts) == 6
        and parts[1] == "connectors"
        and parts[3] == "tasks"
        and parts[5] == "status"
        and parts[2]
        and parts[4].isdigit()
        and parts[4].isascii()
        and str(int(parts[4])) == parts[4]
    ):
        return parts[2], int(parts[4])
    return None


class AccessLines:
    """The request lines of the front's own answers, handed to logging in small batches.

    A line per request, as the worker's access log writes them, each stamped with the time its
    request was answered; handed on ``delay`` seconds after the first line of a batch, so that
    under load the logging thread wakes once per batch rather than once per request (a wake-up
    per request cost the front more than half its throughput, its loop and the logging thread
    trading the GIL), while a batch stays small enough (tens of lines) not to hold the loop."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self._records: list[logging.LogRecord] = []
        self._handle: asyncio.TimerHandle | None = None

    def add(self, method: str, path: str, status: int, ms: float) -> None:
        self._records.append(
            access.makeRecord(
                access.name, logging.INFO, __file__, 0, "%s %s %d %.1fms",
                (method, path, status, ms), None,
            )
        )  # fmt: skip
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(self.delay, self.flush)

    def flush(self) -> None:
        records, self._records, self._handle = self._records, [], None
        for record in records:
            access.handle(record)


class Front:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.lines = AccessLines()
        self.mirror = Mirror(max_age=max(2.0, 10 * spec.refresh_interval))
        self.auth = BasicAuth(Path(spec.credentials_file)) if spec.credentials_file else None
        self._session: aiohttp.ClientSession | None = None
        self._refreshing: asyncio.Task[None] | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None
        return self._session

    def app(self) -> web.Application:
        # No body limit here: ``_body`` reads at most max+1 bytes and the worker answers 413.
        spec = self.spec
        app = web.Application(client_max_size=0)
        cors = Cors.parse(spec.cors_origins, spec.cors_methods)
        install_response_headers(app, cors, parse_header_rules(spec.header_config))
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def admin_app(self) -> web.Application:
        """An admin listener's (``admin.listeners``): ``/admin`` relayed, marked as coming from
        there; no CORS or configured headers, as Connect's admin listeners have none."""
        app = web.Application(client_max_size=0)
        app.router.add_route("*", "/{tail:.*}", self.handle_admin)
        return app

    async def handle_admin(self, request: web.Request) -> web.StreamResponse:
        return await self._pass_on(request, admin=True)

    async def open(self) -> None:
        self._session = aiohttp.ClientSession(
            # No cap on connections to the worker: its own server has none either, and a
            # hundred slow calls (restarts waiting for a reap) must not hold up /health.
            connector=aiohttp.UnixConnector(path=self.spec.back, limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=self.spec.request_timeout + 10.0),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # ---- answering ----

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET" and not request.query_string:
            target = status_target(request.path)
            if target is not None:
                answer = await self._from_mirror(request, *target)
                if answer is not None:
                    return answer
        return await self._pass_on(request)

    async def _from_mirror(
        self, request: web.Request, connector: str, task: int | None
    ) -> web.Response | None:
        started = time.perf_counter()
        if not accepts_json(request.headers.get("Accept")):
            return None
        auth, credentials = self.auth, request.headers.get("Authorization")
        if auth is not None and await auth.authenticate(credentials) is None:
            return None  # the worker answers 401 with its challenge
        body = self.mirror.lookup(connector, task)
        if body is None:
            return None
        if self.mirror.access_log and access.isEnabledFor(logging.INFO):
            elapsed = (time.perf_counter() - started) * 1000
            self.lines.add(request.method, request.rel_url.raw_path, 200, elapsed)
        return web.Response(body=body, content_type="application/json", charset="utf-8")

    async def _pass_on(self, request: web.Request, *, admin: bool = False) -> web.StreamResponse:
        headers = CIMultiDict(
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP and k.lower() not in _DROPPED_FROM_CLIENTS
        )
        headers[FORWARDED_PROTO] = request.scheme
        headers["Host"] = request.host  # the client's, or this listener's address
        if admin:
            headers[ADMIN_HEADER] = "1"
        body = await _body(request, self.spec.max_body_bytes)
        try:
            async with self.session.request(
                request.method,
                _to_worker(request.rel_url.raw_path, request.rel_url.raw_query_string),
                headers=headers,
                data=body if body or request.body_exists else None,
                allow_redirects=False,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
            ) as answer:
                payload = await answer.read()
                relayed = CIMultiDict(
                    (k, v) for k, v in answer.headers.items() if k.lower() not in _NOT_RELAYED
                )
                status = answer.status
                length = answer.headers.get("Content-Length")
        except TimeoutError:
            # 504/502, not 500: the worker may or may not have applied a change, and a worker
            # that forwarded the request here must know it was not answered (forward.py).
            return error_response(504, "Request timed out")
        except aiohttp.ClientError as exc:
            log.error(
                "the worker's REST app did not answer %s %s: %s",
                request.method,
                request.rel_url.raw_path,
                exc,
            )
            return error_response(502, f"The worker did not answer: {exc}")
        changed = request.method not in _READ_ONLY and 200 <= status < 300
        # The client reads its own change next: from a snapshot taken after it, or from the
        # worker itself if none could be taken.
        if changed and not await self.refresh():
            self.mirror.invalidate()
        if request.method == "HEAD":  # no body, but the length a GET's body would have
            head = web.StreamResponse(status=status, headers=relayed)
            if length is not None and length.isdigit():
                head.content_length = int(length)
            await head.prepare(request)
            await head.write_eof()
            return head
        return web.Response(status=status, body=payload, headers=relayed)

    # ---- the mirror ----

    async def refresh(self) -> bool:
        """Install a snapshot asked for now (a newer one already held is kept); whether the
        mirror now holds the worker's states as of now."""
        asked, held = time.monotonic(), self.mirror.seq
        headers = {TOKEN_HEADER: self.spec.token}
        if held:
            headers["If-None-Match"] = str(held)
        try:
            async with self.session.get(
                _to_worker(SNAPSHOT_PATH),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.mirror.max_age),
            ) as answer:
                if answer.status == 304:
                    self.mirror.confirm(held, asked)
                    return True
                if answer.status != 200:
                    raise aiohttp.ClientError(f"status {answer.status}")
                snapshot = await answer.json()
            self.mirror.install(snapshot, taken=asked)
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
            log.debug("status snapshot not refreshed: %s", exc)
            return False
        access.setLevel(logging.INFO if self.mirror.access_log else logging.WARNING)
        return True

    async def keep_fresh(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.refresh()
            except Exception:  # never end the refreshing: status would go to the worker
                log.exception("refreshing the status snapshot failed")
            await asyncio.sleep(max(0.0, self.spec.refresh_interval - (time.monotonic() - started)))


def _to_worker(path: str, query: str = "") -> URL:
    """The worker's URL for a request's raw path and query, byte for byte: no dot segments
    resolved, no escapes changed, a leading ``//`` kept as a path (not read as a host)."""
    return URL.build(scheme="http", host=BACK_HOST, path=path, query_string=query, encoded=True)


async def _body(request: web.Request, limit: int) -> bytes:
    """The request body, at most ``limit + 1`` bytes of it (enough for the worker to say 413)."""
    if not request.body_exists:
        return b""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await request.content.read(min(1 << 16, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def serve(spec: Spec, stdin: asyncio.StreamReader) -> None:
    front = Front(spec)
    await front.open()

    async def runner_of(app: web.Application) -> web.AppRunner:
        # Bodies go on as received (a gzip body stays gzip, with its Content-Encoding).
        runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=spec.shutdown_timeout, auto_decompress=False
        )
        await runner.setup()
        return runner

    runner = await runner_of(front.app())
    tls = spec.tls_settings()
    ssl_context = tls.context() if tls is not None else None
    admin_runner: web.AppRunner | None = None
    for fd, scheme in spec.listeners:
        sock = socket.socket(fileno=fd)
        sock.setblocking(False)
        serving = runner
        if scheme.startswith(ADMIN_SCHEME):
            scheme = scheme[len(ADMIN_SCHEME) :]
            if admin_runner is None:
                admin_runner = await runner_of(front.admin_app())
            serving = admin_runner
        site = web.SockSite(serving, sock, ssl_context=ssl_context if scheme == "https" else None)
        await site.start()
    await front.refresh()
    settle_heap()  # as the daemon does
    refresher = asyncio.ensure_future(front.keep_fresh())
    stop = asyncio.Event()
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    async def parent_gone() -> None:
        await stdin.read()  # until EOF: the parent closed the pipe or died
        stop.set()

    watcher = asyncio.ensure_future(parent_gone())
    try:
        await stop.wait()
    finally:
        for task in (watcher, refresher):
            await _cancelled(task)
        await runner.cleanup()  # requests in flight finish
        if admin_runner is not None:
            await admin_runner.cleanup()
        front.lines.flush()
        await front.close()


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _main() -> int:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    line = await stdin.readline()
    try:
        spec = Spec.from_json(line)
    except (ValueError, TypeError, KeyError) as exc:
        sys.stdout.write(f"error: unreadable front spec: {exc}\n")
        sys.stdout.flush()
        return 78
    from daemon.logs import setup_logging

    # Lines written by this loop, in the small batches of ``AccessLines``: a writer thread
    # would trade the GIL with the loop on every batch.
    setup_logging(spec.log_level, spec.log_format, threaded=False)
    try:
        await serve(spec, stdin)
    except Exception as exc:  # reported to the parent, which raises it
        sys.stdout.write(f"error: {type(exc).__name__}: {exc}\n")
        sys.stdout.flush()
        return 1
    return 0


def main() -> int:
    # The parent ends the front (by closing stdin) once the worker has stopped; see above.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_main())
    return uvloop.run(_main())


if __name__ == "__main__":
    sys.exit(main())
