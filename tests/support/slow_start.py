"""``python -m support.slow_start SECONDS ARGS...``: ``connectd ARGS...`` whose worker waits
``SECONDS`` before it loads its connectors (``StandaloneHerder.start``), with everything else real.

The gap between the REST listener opening and the connectors being loaded lasts a few
milliseconds in a real start; stretched, a test can show what every request in it is answered
(issue 13: ``GET /connectors`` must never say ``200 []`` there) without racing for the window.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from daemon.cli import main
from daemon.runtime.standalone import StandaloneHerder


def delay_worker_start(seconds: float) -> None:
    original = StandaloneHerder.start

    async def start(self: StandaloneHerder, *args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(seconds)
        await original(self, *args, **kwargs)

    StandaloneHerder.start = start  # type: ignore[method-assign]


if __name__ == "__main__":
    delay_worker_start(float(sys.argv[1]))
    raise SystemExit(main(sys.argv[2:]))
