"""How a change reaches the config log: on the leader, one transaction that this worker reads
back before it answers; on any other worker, the request forwarded to the leader, and the log
read to its end afterwards, so the client's next read here sees what its write did. While no
leader is known the answer is Connect's 409 at once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from daemon.errors import RemoteError
from daemon.runtime.distributed.forward import FORWARDED, NO_LEADER, Forwarder
from daemon.runtime.distributed.loop import HerderLoop
from daemon.storage.kafka import LeaderFenced

log = logging.getLogger("connectd.herder")


class ConfigWrites:
    """The leader's writes (one at a time: ``lock``) and the way to the leader from elsewhere."""

    def __init__(self, loop: HerderLoop, forwarder: Forwarder) -> None:
        self.loop = loop
        self.forwarder = forwarder
        self.lock = asyncio.Lock()  # the leader's writes, one at a time

    @property
    def leading(self) -> bool:
        return self.loop.role.leader

    def leader_url(self) -> str:
        """The leader's REST URL; 409 while none is known (or for a request already forwarded
        once: a worker never forwards twice)."""
        role = self.loop.role
        if role.generation < 0 or not role.leader_url or FORWARDED.get():
            if FORWARDED.get() and role.leader_url:
                raise RemoteError(
                    f"This worker is not the leader (the leader is {role.leader_url}); retry",
                    status=409,
                )
            raise RemoteError(NO_LEADER, status=409)
        return role.leader_url

    async def forward(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The request sent to the leader; its status and answer, once read back here."""
        status, answer = await self.forwarder.request(method, self.leader_url(), path, body)
        await self.read_own_write()
        return status, answer

    async def read_own_write(self) -> None:
        """The leader answered once its write was committed: read the log to its end, so a
        client's next read on this worker sees what its write did."""
        try:
            await self.loop.sync()
        except Exception as exc:  # the write is done; the poller catches up
            log.warning("Reading the config log after a forwarded write failed: %r", exc)

    async def write(self, records: list[tuple[str, bytes | None]]) -> None:
        """One transaction on the config log (callers hold ``lock``); returns once this worker
        has read it back."""
        # A failed write closed the last writer: ``claim`` starts a new one.
        writer = await self.loop.leader_writer.claim()
        try:
            offset = await writer.write(records)
        except LeaderFenced:
            self.loop.rejoin()  # another worker leads now: learn who
            raise RemoteError(
                "This worker was replaced as the leader while writing; nothing was written."
                " Retry: the request goes to the new leader",
                status=409,
            ) from None
        await self.loop.sync(at_least=offset)
