"""``FrontedRestServer``: the worker's REST app behind the REST front process.

``start()`` serves the app on a Unix socket in a private directory (mode 0700), binds every
configured listener here (so a bind error is raised here, naming the listener, as
``RestServer`` raises it), and starts ``python -m daemon.rest.front.child`` with the listening
sockets; it returns once the front answers on all of them, or raises with nothing left running.
The sockets stay open here too, so a front that dies is replaced on the same sockets (after
1 s, then up to 30 s between attempts) without a connection refused in between; its exit is
logged as an error. ``close()`` closes the front's stdin (it stops accepting and lets requests in
flight finish for ``shutdown_timeout``), waits for it (kills it by PID if it does not end), then
closes the sockets and the app. The front's PID is ``pid`` while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path

from aiohttp import web

from daemon.errors import ConnectdError
from daemon.rest.front.protocol import ADMIN_SCHEME, Spec
from daemon.rest.server import Bound, Listening, bind
from daemon.rest.settings import RestSettings

log = logging.getLogger("connectd.rest")

REFRESH_INTERVAL = 0.1
"""Seconds between two status snapshots the front asks for (besides after each change)."""
START_TIMEOUT = 60.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


class FrontStartFailed(ConnectdError):
    """The REST front process did not start serving."""


class FrontedRestServer(Listening):
    """See the module docstring. ``token`` must be the ``front_token`` the app was made with."""

    def __init__(
        self,
        app: web.Application,
        settings: RestSettings,
        *,
        token: str,
        log_level: str = "INFO",
        log_format: str = "text",
        refresh_interval: float = REFRESH_INTERVAL,
    ) -> None:
        self._app = app
        self._settings = settings
        self._token = token
        self._log = (log_level, log_format)
        self._refresh = refresh_interval
        self._runner: web.AppRunner | None = None
        self._dir: str | None = None
        self._sockets: list[tuple[socket.socket, str]] = []
        self._bound: list[Bound] = []
        self.admin_bound: list[Bound] = []
        """The admin listeners (``admin.listeners``) as bound."""
        self._proc: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self.restarts = 0
        """How many times a front that died was replaced."""

    @staticmethod
    def new_token() -> str:
        return secrets.token_urlsafe(32)

    @property
    def pid(self) -> int | None:
        """The front process's PID while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        settings = self._settings
        settings.check()
        if settings.tls is not None:
            settings.tls.context()  # a bad key store is a ConfigError here, not in the front
        try:
            self._dir = tempfile.mkdtemp(prefix="connectd-rest-")
            runner = self._runner = web.AppRunner(
                self._app, access_log=None, shutdown_timeout=settings.shutdown_timeout
            )
            await runner.setup()
            await web.UnixSite(runner, self._back_path).start()
            for listener in settings.listeners:
                socks = await bind(listener)
                self._sockets += [(sock, listener.scheme) for sock in socks]
                self._bound.append(Bound(listener, socks[0].getsockname()[1]))
            for listener in settings.admin_listeners or ():  # the front serves /admin there
                socks = await bind(listener)
                self._sockets += [(sock, ADMIN_SCHEME + listener.scheme) for sock in socks]
                self.admin_bound.append(Bound(listener, socks[0].getsockname()[1]))
            for sock, _ in self._sockets:
                sock.listen(128)
            self._proc = await self._spawn()
        except BaseException:
            await self._release()
            raise
        self._supervisor = asyncio.ensure_future(self._supervise())
        log.debug("REST front process %d serves %s", self._proc.pid, ", ".join(self.urls))

    @property
    def _back_path(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir, "worker.sock")

    def _spec(self) -> Spec:
        settings = self._settings
        return Spec(
            listeners=[(sock.fileno(), scheme) for sock, scheme in self._sockets],
            back=self._back_path,
            token=self._token,
            max_body_bytes=settings.max_body_bytes,
            request_timeout=settings.request_timeout,
            shutdown_timeout=settings.shutdown_timeout,
            refresh_interval=self._refresh,
            log_level=self._log[0],
            log_format=self._log[1],
            credentials_file=(
                str(settings.credentials_file) if settings.credentials_file else None
            ),
            tls=Spec.tls_json(settings.tls),
            cors_origins=settings.cors_origins,
            cors_methods=settings.cors_methods,
            header_config=settings.header_config,
        )

    async def _spawn(self) -> asyncio.subprocess.Process:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import sys; from daemon.rest.front.child import main; sys.exit(main())",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            pass_fds=[sock.fileno() for sock, _ in self._sockets],
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(self._spec().to_json().encode() + b"\n")
            await proc.stdin.drain()
            async with asyncio.timeout(START_TIMEOUT):
                line = (await proc.stdout.readline()).decode(errors="replace").strip()
        except BaseException as exc:
            await _end(proc, 0.0)
            if isinstance(exc, (TimeoutError, OSError)):
                raise FrontStartFailed(
                    f"the REST front process did not start within {START_TIMEOUT:.0f} s: {exc}"
                ) from exc
            raise
        if line != "ready":
            await _end(proc, 0.0)
            reason = line.removeprefix("error: ") or f"it exited with {proc.returncode}"
            raise FrontStartFailed(f"the REST front process did not start: {reason}")
        return proc

    async def _supervise(self) -> None:
        delay = 1.0
        while not self._closing:
            proc = self._proc
            assert proc is not None
            code = await proc.wait()
            if self._closing:
                return
            log.error(
                "the REST front process %d exited with %s; starting another in %.0f s",
                proc.pid,
                code,
                delay,
            )
            while not self._closing:
                await asyncio.sleep(delay)  # a pause between attempts, not a synchronisation
                try:
                    self._proc = await self._spawn()
                except (FrontStartFailed, OSError) as exc:
                    delay = min(30.0, delay * 2)
                    log.error("the REST front process did not start again: %s", exc)
                    continue
                self.restarts += 1
                log.warning("REST front process %d serves again", self._proc.pid)
                delay = 1.0
                break

    async def close(self) -> None:
        """Stop the front (requests in flight finish, bounded), then the app. Idempotent."""
        self._closing = True
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
        proc, self._proc = self._proc, None
        if proc is not None:
            await _end(proc, self._settings.shutdown_timeout + 5.0)
        await self._release()

    async def _release(self) -> None:
        for sock, _ in self._sockets:
            sock.close()
        self._sockets.clear()
        self._bound.clear()
        self.admin_bound.clear()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


async def _end(proc: asyncio.subprocess.Process, grace: float) -> None:
    """End ``proc``: its stdin closed (it stops by itself), SIGKILL by PID after ``grace``."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    if proc.returncode is None:
        try:
            async with asyncio.timeout(grace):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
