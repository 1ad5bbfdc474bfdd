"""The table sinks' writer (``tables/writer.py``) on its own: one write in flight, writes that
grow behind a backlog, the bound on the buffer, the linger, a failure that stops writing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pyarrow as pa
import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.buffer import RecordBuffer
from daemon.connectors.tables.writer import FlushPolicy, Writer
from daemon.connectors.testing import sample_batch
from daemon.errors import WriteTimeout

TP = TopicPartition("t", 0)


class Sink:
    """A write that holds until the test lets it go, recording what each write covered."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, int]] = []  # (start, end) of each write
        self.gate = asyncio.Semaphore(0)
        self.started = asyncio.Event()
        self.fail_next: BaseException | None = None
        self.committed: dict[TopicPartition, int] = {}

    async def write(self, table: pa.Table, ranges: tuple[OffsetRange, ...]) -> None:
        self.started.set()
        await self.gate.acquire()
        if self.fail_next is not None:
            failure, self.fail_next = self.fail_next, None
            raise failure
        (r,) = ranges
        assert table.num_rows == len(r)
        self.writes.append((r.start, r.end))
        self.committed[r.tp] = r.end


def policy(**overrides: float | int | None) -> FlushPolicy:
    values: dict[str, float | int | None] = {
        "max_records": 10,
        "interval": 60.0,
        "linger": None,
        "buffer_records": 50,
        "buffer_bytes": 1 << 30,
    }
    values.update(overrides)
    return FlushPolicy(**values)  # type: ignore[arg-type]


@pytest.fixture
async def running() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def start(buffer: RecordBuffer, p: FlushPolicy, sink: Sink, running: list) -> Writer:  # type: ignore[type-arg]
    writer = Writer(buffer, p, sink.write)
    running.append(asyncio.create_task(writer.run()))
    return writer


async def put(writer: Writer, buffer: RecordBuffer, sink: Sink, start: int, n: int) -> None:
    """What ``ParquetSinkTask.put`` does with the writer."""
    buffer.add(sample_batch("t", 0, start, n), writer.continues_after(sink.committed))
    writer.poke()
    await writer.make_room()


async def test_behind_a_backlog_the_next_write_takes_all_that_came_meanwhile(
    running: list,  # type: ignore[type-arg]
) -> None:
    buffer, sink = RecordBuffer(), Sink()
    writer = start(buffer, policy(), sink, running)
    await put(writer, buffer, sink, 0, 10)  # due: the first write starts with these 10
    await asyncio.wait_for(sink.started.wait(), 5)
    for start_at in range(10, 40, 10):  # read on while it is in flight: 30 more
        await put(writer, buffer, sink, start_at, 10)
    assert writer.in_flight == (OffsetRange("t", 0, 0, 10),) and buffer.rows == 30
    sink.gate.release()  # the first ends; the second takes all 30 at once
    sink.gate.release()
    await asyncio.wait_for(writer.quiet(), 5)
    assert sink.writes == [(0, 10), (10, 40)]


async def test_put_waits_while_the_buffer_is_full_and_the_write_is_in_flight(
    running: list,  # type: ignore[type-arg]
) -> None:
    buffer, sink = RecordBuffer(), Sink()
    writer = start(buffer, policy(buffer_records=20), sink, running)
    await put(writer, buffer, sink, 0, 10)
    await asyncio.wait_for(sink.started.wait(), 5)
    await put(writer, buffer, sink, 10, 15)  # 15 buffered: room left
    blocked = asyncio.create_task(put(writer, buffer, sink, 25, 10))  # 25 ≥ 20: waits
    for _ in range(20):  # every chance to run: it must still be waiting
        await asyncio.sleep(0)
    assert not blocked.done()
    sink.gate.release()  # the write in flight ends; the next takes the 25: room again
    await asyncio.wait_for(blocked, 5)
    assert sink.writes == [(0, 10)] and writer.in_flight == (OffsetRange("t", 0, 10, 35),)
    sink.gate.release()
    await asyncio.wait_for(writer.quiet(), 5)
    assert sink.writes == [(0, 10), (10, 35)]


async def test_caught_up_the_buffer_is_written_after_the_linger_not_the_interval(
    running: list,  # type: ignore[type-arg]
) -> None:
    buffer, sink = RecordBuffer(), Sink()
    writer = start(buffer, policy(linger=0.1, interval=60.0), sink, running)
    sink.gate.release()
    loop = asyncio.get_running_loop()
    began = loop.time()
    await put(writer, buffer, sink, 0, 3)  # far below max_records
    await asyncio.wait_for(sink.started.wait(), 5)
    assert 0.09 <= loop.time() - began < 5.0
    await asyncio.wait_for(writer.quiet(), 5)
    assert sink.writes == [(0, 3)]


async def test_without_a_linger_a_small_buffer_waits_for_the_interval(
    running: list,  # type: ignore[type-arg]
) -> None:
    buffer, sink = RecordBuffer(), Sink()
    writer = start(buffer, policy(linger=None, interval=60.0), sink, running)
    await put(writer, buffer, sink, 0, 3)
    await writer.quiet()  # nothing due
    assert not sink.started.is_set() and buffer.rows == 3
    sink.gate.release()
    await asyncio.wait_for(writer.drain(), 5)  # a drain writes it at once
    assert sink.writes == [(0, 3)] and not buffer.waiting


async def test_a_failed_write_stops_writing_until_its_failure_is_taken(
    running: list,  # type: ignore[type-arg]
) -> None:
    buffer, sink = RecordBuffer(), Sink()
    writer = start(buffer, policy(), sink, running)
    sink.fail_next = WriteTimeout("killed at its deadline (test)")
    await put(writer, buffer, sink, 0, 10)
    await asyncio.wait_for(sink.started.wait(), 5)
    await put(writer, buffer, sink, 10, 10)  # continues the write in flight
    sink.gate.release()
    await asyncio.wait_for(writer.drain(), 5)  # returns on the failure
    assert writer.failed and sink.writes == [] and buffer.rows == 0  # nothing past it
    failure = writer.take_failure()
    assert isinstance(failure, WriteTimeout) and not writer.failed
    # The task re-reads from the committed offsets (none: from 0) and the writer resumes.
    sink.gate.release()
    await put(writer, buffer, sink, 0, 10)
    await asyncio.wait_for(writer.quiet(), 5)
    assert sink.writes == [(0, 10)]
