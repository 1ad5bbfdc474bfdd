"""A task's consumer as an in-memory log, for unit tests that run an ``Incarnation`` for real
(its main loop, rebalance part, pipeline and converters) without a broker.

``FakeConsumer`` is ``TaskConsumer``'s surface over a dense log of ``RECORDS`` records on each of
``TPS``, whose positions move when a poll hands records out, as aiokafka's do; ``install``
puts it in place of ``TaskConsumer.for_task``; ``incarnation`` makes a task of a given sink
class over string converters. The integration tests run the same loop on a real broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord

from daemon.config import Providers, parse_worker
from daemon.connectors.api import SinkTask, TaskId
from daemon.connectors.records import TopicPartition
from daemon.runtime.incarnation import incarnation as task_module
from daemon.runtime.incarnation.consumer import Partitions
from daemon.runtime.incarnation.incarnation import Incarnation
from daemon.runtime.settings import TaskSettings

TPS = (TopicPartition("t", 0), TopicPartition("t", 1))
RECORDS = 100  # per partition
PER_POLL = 10  # per partition and poll


class FakeConsumer:
    """``TaskConsumer``'s surface over an in-memory log of ``RECORDS`` records per partition."""

    def __init__(self) -> None:
        self.target: Partitions | None = None
        self.position = dict.fromkeys(TPS, 0)
        self.paused: set[TopicPartition] = set()
        self.held: set[TopicPartition] = set()
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.batches = 0  # polls that handed records out
        self.fired = 0  # hooks run
        self.paused_polls = 0  # polls while paused since the last hook
        self.empty_polls_at_end = 0
        #: Called inside the ``n``-th poll with records, after they were taken, before it returns.
        self.during: dict[int, Callable[[], None]] = {}

    async def start(self) -> None:
        assert self.target is not None
        self.assigned = frozenset(TPS)
        self.hold(TPS)  # as ``consumer._Listener``: held until the task opened them
        await self.target.partitions_assigned(frozenset(TPS))

    async def poll(self, timeout_ms: int, max_records: int | None = None) -> dict[Any, list[Any]]:
        if self.paused & self.assigned:
            self.paused_polls += 1
        out: dict[Any, list[Any]] = {}
        for tp in sorted(self.assigned - self.paused - self.held):
            start = self.position[tp]
            end = min(start + PER_POLL, RECORDS)
            if end > start:
                out[tp] = [record(tp, o) for o in range(start, end)]
                self.position[tp] = end  # handed out: the position moves past them
        if out:
            self.batches += 1
            hook = self.during.pop(self.batches, None)
            if hook is not None:
                hook()
                self.fired += 1
                self.paused_polls = 0
        if not out:
            if all(self.position[tp] == RECORDS for tp in TPS) and not self.paused:
                self.empty_polls_at_end += 1
            await asyncio.sleep(timeout_ms / 1000)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.position[tp] = offset

    async def committed_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {}  # no consumer group here: the in-memory log is all there is

    def hold(self, tps: Collection[TopicPartition]) -> None:
        self.held.update(tps)

    def release(self, tps: Collection[TopicPartition]) -> None:
        self.held.difference_update(tps)

    def set_paused(self, wanted: Collection[TopicPartition]) -> None:
        self.paused = set(wanted) & self.assigned

    def fetch_position(self, tp: TopicPartition) -> int | None:
        return self.position.get(tp)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.assigned

    async def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[Any, str] | None = None
    ) -> None:
        pass

    async def close(self) -> None:
        pass


def record(tp: TopicPartition, offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=tp.topic,
        partition=tp.partition,
        offset=offset,
        timestamp=1_700_000_000_000 + offset,
        timestamp_type=0,
        key=None,
        value=b"v%d" % offset,
        checksum=None,
        serialized_key_size=-1,
        serialized_value_size=8,
        headers=[],
    )


def install(monkeypatch: pytest.MonkeyPatch) -> FakeConsumer:
    """A ``FakeConsumer`` that every task made from now on gets."""
    fake = FakeConsumer()

    def for_task(*args: Any, target: Partitions, **kwargs: Any) -> FakeConsumer:
        fake.target = target
        return fake

    monkeypatch.setattr(task_module.TaskConsumer, "for_task", for_task)
    return fake


def incarnation(task_class: type[SinkTask], **connector: str) -> Incarnation:
    """Task 0 of connector ``c`` on topic ``t`` with ``task_class``, string converters."""
    worker = parse_worker(
        {"bootstrap.servers": "127.0.0.1:1", "key.converter": "string", "value.converter": "string"}
    ).config
    config = {"name": "c", "connector.class": "x.y:Z", "topics": "t", **connector}
    return Incarnation(
        TaskId("c", 0),
        1,
        worker=worker,
        connector_config=config,
        task_config=config,
        task_class=task_class,
        executors=None,  # type: ignore[arg-type]  # the sinks here write nothing through them
        providers=Providers(),
        settings=TaskSettings(poll_timeout=0.01, flush_interval=0.05),
    )
