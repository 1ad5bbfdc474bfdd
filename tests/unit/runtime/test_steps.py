"""Offset ranges of a poll, errors.retry.*, and callback deadlines."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pytest

from daemon.config import parse_connector
from daemon.connectors.api import TaskContext, TaskId
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import ConversionError, TaskTimeout, WriteTimeout
from daemon.runtime.retrying import Retrying
from daemon.runtime.steps import RetryPolicy, TaskSettings, offset_ranges, with_deadline

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@dataclass
class Rec:
    offset: int


def test_ranges_start_at_the_position_not_the_first_record() -> None:
    polled = {TP0: [Rec(12), Rec(13)], TP1: [Rec(5)]}
    ranges = offset_ranges(polled, {TP0: 10})
    assert sorted(ranges) == [OffsetRange("t", 0, 10, 14), OffsetRange("t", 1, 5, 6)]


def test_a_position_past_the_first_record_is_not_trusted(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert offset_ranges({TP0: [Rec(3)]}, {TP0: 7}) == [OffsetRange("t", 0, 3, 4)]
    assert "comes before the position" in caplog.text


def test_retry_policy_backs_off_and_gives_up_after_the_timeout() -> None:
    now = [100.0]
    policy = RetryPolicy(5.0, 1.0, clock=lambda: now[0])
    retriable = WriteTimeout("slow")
    assert policy.next_delay(retriable) == pytest.approx(0.3)
    now[0] += 0.3
    assert policy.next_delay(retriable) == pytest.approx(0.6)
    now[0] += 0.6
    assert policy.next_delay(retriable) == pytest.approx(1.0)  # capped by delay.max
    now[0] = 104.5
    assert policy.next_delay(retriable) == pytest.approx(0.5)  # never past the deadline
    now[0] = 105.0
    assert policy.next_delay(retriable) is None  # budget spent: the task fails
    policy.succeeded()
    assert policy.next_delay(retriable) == pytest.approx(0.3)  # a success starts it again


def test_retry_policy_retries_only_retriable_errors_and_not_with_timeout_zero() -> None:
    forever = RetryPolicy(None, 60.0)
    assert forever.next_delay(ConversionError("bad json")) is None
    assert forever.next_delay(ValueError("a bug")) is None
    for _ in range(100):
        delay = forever.next_delay(WriteTimeout("slow"))
    assert delay == 60.0
    assert RetryPolicy(0.0, 60.0).next_delay(WriteTimeout("slow")) is None


def test_retry_policy_from_connector_config() -> None:
    config = parse_connector(
        {
            "name": "c",
            "connector.class": "x.y:Z",
            "topics": "t",
            "errors.retry.timeout": "-1",
            "errors.retry.delay.max.ms": "2500",
        }
    ).config
    policy = RetryPolicy.from_config(config)
    assert policy.timeout is None and policy.delay_max == 2.5


async def test_deadline_names_the_step() -> None:
    with pytest.raises(TaskTimeout, match=r"put\(\) did not return within 0\.05 s"):
        await with_deadline("task c-0: put()", asyncio.sleep(5), 0.05)
    assert await with_deadline("x", asyncio.sleep(0, result=7), 1.0) == 7


async def test_a_timeout_raised_inside_passes_through() -> None:
    async def inner() -> None:
        raise TimeoutError("the sink's own")

    with pytest.raises(TimeoutError, match="the sink's own"):
        await with_deadline("x", inner(), 1.0)


def test_callback_deadline_covers_two_writes() -> None:
    assert TaskSettings(write_timeout=10.0).callback_timeout == 50.0


class _Seeker:
    def __init__(self) -> None:
        self.seeks: list[tuple[TopicPartition, int]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


class _Retrier(Retrying):
    """The retry half of an incarnation, on fakes."""

    def __init__(self) -> None:
        self.id = TaskId("c", 0)
        self.context = TaskContext(self.id, 1, {}, None)  # type: ignore[arg-type]
        self.context.set_assignment(frozenset({TP0, TP1}))
        self.consumer = _Seeker()  # type: ignore[assignment]
        self._stop_event = asyncio.Event()
        self._next = {TP0: 10, TP1: 5}
        self._errant = None
        self._retry = RetryPolicy(None, 1.0)
        self._delivering = [OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 5, 9)]

    def _apply_seeks(self) -> None:
        assert self.context is not None and self.consumer is not None
        for tp, offset in self.context.take_seeks().items():
            self.consumer.seek(tp, offset)
            self._next[tp] = offset


async def test_a_retry_rereads_the_failed_batch_unless_the_sink_asked_to_seek() -> None:
    r = _Retrier()
    assert r.context is not None
    r.context.offset(TP1, 2)  # the sink asked to re-read partition 1 from its committed offset
    r._rewind(WriteTimeout("slow"), 0.3)
    assert r.consumer.seeks == [(TP0, 10), (TP1, 5), (TP1, 2)]  # type: ignore[attr-defined]
    assert r._next == {TP0: 10, TP1: 2} and r._delivering == []
    started = asyncio.get_running_loop().time()
    r._stop_event.set()  # a stop cuts the wait short
    await r._pause_for(30.0)
    assert asyncio.get_running_loop().time() - started < 1.0
