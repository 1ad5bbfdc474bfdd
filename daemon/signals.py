"""What the daemon does with signals: recorded in the handler, acted on by the main coroutine.

``Signals`` holds the two requests the daemon's ``serve`` waits for: ``stop`` (SIGTERM, SIGINT,
or ``request_stop``) and ``reload`` (SIGHUP, or ``request_reload``). ``installed()`` puts the
handlers on the running loop and restores the previous ones when it ends, so a daemon can be
embedded (tests run several in one process, without handlers). A second SIGTERM/SIGINT does not
wait for the shutdown: ``force`` runs (it kills every executor's tree) and the process exits at
once with ``EX_FORCED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterator

log = logging.getLogger("connectd.daemon")

EX_FORCED = 1
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Signals:
    """The daemon's stop and reload requests (see the module docstring)."""

    def __init__(self, force: Callable[[], None]) -> None:
        self.stop = asyncio.Event()
        self.reload = asyncio.Event()
        self._force = force
        self._stops = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The handlers on the running loop for the block; the old ones back afterwards."""
        loop = asyncio.get_running_loop()
        old = {s: signal.getsignal(s) for s in HANDLED}
        for s in HANDLED:
            loop.add_signal_handler(s, self._received, s)
        try:
            yield
        finally:
            for s in HANDLED:
                loop.remove_signal_handler(s)
                signal.signal(s, old[s])

    def _received(self, sig: int) -> None:
        if sig == signal.SIGHUP:
            self.reload.set()
            return
        self._stops += 1
        name = signal.Signals(sig).name
        if self._stops == 1:
            log.info("%s received: shutting down (again to force)", name)
            self.stop.set()
            return
        log.error("%s received again: killing every executor and exiting now", name)
        self._force()
        os._exit(EX_FORCED)
