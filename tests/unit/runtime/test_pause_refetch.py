"""A connector pause that lands after a poll returned records, before they were delivered: those
records are fetched again after the resume, so every offset reaches ``put`` exactly once and no
batch's offset ranges claim a record ``put`` never saw.

The incarnation runs for real (its main loop, rebalance part, pipeline and converters); only the
consumer is a fake: a dense in-memory log whose positions move when a poll hands records out,
as aiokafka's do. The pause is made inside that poll, just before it returns (the widest form of
the window: the records are out of the log, not yet checked against ``paused``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pytest
from aiokafka.structs import ConsumerRecord
from support.daemon import wait_until

from daemon.config import Providers, parse_worker
from daemon.connectors.api import SinkTask, SinkTaskContext, TaskId
from daemon.connectors.records import RecordBatch, TopicPartition
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


PUTS: list[tuple[list[tuple[str, int, int, int]], list[tuple[int, int]]]] = []
"""Each non-empty ``put``: its ranges (topic, partition, start, end), its (partition, offset)s."""


class AuditTask(SinkTask):
    """Commits what ``put`` gives it at once (as an exactly-once sink's commit would record
    ``batch.ranges``); keeps the ranges and the records for the audit."""

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context

    async def put(self, batch: RecordBatch) -> None:
        if len(batch) or batch.ranges:
            rows = batch.table.select(["kafka_partition", "kafka_offset"]).to_pylist()
            PUTS.append(
                (
                    [(r.topic, r.partition, r.start, r.end) for r in batch.ranges],
                    [(row["kafka_partition"], row["kafka_offset"]) for row in rows],
                )
            )

    async def stop(self) -> None:
        pass


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> FakeConsumer:
    fake = FakeConsumer()

    def for_task(*args: Any, target: Partitions, **kwargs: Any) -> FakeConsumer:
        fake.target = target
        return fake

    monkeypatch.setattr(task_module.TaskConsumer, "for_task", for_task)
    PUTS.clear()
    return fake


def incarnation() -> Incarnation:
    worker = parse_worker(
        {"bootstrap.servers": "127.0.0.1:1", "key.converter": "string", "value.converter": "string"}
    ).config
    connector = {"name": "c", "connector.class": "x.y:Z", "topics": "t"}
    return Incarnation(
        TaskId("c", 0),
        1,
        worker=worker,
        connector_config=connector,
        task_config=connector,
        task_class=AuditTask,
        executors=None,  # type: ignore[arg-type]  # AuditTask writes nothing through them
        providers=Providers(),
        settings=TaskSettings(poll_timeout=0.01, flush_interval=0.05),
    )


def audit() -> None:
    """Each offset delivered once; each put's ranges cover exactly the records it was given."""
    for ranges, rows in PUTS:
        claimed = {(p, o) for _, p, start, end in ranges for o in range(start, end)}
        assert claimed == set(rows), (
            f"a batch's ranges {ranges} claim offsets put never saw: "
            f"{sorted(claimed - set(rows))[:5]}..."
        )
    for tp in TPS:
        got = sorted(o for _, rows in PUTS for p, o in rows if p == tp.partition)
        assert got == list(range(RECORDS)), (
            f"{tp}: missing {sorted(set(range(RECORDS)) - set(got))}, "
            f"{len(got) - len(set(got))} twice"
        )


async def run_with_pauses(consumer: FakeConsumer, pause_in: Collection[int]) -> None:
    inc = incarnation()
    for n in pause_in:
        consumer.during[n] = lambda: inc.set_paused(True)
    inc.start()
    try:
        for i in range(len(pause_in)):
            # Resumed once the task polled while paused (the records are not to come back alone).
            await wait_until(
                lambda i=i: consumer.fired > i and consumer.paused_polls > 0, 10, "paused", 0.005
            )
            inc.set_paused(False)
        await wait_until(lambda: consumer.empty_polls_at_end > 0, 10, "the log drained", 0.005)
    finally:
        inc.ask()
        await asyncio.wait_for(inc.wait(), 10)
    assert inc.failure is None, inc.trace


async def test_a_pause_between_poll_and_delivery_loses_nothing(consumer: FakeConsumer) -> None:
    # The first poll's records (0..9) are delivered; the pause lands in the second (10..19).
    await run_with_pauses(consumer, pause_in=[2])
    audit()


async def test_repeated_pauses_between_poll_and_delivery(consumer: FakeConsumer) -> None:
    await run_with_pauses(consumer, pause_in=[1, 3, 4, 7])
    audit()
