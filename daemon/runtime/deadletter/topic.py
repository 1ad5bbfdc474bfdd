"""The dead-letter topic on Kafka: create it, produce dead letters, read back which are there.

``DeadLetterTopic`` is what a task incarnation holds when ``errors.tolerance=all`` and
``errors.deadletterqueue.topic.name`` are set. Why producing and reading back give each dead
letter exactly once across kills is argued in ``daemon.runtime.deadletter.index``; this
module is the I/O.

- ``start``: creates the topic if it does not exist, as Connect does (one partition, the
  configured ``errors.deadletterqueue.topic.replication.factor``; a factor the cluster cannot
  satisfy is a ``ConfigError`` naming that key), then starts an idempotent producer
  (``acks=all``) and a reader (no consumer group, ``read_committed``). The admin client logs
  in with the security settings Connect gives a dead-letter queue's admin client
  (``admin.*``, ``admin.override.*``), the producer with its producer's (``producer.*``,
  ``producer.override.*``); the reader, connectd's own (Connect has none), with the worker's
  own settings, as before: a producer's principal often may write the topic only.
- ``produce``: sends a batch's dead letters and waits until every one is acknowledged.
- ``read``: the dead letters whose origin is one of the given source partitions at or after the
  given offsets, reading each dead-letter partition from a lower bound to its end offset.
- ``bounds``: the lower bounds stored in the task's consumer-group offsets' metadata.

Every call is bounded by ``timeout``; a Kafka failure becomes ``DeadLetterQueueError``
(retriable).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTP
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, for_code

from daemon.connectors.records import TopicPartition
from daemon.errors import ConfigError, DeadLetterQueueError
from daemon.runtime.deadletter.index import Headers, decode_bound, lowest, origin
from daemon.runtime.settings import TaskSettings

log = logging.getLogger("connectd.task")


@dataclass(frozen=True)
class Clients:
    """aiokafka's connection arguments (``bootstrap_servers``, security, ``client_id``) of the
    dead-letter topic's producer, admin client and reader."""

    producer: Mapping[str, Any]
    admin: Mapping[str, Any]
    reader: Mapping[str, Any]


RF_KEY = "errors.deadletterqueue.topic.replication.factor"
INVALID_REPLICATION_FACTOR = 38
TOPIC_ALREADY_EXISTS = 36


