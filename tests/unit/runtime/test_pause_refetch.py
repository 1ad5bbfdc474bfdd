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
from collections.abc import Collection, Mapping

import pytest
from support.daemon import wait_until
from support.fake_task_consumer import RECORDS, TPS, FakeConsumer, incarnation, install

from daemon.connectors.api import SinkTask, SinkTaskContext
from daemon.connectors.records import RecordBatch

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
    PUTS.clear()
    return install(monkeypatch)


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
    inc = incarnation(AuditTask)
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
