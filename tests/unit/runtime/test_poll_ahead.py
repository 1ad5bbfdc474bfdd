"""A task polls and converts its next records while ``put`` works on the current ones
(``daemon/runtime/incarnation/ahead.py``), and what was polled ahead reaches ``put`` only if
nothing moved the consumer since: a sink's seek, a retry's rewind, a partition paused by the
sink, each in the middle of a ``put`` while the next poll has already handed records out.

The incarnation runs for real over ``support.fake_task_consumer``'s in-memory log (positions
move when a poll hands records out). Every audit: each ``put``'s ranges claim exactly the
offsets it was given, and every offset reaches ``put`` once, or again only from where a seek
the sink asked for sent it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
from support.daemon import wait_until
from support.fake_task_consumer import RECORDS, TPS, FakeConsumer, incarnation, install

from daemon.connectors.api import SinkTask, SinkTaskContext
from daemon.connectors.records import RecordBatch, TopicPartition
from daemon.errors import RetriableError

#: Each ``put`` that returned: its ranges (partition, start, end), its (partition, offset)s.
Put = tuple[list[tuple[int, int, int]], list[tuple[int, int]]]


class Sink(SinkTask):
    """Keeps what each ``put`` was given; ``on_put[n]`` runs inside the ``n``-th non-empty
    ``put`` (counting from 1), after a pause long enough for the next poll to run."""

    puts: list[Put]
    on_put: dict[int, Callable[[Sink], None]]
    polls_during_put: list[int]
    consumer: FakeConsumer

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context
        self.calls = 0

    async def put(self, batch: RecordBatch) -> None:
        if not len(batch) and not batch.ranges:
            return
        self.calls += 1
        before = self.consumer.batches
        await asyncio.sleep(0.02)  # the sink's own work: the next poll runs meanwhile
        Sink.polls_during_put.append(self.consumer.batches - before)
        hook = Sink.on_put.pop(self.calls, None)
        if hook is not None:
            hook(self)  # may raise: then this put did not happen
        rows = batch.table.select(["kafka_partition", "kafka_offset"]).to_pylist()
        Sink.puts.append(
            (
                [(r.partition, r.start, r.end) for r in batch.ranges],
                [(row["kafka_partition"], row["kafka_offset"]) for row in rows],
            )
        )

    async def stop(self) -> None:
        pass


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> FakeConsumer:
    fake = install(monkeypatch)
    Sink.puts, Sink.on_put, Sink.polls_during_put, Sink.consumer = [], {}, [], fake
    return fake


async def run(consumer: FakeConsumer, **connector: str) -> None:
    inc = incarnation(Sink, **connector)
    inc.start()
    try:
        await wait_until(lambda: consumer.empty_polls_at_end > 0, 20, "the log drained", 0.005)
    finally:
        inc.ask()
        await asyncio.wait_for(inc.wait(), 10)
    assert inc.failure is None, inc.trace


def audit(again: Mapping[int, range] | None = None) -> None:
    """Ranges claim what ``put`` got; every offset once, plus ``again[p]`` a second time."""
    for ranges, rows in Sink.puts:
        claimed = {(p, o) for p, start, end in ranges for o in range(start, end)}
        assert claimed == set(rows), f"ranges {ranges} claim {sorted(claimed ^ set(rows))[:5]}"
    for tp in TPS:
        got = sorted(o for _, rows in Sink.puts for p, o in rows if p == tp.partition)
        want = sorted([*range(RECORDS), *(again or {}).get(tp.partition, range(0))])
        assert got == want, f"{tp}: {len(got)} offsets delivered, {len(want)} expected"


async def test_the_next_poll_is_made_while_put_works(consumer: FakeConsumer) -> None:
    await run(consumer)
    audit()
    # Records were handed out (poll N+1) while put worked on poll N, for most puts.
    overlapped = sum(1 for n in Sink.polls_during_put if n > 0)
    assert overlapped >= len(Sink.polls_during_put) // 2, Sink.polls_during_put


async def test_a_seek_during_put_wins_over_the_poll_ahead(consumer: FakeConsumer) -> None:
    # Inside the 3rd put (offsets 20..29 of each partition), the next poll has handed 30..39
    # out. The sink asks partition 0 to be read again from 25: 25..29 come twice, 30.. once,
    # partition 1 loses nothing though its next records were polled ahead too.
    tp0 = TopicPartition("t", 0)
    Sink.on_put[3] = lambda sink: sink.context.offset(tp0, 25)
    await run(consumer)
    assert any(Sink.polls_during_put)
    audit(again={0: range(25, 30)})


async def test_a_retry_rewinds_past_the_poll_ahead(consumer: FakeConsumer) -> None:
    # The 4th put fails once with a retriable error: its batch and the records polled ahead
    # meanwhile are read again; none is lost, none reaches put twice (the failed put kept
    # nothing).
    def fail(sink: Sink) -> None:
        raise RetriableError("the table is busy")

    Sink.on_put[4] = fail
    await run(consumer)
    audit()


async def test_partitions_the_sink_pauses_during_put_get_nothing_more(
    consumer: FakeConsumer,
) -> None:
    # The 2nd put pauses partition 0 (the poll ahead has its next records already); no later
    # put gets a record of it until the 5th resumes it.
    tp0 = TopicPartition("t", 0)
    paused_in: list[int] = []

    def pause(sink: Sink) -> None:
        sink.context.pause(tp0)
        paused_in.append(len(Sink.puts))

    def resume(sink: Sink) -> None:
        sink.context.resume(tp0)
        paused_in.append(len(Sink.puts))

    Sink.on_put[2] = pause
    Sink.on_put[5] = resume
    await run(consumer)
    audit()
    first, last = paused_in[0] + 1, paused_in[1] + 1  # the puts after the pause, to the resume
    while_paused = [rows for _, rows in Sink.puts[first:last]]
    assert while_paused and all(p == 1 for rows in while_paused for p, _ in rows)
