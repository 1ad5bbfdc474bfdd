"""Helpers of the systemd integration tests: the test's NOTIFY_SOCKET, and ``GET /health``.

Used by the systemd integration tests (``tests/integration/systemd``); the ``listener``
fixture is in that folder's conftest.py.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def health(url: str) -> int | None:
    """``GET /health``'s status code, None while nothing answers."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2.0) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class Listener:
    """The test's NOTIFY_SOCKET: a thread stamps each datagram on arrival (``time.monotonic``,
    comparable with the daemon's own ``CLOCK_MONOTONIC`` readings). ``on_ready`` runs on that
    thread when a READY=1 arrives (before the next datagram is read)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.05)
        self.messages: list[tuple[float, str]] = []
        self.on_ready: Callable[[], None] = lambda: None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="notify listener")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            text = data.decode()
            self.messages.append((time.monotonic(), text))
            if "READY=1" in text.split("\n"):
                self.on_ready()

    def texts(self, since: float = 0.0) -> list[str]:
        return [text for t, text in list(self.messages) if t >= since]

    def stamps(self, line: str) -> list[float]:
        """Arrival times of the datagrams with ``line`` as one of their lines."""
        return [t for t, text in list(self.messages) if line in text.split("\n")]

    def lifecycle(self, since: float = 0.0) -> list[str]:
        """The datagrams since ``since`` other than the periodic WATCHDOG=1 and STATUS=."""
        return [x for x in self.texts(since) if not x.startswith(("WATCHDOG=1", "STATUS="))]

    def transcript(self, began: float) -> str:
        return "\n".join(
            f"  +{t - began:7.3f} s  {text.replace(chr(10), ' | ')}"
            for t, text in list(self.messages)
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()
