"""``FileTasksSink`` (``connector.class=support.reconfiguring:FileTasksSink``): a connector whose
task configurations follow something outside it, as Connect connectors that watch a topic list
or a table's partitions do. ``tasks.file`` holds a number N: the connector generates N task
configurations (at most ``tasks.max``), each carrying ``tasks.generation`` = N.
It watches the file and calls ``context.request_task_reconfiguration()`` when it changes; the
word ``fail`` makes it call ``context.raise_error``. Its tasks write nothing (no executor, no
JVM)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path

from daemon.connectors.api import SinkConnector, SinkTask
from support.failing_sinks import IdleTask

#: How often the connector looks at its file.
WATCH_INTERVAL = 0.2


class FileTasksSink(SinkConnector):
    needs_executors = False

    async def start(self, config: Mapping[str, str]) -> None:
        await super().start(config)
        self.path = Path(config["tasks.file"])
        self.seen = await asyncio.to_thread(self._read)
        self._watch = asyncio.get_running_loop().create_task(self._watching())

    def _read(self) -> str:
        with contextlib.suppress(OSError):
            return self.path.read_text().strip()
        return ""

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)  # a polling period, as a connector's own
            now = await asyncio.to_thread(self._read)
            if now == "fail":
                self.context.raise_error(RuntimeError("the connector was told to fail"))
                return
            if now != self.seen:
                self.seen = now
                self.context.request_task_reconfiguration()

    def task_class(self) -> type[SinkTask]:
        return IdleTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        wanted = int(self.seen or "1")
        return [
            {**self.config, "tasks.generation": str(wanted)} for _ in range(min(wanted, max_tasks))
        ]

    async def stop(self) -> None:
        self._watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watch
