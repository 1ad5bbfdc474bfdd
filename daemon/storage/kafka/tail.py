"""Reading an internal topic from its beginning to its end: what both store readers share.

A ``TopicTail`` holds one ``AIOKafkaConsumer`` with no consumer group, assigned every partition
of one topic and positioned at the beginning; ``read_to_end`` fetches until each partition's
position reaches the end offset observed when it was called. With
``isolation_level="read_committed"`` that end is the last stable offset, so a transaction still
open (or a fenced leader's, until the broker aborts it) is never read and never waited for past
the deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from daemon.storage.kafka.errors import StoreTimeout

log = logging.getLogger("connectd.storage.kafka")

#: One fetch's wait; short, so the deadline is checked often and a stop is quick.
FETCH_WAIT_MS = 200
#: The broker's wait for data on one fetch. A log that ends in a transaction marker (the config
#: log always does) leaves the position one short of the end until a fetch returns the marker;
#: with the default 500 ms, every read that is already at the end cost half a second.
BROKER_WAIT_MS = 20

Apply = Callable[[ConsumerRecord[bytes, bytes]], None]


def client_options(client_settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """aiokafka's connection options (security protocol, SASL, SSL context) for every client."""
    return dict(client_settings or {})


async def start_producer(producer: AIOKafkaProducer, timeout: float) -> None:
    """Start a store's writer under ``timeout``; one that fails to start is stopped (a
    half-started producer still holds connections)."""
    try:
        async with asyncio.timeout(timeout):
            await producer.start()
    except BaseException:
        await producer.stop()
        raise


class TopicTail:
    """Every partition of ``topic``, read from the beginning by ``read_to_end``, each record
    handed to ``apply`` in offset order per partition. Owned by one coroutine at a time."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str | list[str],
        apply: Apply,
        *,
        isolation_level: str = "read_uncommitted",
        client_settings: Mapping[str, Any] | None = None,
        client_id: str = "connectd-store",
    ) -> None:
        self.topic = topic
        self._apply = apply
        # No group: the consumer is given every partition of the topic (aiokafka's
        # NoGroupCoordinator) and, with nothing committed anywhere, starts at the earliest offset.
        self._consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=isolation_level,
            client_id=client_id,
            fetch_max_wait_ms=BROKER_WAIT_MS,
            **client_options(client_settings),
        )
        self._partitions: list[TopicPartition] = []
        self._positions: dict[int, int] = {}
        self._started = False

    async def start(self, timeout: float = 30.0) -> None:
        """Connect and take every partition of the topic, positioned at its beginning.
        ``StoreTimeout`` if the topic's partitions are not known within ``timeout``."""
        self._started = True  # from here on, stop() releases the consumer
        try:
            async with asyncio.timeout(timeout):
                await self._consumer.start()
                while not self._consumer.assignment():
                    await asyncio.sleep(0.05)  # polled: the assignment follows a metadata answer
        except TimeoutError:
            await self.stop()
            raise StoreTimeout(
                f"topic {self.topic!r}: no partitions known after {timeout:g}s; is the broker "
                "up, does the topic exist, and is its leader up?"
            ) from None
        except BaseException:
            await self.stop()
            raise
        self._partitions = sorted(self._consumer.assignment())

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self._consumer.stop()

    async def read_to_end(
        self, timeout: float, at_least: Mapping[int, int] | None = None
    ) -> dict[TopicPartition, int]:
        """Read until every partition's position reaches the end offset observed now (and at
        least ``at_least[partition]``, for a writer that must see its own write: the end a
        ``read_committed`` reader observes can lag a commit that just returned, until the
        broker has written the commit marker). Returns the positions reached. ``StoreTimeout``
        naming the topic, with how far each partition got, if ``timeout`` seconds pass first;
        what was read by then has been applied."""
        if not self._started:
            raise RuntimeError(f"the reader of {self.topic!r} is not started")
        deadline = time.monotonic() + timeout
        try:
            async with asyncio.timeout(timeout):
                ends: dict[TopicPartition, int] = await self._consumer.end_offsets(self._partitions)
                for partition, least in (at_least or {}).items():
                    tp = TopicPartition(self.topic, partition)
                    ends[tp] = max(ends.get(tp, 0), least)
                while not await self._reached(ends):
                    left_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
                    batch = await self._consumer.getmany(timeout_ms=min(FETCH_WAIT_MS, left_ms))
                    for records in batch.values():
                        for record in records:
                            self._apply(record)
        except TimeoutError:
            got = {tp.partition: self._positions.get(tp.partition, 0) for tp in self._partitions}
            raise StoreTimeout(
                f"topic {self.topic!r}: not read to its end within {timeout:g}s "
                f"(positions by partition: {got}); is the broker up and the topic's leader "
                "available?"
            ) from None
        return {tp: self._positions[tp.partition] for tp in self._partitions}

    async def _reached(self, ends: Mapping[TopicPartition, int]) -> bool:
        done = True
        for tp in self._partitions:
            self._positions[tp.partition] = await self._consumer.position(tp)
            done = done and self._positions[tp.partition] >= ends[tp]
        return done
