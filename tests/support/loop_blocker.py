"""A test connector that misbehaves on purpose: its task blocks the event loop.

``connector.class=support.loop_blocker:LoopBlockerSink`` (tests/ is on the daemon's PYTHONPATH,
as for ``support.daemon:RecordingSink``). The first ``put`` that carries records calls
``time.sleep(block.seconds)`` right on the loop — the bug the systemd watchdog exists to catch —
once per task incarnation. Around the sleep it writes ``block.marker`` (a JSON file) with the
``CLOCK_MONOTONIC`` readings of its start and end: that clock is system-wide on Linux, so the
test compares them with its own ``time.monotonic()`` stamps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from daemon.connectors.api import SinkConnector, SinkTask, SinkTaskContext
from daemon.connectors.records import RecordBatch


def read_marker(path: Path) -> dict[str, float]:
    """``{"start": ...}`` while blocking, ``{"start": ..., "end": ...}`` after; {} before."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


class LoopBlockerTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.seconds = float(config.get("block.seconds", "3"))
        self.marker = Path(config["block.marker"])
        self.blocked = False

    async def put(self, batch: RecordBatch) -> None:
        if self.blocked or not len(batch):
            return
        self.blocked = True
        start = time.monotonic()
        self.marker.write_text(json.dumps({"start": start}))
        time.sleep(self.seconds)  # the misbehaviour under test: a synchronous call on the loop
        self.marker.write_text(json.dumps({"start": start, "end": time.monotonic()}))

    async def stop(self) -> None:
        pass


class LoopBlockerSink(SinkConnector):
    needs_executors = False  # it blocks the loop, it writes nothing

    def task_class(self) -> type[SinkTask]:
        return LoopBlockerTask
