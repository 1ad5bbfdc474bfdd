"""Offset ranges of a poll, errors.retry.*, and callback deadlines."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pytest

from daemon.config import parse_connector
from daemon.connectors.api import TaskId
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import ConversionError, RetriableError, TaskTimeout, WriteTimeout
from daemon.runtime.incarnation.context import TaskContext
from daemon.runtime.incarnation.deadlines import with_deadline
from daemon.runtime.incarnation.progress import PartitionProgress, offset_ranges
from daemon.runtime.incarnation.retry import Retrier, RetryPolicy
from daemon.runtime.settings import TaskSettings

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


def test_the_sinks_retriable_error_is_retried_past_errors_retry_timeout() -> None:
    """Connect retries a RetriableException from put until it succeeds: errors.retry.timeout
    (0 by default: no retry) does not bound it; the sink's context.timeout sets the wait."""
    now = [100.0]
    policy = RetryPolicy(0.0, 2.0, clock=lambda: now[0])
    assert policy.next_delay(WriteTimeout("slow")) is None  # the budget rules the others
    for _ in range(50):
        now[0] += 60.0
        delay = policy.next_delay(RetriableError("database unreachable"))
    assert delay == 2.0  # the doubling, capped by errors.retry.delay.max.ms
    assert policy.next_delay(RetriableError("still"), asked=0.25) == 0.25


async def test_the_retry_state_lasts_until_the_failed_step_succeeds() -> None:
    host, wake = _Host(), asyncio.Event()
    r = Retrier(host, wake)
    r.policy = RetryPolicy(0.0, 60.0)
    host.context.timeout(1500)  # Connect's SinkTaskContext.timeout, once
    assert r.after(RetriableError("db down\ntrace"), "deliver") == 1.5
    assert r.state is not None and r.state.reason == "RetriableError: db down"
    first = r.state.since
    assert r.after(RetriableError("db down"), "deliver") == pytest.approx(0.6)
    assert r.state.attempts == 2 and r.state.since == first
    assert r.state.next_retry >= r.state.since
    r.succeeded("commit")  # a periodic commit that works is no recovery of put
    assert r.state is not None and r.policy.attempts == 2
    r.succeeded("deliver")
    assert r.state is None and r.policy.attempts == 0
    with pytest.raises(TypeError, match="milliseconds"):
        host.context.timeout(1.5)  # type: ignore[arg-type]
    host.context.timeout(-1)
    assert host.context.take_retry_wait() is None


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


class _Host:
    """What the retry part of an incarnation sees (``RetryHost``), on fakes."""

    def __init__(self) -> None:
        self.id = TaskId("c", 0)
        self.asked = False
        self.context = TaskContext(self.id, 1, {}, None)  # type: ignore[arg-type]
        self.context.set_assignment(frozenset({TP0, TP1}))
        self.consumer = _Seeker()
        self.progress = PartitionProgress()
        self.progress.next = {TP0: 10, TP1: 5}
        self.progress.delivering = [OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 5, 9)]

    def assignment(self) -> frozenset[TopicPartition]:
        return self.context.assignment()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.consumer.seek(tp, offset)
        self.progress.seek(tp, offset)

    def apply_seeks(self) -> None:
        for tp, offset in self.context.take_seeks().items():
            self.seek(tp, offset)

    def take_retry_wait(self) -> float | None:
        return self.context.take_retry_wait()


async def test_a_retry_rereads_the_failed_batch_unless_the_sink_asked_to_seek() -> None:
    host, wake = _Host(), asyncio.Event()
    r = Retrier(host, wake)
    r.policy = RetryPolicy(None, 1.0)
    host.context.offset(TP1, 2)  # the sink asked to re-read partition 1 from its committed offset
    assert r.after(WriteTimeout("slow"), "deliver") == pytest.approx(0.3)
    assert host.consumer.seeks == [(TP0, 10), (TP1, 5), (TP1, 2)]
    assert host.progress.next == {TP0: 10, TP1: 2} and host.progress.delivering == []
    started = asyncio.get_running_loop().time()
    wake.set()  # a stop cuts the wait short
    await r.wait(30.0)
    assert asyncio.get_running_loop().time() - started < 1.0


def test_task_deadlines_from_the_worker_config() -> None:
    from daemon.config import parse_worker

    worker = parse_worker(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "task.consumer.start.timeout.ms": "90000",
            "config.resolve.timeout.ms": "5000",
        }
    ).config
    settings = TaskSettings.from_worker(worker)
    assert settings.consumer_start_timeout == 90.0
    assert settings.resolve_timeout == 5.0
    # The deadlines with no key keep their defaults.
    assert settings.epoch_timeout == TaskSettings().epoch_timeout
