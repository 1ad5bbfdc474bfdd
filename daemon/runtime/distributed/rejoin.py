"""Two things a distributed worker keeps between rebalances: the batching of rejoins after
config changes (``BatchedRejoin``) and, while it leads, the config log's transactional writer
(``LeaderWriter``: its start fences every older leader's)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from daemon.config import WorkerConfig
from daemon.storage.kafka import ConfigLogWriter


class BatchedRejoin:
    """The rejoin after config changes, batched: ``soon`` waits until no change came for
    ``quiet`` s, at most ``longest`` s after the first, so a burst of creates costs a rebalance
    or two instead of one each (issue 14, 6b)."""

    def __init__(self, rejoin: Callable[[], None], quiet: float, longest: float) -> None:
        self._rejoin = rejoin
        self._quiet, self._longest = quiet, longest
        self._timer: asyncio.TimerHandle | None = None
        self._first = 0.0

    def soon(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._timer is None:
            self._first = now
        else:
            self._timer.cancel()
        self._timer = loop.call_at(min(now + self._quiet, self._first + self._longest), self._now)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _now(self) -> None:
        self._timer = None
        self._rejoin()


class LeaderWriter:
    """The leader's writer of the config log, started on demand (``claim``), dropped when this
    worker stops leading or leaves."""

    def __init__(self, config: WorkerConfig, boot: str, client: Mapping[str, Any]) -> None:
        assert config.group_id and config.config_storage_topic
        self._topic, self._group = config.config_storage_topic, config.group_id
        self._boot, self._client = boot, client
        self.current: ConfigLogWriter | None = None

    async def claim(self) -> ConfigLogWriter:
        """The writer, started (which fences every older leader's) if there is none or its
        last write closed it."""
        if self.current is not None and not self.current.closed:
            return self.current
        await self.drop()
        writer = ConfigLogWriter(self._topic, self._boot, self._group, client_settings=self._client)
        await writer.start()
        self.current = writer
        return writer

    async def drop(self) -> None:
        writer, self.current = self.current, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.stop()
