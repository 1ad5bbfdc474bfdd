"""``python -m support.slow_start SECONDS ARGS...``: ``connectd ARGS...`` whose worker waits
``SECONDS`` before it loads its connectors (``StandaloneHerder.start``), with everything else real.

The gap between the REST listener opening and the connectors being loaded lasts a few
milliseconds in a real start; stretched, a test can show what every request in it is answered
(issue 13: ``GET /connectors`` must never say ``200 []`` there) without racing for the window.
The wait counts from the moment the worker's REST front (its ``listeners``) answers a
request: the REST front is a process of its own, started beside the worker's start, and on a
loaded machine its import and bind alone can take longer than the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from daemon.cli import main
from daemon.config.properties import parse_properties
from daemon.runtime.standalone import StandaloneHerder

#: How long to wait for the REST port before starting the delay anyway.
LISTEN_DEADLINE_S = 120.0


def rest_address(worker_file: Path) -> tuple[str, int] | None:
    """The first listener's host and port of a worker properties file."""
    listeners = parse_properties(worker_file.read_text(), str(worker_file)).values.get("listeners")
    if not listeners:
        return None
    url = urlsplit(listeners.split(",")[0].strip())
    return (url.hostname, url.port) if url.hostname and url.port else None


async def answering(address: tuple[str, int] | None) -> None:
    """Return once the REST front at ``address`` answers an HTTP request (or after
    ``LISTEN_DEADLINE_S``): an accepted connection alone may be the kernel's, before the
    front reads it."""
    deadline = time.monotonic() + LISTEN_DEADLINE_S
    while address is not None and time.monotonic() < deadline:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            reader, writer = await asyncio.open_connection(*address)
            try:
                writer.write(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
                await writer.drain()
                if await asyncio.wait_for(reader.read(1), 5.0):
                    return
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
        await asyncio.sleep(0.02)


def delay_worker_start(seconds: float, address: tuple[str, int] | None) -> None:
    original = StandaloneHerder.start

    async def start(self: StandaloneHerder, *args: Any, **kwargs: Any) -> None:
        await answering(address)
        await asyncio.sleep(seconds)
        await original(self, *args, **kwargs)

    StandaloneHerder.start = start  # type: ignore[method-assign]


if __name__ == "__main__":
    args = sys.argv[2:]  # standalone WORKER CONNECTOR...
    delay_worker_start(float(sys.argv[1]), rest_address(Path(args[1])) if len(args) > 1 else None)
    raise SystemExit(main(args))
