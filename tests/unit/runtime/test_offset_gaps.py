"""``OffsetGaps`` (errors.offset.out.of.range) against a fake incarnation: which partitions it
acts on, and what each policy does. The real broker case is
tests/integration/runtime/test_offsets_out_of_range.py."""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from typing import Any

import pytest

from daemon.config import parse_connector
from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import InvalidConfig
from daemon.runtime.gaps import OffsetGaps, OffsetOutOfRange

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


def gaps(host: Host, policy: str | None, metrics: Metrics | None = None) -> OffsetGaps:
    extra = {} if policy is None else {"errors.offset.out.of.range": policy}
    config = parse_connector({"name": "c", "connector.class": "x:Y", "topics": "t", **extra})
    g = OffsetGaps(host, metrics)  # type: ignore[arg-type]
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
