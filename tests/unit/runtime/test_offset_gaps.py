"""``OffsetGaps`` (errors.offset.out.of.range) against a fake incarnation: which partitions it
acts on, and what each policy does. The real broker case is
tests/integration/runtime/test_offsets_out_of_range.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Collection
from typing import Any

import pytest

from daemon.config import parse_connector
from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import ConnectdError, InvalidConfig
from daemon.runtime.incarnation import gaps as gaps_module
from daemon.runtime.incarnation.gaps import OffsetGaps, OffsetOutOfRange

TP = TopicPartition("t", 0)


class Consumer:
    def __init__(self, position: int | None, bounds: tuple[int, int]) -> None:
        self.position, self.bounds = position, bounds

    def fetch_position(self, tp: TopicPartition) -> int | None:
        return self.position

    async def log_bounds(self, tps: Collection[TopicPartition]) -> dict[Any, tuple[int, int]]:
        return dict.fromkeys(tps, self.bounds)


class Sink:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    async def offsets_skipped(self, tp: TopicPartition, start: int, end: int) -> None:
        self.calls.append(("skipped", tp, start, end))


class Host:
    id = TaskId("c", 0)

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.calls: list[Any] = []
        self.task = Sink(self.calls)

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset({TP})

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.calls.append(("seek", tp, offset))

    async def call(self, name: str, coro: Awaitable[None]) -> None:
        await coro


class Metrics:
    def __init__(self) -> None:
        self.skipped: list[Any] = []

    def record_offsets_skipped(self, connector: str, task: int, tp: Any, count: int) -> None:
        self.skipped.append((connector, task, tp, count))


def gaps(
    host: Host, policy: str | None, metrics: Metrics | None = None, **kwargs: Any
) -> OffsetGaps:
    extra = {} if policy is None else {"errors.offset.out.of.range": policy}
    config = parse_connector({"name": "c", "connector.class": "x:Y", "topics": "t", **extra})
    g = OffsetGaps(host, metrics, **kwargs)  # type: ignore[arg-type]
    g.configure(config.config)
    return g


async def test_fail_is_the_default_and_names_partition_offset_and_log_start() -> None:
    host = Host(Consumer(50, (80, 100)))
    with pytest.raises(OffsetOutOfRange) as caught:
        await gaps(host, None).handle({TP: 50})
    assert "partition t-0: the committed offset 50 is below the log start 80" in str(caught.value)
    assert not OffsetOutOfRange.retriable and host.calls == []


async def test_earliest_tells_the_sink_then_seeks_and_counts() -> None:
    host, metrics = Host(Consumer(50, (80, 100))), Metrics()
    await gaps(host, "earliest", metrics).handle({TP: 50})
    assert host.calls == [("skipped", TP, 50, 80), ("seek", TP, 80)]
    assert metrics.skipped == [("c", 0, TP, 30)]


async def test_beyond_the_log_end_fails_under_either_policy() -> None:
    for policy in ("fail", "earliest"):
        with pytest.raises(OffsetOutOfRange, match="beyond the log end 100"):
            await gaps(Host(Consumer(120, (80, 100))), policy).handle({TP: 120})


async def test_a_moved_position_or_an_offset_back_in_range_changes_nothing() -> None:
    moved = Host(Consumer(60, (80, 100)))  # sought elsewhere since the fetch
    await gaps(moved, "fail").handle({TP: 50})
    inside = Host(Consumer(90, (80, 100)))  # in the log by now
    await gaps(inside, "fail").handle({TP: 90})
    assert moved.calls == inside.calls == []


def test_the_setting_takes_fail_or_earliest_only() -> None:
    with pytest.raises(
        InvalidConfig, match=r"errors\.offset\.out\.of\.range: 'x' is not one of fail"
    ):
        parse_connector(
            {
                "name": "c",
                "connector.class": "x:Y",
                "topics": "t",
                "errors.offset.out.of.range": "x",
            }
        )


async def test_the_bounds_of_the_range_are_exact() -> None:
    # At the log end: nothing to skip (the next record will be there). One below the log
    # start: exactly that one offset skipped, the next fetch at the log start.
    at_end = Host(Consumer(100, (80, 100)))
    await gaps(at_end, "fail").handle({TP: 100})
    assert at_end.calls == []
    host, metrics = Host(Consumer(79, (80, 100))), Metrics()
    await gaps(host, "earliest", metrics).handle({TP: 79})
    assert host.calls == [("skipped", TP, 79, 80), ("seek", TP, 80)]
    assert metrics.skipped == [("c", 0, TP, 1)]
    with pytest.raises(OffsetOutOfRange, match="offset 101 is beyond the log end 100"):
        await gaps(Host(Consumer(101, (80, 100))), "earliest").handle({TP: 101})


class FailingConsumer(Consumer):
    """Its look-up of the log bounds fails ``failures`` times, then answers."""

    def __init__(self, position: int, failures: int) -> None:
        super().__init__(position, (80, 100))
        self.failures = failures
        self.attempts = 0

    async def log_bounds(self, tps: Collection[TopicPartition]) -> dict[Any, tuple[int, int]]:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError("the leader does not answer")
        return await super().log_bounds(tps)


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # raising=False: the same test runs against code without the setting (and fails there).
    monkeypatch.setattr(gaps_module, "RETRY_FIRST", 0.02, raising=False)
    monkeypatch.setattr(gaps_module, "RETRY_MAX", 0.08, raising=False)


async def test_a_failing_look_up_is_tried_again_after_growing_waits(short_waits: None) -> None:
    # What the main loop does while the look-up fails: every fetch raises the same
    # OutOfRange at once, and the offsets go to ``handle`` again.
    consumer = FailingConsumer(50, failures=1_000_000)
    host = Host(consumer)
    g = gaps(host, "earliest")
    started = time.monotonic()
    while time.monotonic() - started < 0.5:
        await g.handle({TP: 50})
    # Waits 0.02, 0.04, 0.08, 0.08, ...: 7 or 8 attempts in 0.5 s, not one per fetch.
    assert 5 <= consumer.attempts <= 9, consumer.attempts
    assert host.calls == []
    consumer.failures = consumer.attempts  # it answers again: the policy applies
    await g.handle({TP: 50})
    assert host.calls == [("skipped", TP, 50, 80), ("seek", TP, 80)]


async def test_a_look_up_failing_past_the_deadline_fails_the_task(
    short_waits: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gaps_module, "BOUNDS_DEADLINE", 0.3, raising=False)
    host = Host(FailingConsumer(50, failures=1_000_000))
    g = gaps(host, "earliest")
    started = time.monotonic()
    with pytest.raises(ConnectdError) as caught:
        while time.monotonic() - started < 5:
            await g.handle({TP: 50})
    assert 0.3 <= time.monotonic() - started < 1.0
    assert type(caught.value).__name__ == "LogBoundsUnavailable"
    assert caught.value.retriable and host.calls == []
    assert "offsets t-0@50 are out of range, and their log bounds could not be read" in str(
        caught.value
    )
    assert "ConnectionError: the leader does not answer" in str(caught.value)


async def test_a_stop_cuts_the_wait_between_look_ups_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaps_module, "RETRY_FIRST", 60.0)
    wake = asyncio.Event()
    g = gaps(Host(FailingConsumer(50, failures=1)), "earliest", wake=wake)
    asyncio.get_running_loop().call_later(0.05, wake.set)
    async with asyncio.timeout(5):
        await g.handle({TP: 50})
