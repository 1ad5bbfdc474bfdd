"""systemd's notify protocol (``sd_notify``) without libsystemd: READY, STATUS, WATCHDOG,
RELOADING, STOPPING as datagrams on ``$NOTIFY_SOCKET``.

Guarantees:

- Nothing here blocks the event loop or raises: a datagram goes out on a non-blocking
  ``AF_UNIX``/``SOCK_DGRAM`` socket or is dropped; the first failure is logged, later ones are not.
- Without ``NOTIFY_SOCKET`` (a plain foreground run) every call is a no-op.
- ``WATCHDOG=1`` is sent by a coroutine on the daemon's own loop, every ``WATCHDOG_USEC / 2``.
  A loop blocked by a misbehaving connector cannot run it, the pings stop and systemd restarts
  the service. Never a thread: a thread would keep pinging while the real work is stuck.

The environment is left as it is (``NOTIFY_SOCKET`` is not removed): executors inherit it but the
shipped units set ``NotifyAccess=main``, so systemd ignores anything but the main process, and
leaving ``os.environ`` alone keeps the daemon embeddable (it changes no process-wide state).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from daemon.runtime.model import ConnectorStatus, State

log = logging.getLogger("connectd.systemd")

STATUS_INTERVAL = 5.0


class WorkerView(Protocol):
    def connector_names(self) -> list[str]: ...

    def connector_status(self, name: str) -> ConnectorStatus: ...


def status_line(herder: WorkerView | None) -> str:
    """``<n> connectors, <running>/<tasks> tasks running, <failed> failed`` (``starting`` before
    the worker exists). Connectors deleted while counting are skipped."""
    if herder is None:
        return "starting"
    connectors = running = tasks = failed = 0
    for name in herder.connector_names():
        try:
            status = herder.connector_status(name)
        except Exception:  # deleted between the listing and the lookup
            continue
        connectors += 1
        tasks += len(status.tasks)
        running += sum(t.state is State.RUNNING for t in status.tasks)
        failed += sum(t.state is State.FAILED for t in status.tasks)
        failed += status.state is State.FAILED
    line = f"{connectors} connectors, {running}/{tasks} tasks running, {failed} failed"
    cluster = getattr(herder, "cluster", None)
    if callable(cluster):  # distributed mode: this member's role and share first
        c = cluster()
        role = "leader" if c["leader"] else "member"
        line = f"{role}, generation {c['generation']}, {c['tasks']} tasks here; {line}"
    return line


def rate_text(consumed: int, written: int, seconds: float) -> str:
    """Records per second over ``seconds``: ``"<r> records/s written"``, or, when nothing was
    written (a sink still buffering, or one that does not report writes), ``"<r> records/s
    consumed"``; ``"0 records/s"`` when nothing moved. Below 100/s with one decimal."""
    if seconds <= 0:
        return "0 records/s"
    for count, what in ((written, "written"), (consumed, "consumed")):
        if count > 0:
            rate = count / seconds
            shown = f"{rate:.1f}" if rate < 100 else f"{rate:.0f}"
            return f"{shown} records/s {what}"
    return "0 records/s"


