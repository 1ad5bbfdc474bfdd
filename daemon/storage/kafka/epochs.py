"""Epochs from Kafka: distributed mode's fencing numbers, shared by every worker of a group.

Each draw appends one small record to partition 0 of the offsets topic (key
``connectd-epoch-<connector>``, the drawing worker in the value) and the epoch is that record's
offset + 1. A partition's offsets only grow and are never handed out twice, whichever worker
appends, so an incarnation started anywhere after another one drew its epoch holds a larger
one: the sink's commit log then refuses the older incarnation's commits (the zombie fencing of
seed 003, for sinks). Compaction keeps one record per connector and never changes offsets.

The record is written with ``acks=all`` and idempotence; an epoch is returned only once the
broker acknowledged it. Connect keeps source offsets under JSON-array keys in the same topic;
these keys cannot collide with them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaProducer

from daemon.storage.kafka.errors import StoreTimeout
from daemon.storage.kafka.tail import client_options, start_producer

KEY_PREFIX = "connectd-epoch-"


class KafkaEpochs:
    """``Epochs`` drawn from the offsets topic (see the module docstring). ``start`` before the
    first draw, ``stop`` at the end; one producer for all connectors of this worker."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str | list[str],
        worker_id: str,
        *,
        client_settings: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.topic = topic
        self.worker_id = worker_id
        self.timeout = timeout
        self._last: dict[str, int] = {}
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            client_id="connectd-epochs",
            **client_options(client_settings),
        )

    async def start(self) -> None:
        await start_producer(self._producer, self.timeout)

    async def stop(self) -> None:
        await self._producer.stop()

    async def next_epoch_async(self, connector: str, *, floor: int = 1) -> int:
        drawn = await self.draw(KEY_PREFIX + connector, f"connector {connector}")
        epoch = max(drawn, floor, self._last.get(connector, 0) + 1)
        self._last[connector] = epoch
        return epoch

    async def draw(self, key: str, what: str) -> int:
        """A number greater than every one drawn before it from this topic, by any worker."""
        value = json.dumps({"key": key, "worker_id": self.worker_id}).encode()
        try:
            async with asyncio.timeout(self.timeout):
                meta = await self._producer.send_and_wait(
                    self.topic, value, key=key.encode(), partition=0
                )
        except TimeoutError:
            raise StoreTimeout(
                f"topic {self.topic!r}: no epoch for {what} within {self.timeout:g}s; is the"
                " broker up?"
            ) from None
        return int(meta.offset) + 1