class DeadLetterTopic:
    """One incarnation's connection to its dead-letter topic (see the module docstring)."""

    def __init__(
        self,
        topic: str,
        *,
        replication_factor: int,
        clients: Callable[[], Clients],
        timeout: float = 30.0,
        close_timeout: float = TaskSettings.client_close_timeout,
    ) -> None:
        """``clients``: the clients' arguments, made when ``start`` runs and off the event
        loop (a key store of their own may cost a ``keytool`` run; a ``ConfigError`` names a
        setting). ``close_timeout``: how long ``close`` waits for each of them."""
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout = timeout
        self.close_timeout = close_timeout
        self._clients = clients
        self._admin: AIOKafkaAdminClient | None = None
        self._producer: AIOKafkaProducer | None = None
        self._reader: AIOKafkaConsumer | None = None
        self.partitions: tuple[int, ...] = ()

    async def start(self) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                clients = await asyncio.to_thread(self._clients)
                self._admin = AIOKafkaAdminClient(**clients.admin)
                await self._admin.start()
                await self._create_if_missing()
                self.partitions = await self._partitions()
                self._producer = AIOKafkaProducer(
                    **clients.producer, acks="all", enable_idempotence=True, linger_ms=5
                )
                await self._producer.start()
                self._reader = AIOKafkaConsumer(
                    **clients.reader,
                    group_id=None,
                    enable_auto_commit=False,
                    isolation_level="read_committed",
                )
                await self._reader.start()
        except ConfigError:
            raise
        except (KafkaError, TimeoutError, OSError) as exc:
            raise DeadLetterQueueError(
                f"the dead-letter topic {self.topic!r} could not be set up: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    async def _create_if_missing(self) -> None:
        assert self._admin is not None
        if self.topic in await self._admin.list_topics():
            return
        log.info(
            "Creating the dead-letter topic %s (1 partition, replication factor %d)",
            self.topic,
            self.replication_factor,
        )
        rf = self.replication_factor
        # aiokafka's NewTopic takes -1 (the broker's default) only beside an assignment.
        new = NewTopic(self.topic, 1, rf) if rf > 0 else NewTopic(self.topic, 1, -1, {})
        response = await self._admin.create_topics([new], timeout_ms=int(self.timeout * 1000))
        for _name, code, *rest in response.topic_errors:
            message = rest[0] if rest else ""
            if code == INVALID_REPLICATION_FACTOR:
                raise ConfigError(
                    f"{RF_KEY}={rf}: the dead-letter topic {self.topic!r} cannot be created "
                    f"({message or 'the cluster has fewer brokers'}). Lower {RF_KEY} to at most "
                    "the number of brokers, or create the topic yourself"
                )
            if code not in (0, TOPIC_ALREADY_EXISTS):  # another task created it meanwhile
                raise for_code(code)(f"creating the dead-letter topic {self.topic!r}: {message}")

    async def _partitions(self) -> tuple[int, ...]:
        assert self._admin is not None
        while True:  # a new topic's partitions get leaders shortly after its creation
            (meta,) = await self._admin.describe_topics([self.topic])
            parts = meta["partitions"]
            if meta["error_code"] == 0 and parts and all(p["leader"] >= 0 for p in parts):
                return tuple(sorted(p["partition"] for p in parts))
            await asyncio.sleep(0.1)

    async def produce(
        self, letters: Sequence[tuple[bytes | None, bytes | None, int | None, Headers]]
    ) -> list[tuple[int, int]]:
        """Send ``(key, value, timestamp, headers)`` records; when every one is acknowledged,
        their ``(partition, offset)`` in the dead-letter topic, in order."""
        assert self._producer is not None
        try:
            async with asyncio.timeout(self.timeout):
                futures = [
                    await self._producer.send(
                        self.topic,
                        value=value,
                        key=key,
                        timestamp_ms=timestamp
                        if timestamp is not None and timestamp >= 0
                        else None,
                        headers=list(headers),
                    )
                    for key, value, timestamp, headers in letters
                ]
                done = await asyncio.gather(*futures)
        except (KafkaError, TimeoutError) as exc:
            raise DeadLetterQueueError(
                f"{len(letters)} record(s) could not be produced to the dead-letter topic "
                f"{self.topic!r}: {type(exc).__name__}: {exc}"
            ) from exc
        return [(m.partition, m.offset) for m in done]

    async def bounds(
        self, group: str, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, dict[int, int] | None]:
        """The dead-letter bound stored with each partition's group offset (``None``: none)."""
        assert self._admin is not None
        try:
            async with asyncio.timeout(self.timeout):
                offsets = await self._admin.list_consumer_group_offsets(
                    group, partitions=[KafkaTP(tp.topic, tp.partition) for tp in tps]
                )
        except (KafkaError, TimeoutError) as exc:
            raise DeadLetterQueueError(
                f"the consumer group {group}'s offsets could not be read: {exc}"
            ) from exc
        found = {TopicPartition(k.topic, k.partition): v for k, v in offsets.items()}
        return {
            tp: decode_bound(found[tp].metadata, self.topic)
            if tp in found and found[tp].offset >= 0
            else None
            for tp in tps
        }

    async def read(
        self, starts: Mapping[TopicPartition, int], bounds: Sequence[Mapping[int, int] | None]
    ) -> tuple[dict[TopicPartition, dict[int, tuple[int, int]]], dict[int, int]]:
        """Dead letters with origin ``tp`` at offset ``≥ starts[tp]``, as ``{tp: {offset:
        (dlq partition, dlq offset)}}``, read from the lowest of ``bounds`` to the end offsets
        (returned too: no later dead letter goes below them)."""
        assert self._reader is not None
        reader = self._reader
        found: dict[TopicPartition, dict[int, tuple[int, int]]] = {tp: {} for tp in starts}
        parts = [KafkaTP(self.topic, p) for p in self.partitions]
        try:
            async with asyncio.timeout(self.timeout):
                reader.assign(parts)
                first = await reader.beginning_offsets(parts)
                ends = await reader.end_offsets(parts)
                begin = lowest(bounds, self.partitions)
                left = set()
                for kp in parts:
                    at = max(begin[kp.partition], first[kp])
                    if at < ends[kp]:
                        reader.seek(kp, at)
                        left.add(kp)
                scanned = 0
                while left:
                    got = await reader.getmany(*left, timeout_ms=500)
                    for kp, records in got.items():
                        for r in records:
                            scanned += 1
                            source = origin(r.headers)
                            if source is None:
                                continue
                            tp, offset = source
                            if tp in found and offset >= starts[tp]:
                                found[tp][offset] = (kp.partition, r.offset)
                    for kp in list(left):
                        if await reader.position(kp) >= ends[kp]:
                            left.discard(kp)
        except (KafkaError, TimeoutError) as exc:
            raise DeadLetterQueueError(
                f"the dead-letter topic {self.topic!r} could not be read back: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            reader.unsubscribe()  # no background fetching between reads
        log.info(
            "Read %d record(s) of the dead-letter topic %s: %d already hold records of %s",
            scanned,
            self.topic,
            sum(map(len, found.values())),
            ", ".join(str(tp) for tp in sorted(starts)),
        )
        return found, {kp.partition: ends[kp] for kp in parts}

    async def close(self) -> None:
        closers = []
        if self._producer is not None:
            closers.append(self._producer.stop)
        if self._reader is not None:
            closers.append(self._reader.stop)
        if self._admin is not None:
            closers.append(self._admin.close)
        self._producer = self._reader = self._admin = None
        for close in closers:
            try:
                async with asyncio.timeout(self.close_timeout):
                    await close()
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                # aiokafka re-raises the cancel of a background task that had not run yet.
            except Exception as exc:  # closing: report, go on with the others
                log.warning("A dead-letter topic client did not close cleanly: %s", exc)