class StatusLine:
    """``STATUS=`` text: ``status_line(worker())`` and the record rate since the previous call
    (the first call: since construction), from ``totals()`` = (consumed, written) since start.

    ``1 connectors, 1/1 tasks running, 0 failed, 41.2 records/s consumed``
    """

    def __init__(
        self,
        herder: Callable[[], WorkerView | None],
        totals: Callable[[], tuple[int, int]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._herder = herder
        self._totals = totals
        self._clock = clock
        self._last = (clock(), *totals())

    def __call__(self) -> str:
        now, consumed, written = self._clock(), *self._totals()
        then, consumed_before, written_before = self._last
        self._last = (now, consumed, written)
        base = status_line(self._herder())
        if base == "starting":
            return base
        rate = rate_text(consumed - consumed_before, written - written_before, now - then)
        return f"{base}, {rate}"


def socket_address(value: str) -> str | bytes:
    """``NOTIFY_SOCKET`` as a ``sendto`` address: ``@name`` is Linux's abstract namespace."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


class Notifier:
    """Sends notify messages to ``address`` (None: disabled). ``watchdog_usec``: systemd's
    watchdog timeout; pings go out every half of it once ``start`` has run."""

    def __init__(self, address: str | bytes | None = None, watchdog_usec: int | None = None):
        self.address = address
        self.watchdog_usec = watchdog_usec if address is not None else None
        self._warned = False
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, pid: int | None = None) -> Notifier:
        """From ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` (a watchdog meant for
        another pid is ignored, as ``sd_watchdog_enabled`` does). Bad values disable the
        watchdog with a warning; they never stop the daemon."""
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        if not raw:
            return cls()
        usec: int | None = None
        if env.get("WATCHDOG_USEC"):
            try:
                usec = int(env["WATCHDOG_USEC"])
                owner = env.get("WATCHDOG_PID")
                if owner and int(owner) != (os.getpid() if pid is None else pid):
                    usec = None
            except ValueError:
                log.warning("Ignoring the systemd watchdog: bad WATCHDOG_USEC/WATCHDOG_PID")
                usec = None
            if usec is not None and usec <= 0:
                usec = None
        return cls(socket_address(raw), usec)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between pings (half of ``WATCHDOG_USEC``), None without a watchdog."""
        return self.watchdog_usec / 2e6 if self.watchdog_usec else None

    # ---- sending ----

    def notify_text(self, text: str) -> bool:
        """Send ``text`` (newline-separated ``KEY=value`` lines) as one datagram; True if sent."""
        if self.address is None:
            return False
        # A socket per message, as libsystemd's sd_notify does: messages are rare (a watchdog
        # ping, a status line every few seconds), and no socket outlives the call, whoever
        # forgets to call stop().
        try:
            with socket.socket(
                socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
            ) as sock:
                sock.sendto(text.encode(), self.address)
            return True
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("systemd notify to %r failed (logged once): %s", self.address, exc)
            return False

    def notify(self, **fields: str | int) -> bool:
        """``notify(READY=1, STATUS="...")``: one datagram with a line per field."""
        return self.notify_text("\n".join(f"{k}={v}" for k, v in fields.items()))

    def ready(self, status: str | None = None) -> bool:
        return self.notify(READY=1, **({"STATUS": status} if status is not None else {}))

    def reloading(self) -> bool:
        """``RELOADING=1`` with ``MONOTONIC_USEC`` (systemd wants the time of the request)."""
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.notify(RELOADING=1, MONOTONIC_USEC=now)

    def stopping(self) -> bool:
        return self.notify(STOPPING=1)

    def status(self, text: str) -> bool:
        return self.notify(STATUS=text)

    def watchdog(self) -> bool:
        return self.notify(WATCHDOG=1)

    # ---- the coroutines ----

    async def watchdog_loop(self) -> None:
        """Ping, sleep half the watchdog timeout, repeat (on the loop it vouches for)."""
        interval = self.watchdog_interval
        if interval is None:
            return
        while True:
            self.watchdog()
            await asyncio.sleep(interval)

    async def status_loop(
        self, summary: Callable[[], str], interval: float = STATUS_INTERVAL
    ) -> None:
        """Send ``STATUS=summary()`` every ``interval`` seconds (a failing summary is skipped)."""
        while True:
            try:
                self.status(summary())
            except Exception as exc:
                log.debug("No systemd status this time: %s", exc)
            await asyncio.sleep(interval)

    def start(self, summary: Callable[[], str], status_interval: float = STATUS_INTERVAL) -> None:
        """Start the watchdog and status coroutines on the running loop (no-op when disabled)."""
        if not self.enabled or self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.watchdog_loop(), name="systemd watchdog"))
        self._tasks.append(
            loop.create_task(self.status_loop(summary, status_interval), name="systemd status")
        )

    async def stop(self) -> None:
        """Cancel the watchdog and status coroutines."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
