"""The assignment callback holds aiokafka up for ``assign_budget`` at most (aiokafka sends no
heartbeat while it runs): an open that takes longer, or an assignment waiting for the lock a
``put`` holds, goes on beside the task with its partitions held, and releases them when done;
the next revocation waits for it; a failure after the callback returned still fails the task."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.daemon import worker_properties

from daemon.config import Mode, parse_worker
from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.runtime.incarnation.progress import PartitionProgress
from daemon.runtime.incarnation.rebalance import Rebalancer
from daemon.runtime.settings import TaskSettings

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Context:
    def __init__(self) -> None:
        self._assignment: frozenset[TopicPartition] = frozenset()

    def assignment(self) -> frozenset[TopicPartition]:
        return self._assignment

    def set_assignment(self, tps: frozenset[TopicPartition]) -> None:
        self._assignment = frozenset(tps)

    @contextlib.contextmanager
    def opening(self, raiser: object) -> Iterator[None]:
        yield


class Host:
    def __init__(self, open_for: float = 0.0, fail: bool = False) -> None:
        self.id = TaskId("c", 0)
        self.asked = False
        self.context = Context()
        self.progress = PartitionProgress()
        self.lock = asyncio.Lock()
        self.open_for = open_for
        self.fail = fail
        self.events: list[str] = []
        self.released: frozenset[TopicPartition] = frozenset()

    async def close_partitions(self, owned: frozenset[TopicPartition]) -> None:
        self.events.append(f"close {sorted(tp.partition for tp in owned)}")

    async def open_partitions(self, new: frozenset[TopicPartition]) -> None:
        await asyncio.sleep(self.open_for)  # the open's own duration, as a slow sink's
        if self.fail:
            raise RuntimeError("the table refused the claim")
        self.events.append(f"opened {sorted(tp.partition for tp in new)}")

    def adopt_epoch(self, epoch: int) -> None:
        self.events.append(f"epoch {epoch}")

    def release(self, partitions: frozenset[TopicPartition]) -> None:
        self.released = self.released | partitions
        self.events.append(f"released {sorted(tp.partition for tp in partitions)}")


async def _epoch() -> int:
    return 7


async def test_a_quick_assignment_is_done_when_the_callback_returns() -> None:
    host = Host()
    r = Rebalancer(host, asyncio.Event(), _epoch, 5.0, assign_budget=1.0)
    await r.partitions_assigned(frozenset({A, B}))
    assert host.events == ["epoch 7", "opened [0, 1]", "released [0, 1]"]


async def test_a_slow_open_returns_to_the_consumer_within_the_budget() -> None:
    host = Host(open_for=0.6)
    r = Rebalancer(host, asyncio.Event(), _epoch, 5.0, assign_budget=0.1)
    began = time.monotonic()
    await r.partitions_assigned(frozenset({A}))
    assert time.monotonic() - began < 0.4
    assert host.released == frozenset()  # held: nothing of them is fetched yet
    assert host.context.assignment() == {A}
    # A revocation meanwhile waits for the assignment (the lock), then closes what it opened.
    await r.partitions_revoked(frozenset({A}))
    assert host.events == ["epoch 7", "opened [0]", "released [0]", "close [0]"]


async def test_an_assignment_waiting_for_a_put_does_not_hold_the_consumer() -> None:
    host = Host()
    r = Rebalancer(host, asyncio.Event(), _epoch, 5.0, assign_budget=0.1)
    async with host.lock:  # a put, waiting for an executor to start
        began = time.monotonic()
        await r.partitions_assigned(frozenset({B}))
        assert time.monotonic() - began < 0.4
        assert host.events == []
    deadline = time.monotonic() + 5
    while not host.released:
        assert time.monotonic() < deadline, host.events
        await asyncio.sleep(0.01)
    assert host.events == ["epoch 7", "opened [1]", "released [1]"]


async def test_a_failure_after_the_callback_returned_wakes_the_task() -> None:
    host = Host(open_for=0.3, fail=True)
    wake = asyncio.Event()
    r = Rebalancer(host, wake, _epoch, 5.0, assign_budget=0.05)
    await r.partitions_assigned(frozenset({A}))
    assert r.failure is None
    async with asyncio.timeout(5):
        await wake.wait()
    assert isinstance(r.failure, RuntimeError)
    assert host.released == frozenset()


async def test_cancel_ends_an_assignment_going_on_beside() -> None:
    host = Host(open_for=30.0)
    r = Rebalancer(host, asyncio.Event(), _epoch, 5.0, assign_budget=0.05)
    await r.partitions_assigned(frozenset({A}))
    r.cancel()
    async with asyncio.timeout(5):
        while r._running:
            await asyncio.sleep(0.01)
    assert host.released == frozenset()
    assert r.failure is None


@pytest.mark.parametrize(("session_ms", "budget"), [(10_000, 10 / 3), (6_000, 2.0)])
def test_the_budget_is_a_third_of_the_session(
    session_ms: int, budget: float, tmp_path: Path
) -> None:
    props = worker_properties("127.0.0.1:9092", tmp_path, session_timeout_ms=str(session_ms))
    worker = parse_worker(props, mode=Mode.STANDALONE).config
    assert TaskSettings.from_worker(worker).assign_budget == pytest.approx(budget)


def _never_awaited(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "was never awaited" in str(w.message)]


async def test_a_callback_cancelled_before_it_ran_leaves_no_coroutine_unawaited() -> None:
    # The incarnation is killed (Rebalancer.cancel) in the turn of the loop the assignment
    # callback made its task in: the task never runs a step. A coroutine made for it then would
    # be collected never awaited (a RuntimeWarning, an error under pytest: seen in CI).
    host = Host()
    r = Rebalancer(host, asyncio.Event(), _epoch, 5.0, assign_budget=1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback = asyncio.ensure_future(r.partitions_assigned(frozenset({A})))
        await asyncio.sleep(0)  # the callback made its task; that task has not run yet
        r.cancel()
        await callback
        assert host.events == [] and r.failure is None
        del callback
        gc.collect()
    assert _never_awaited(caught) == []


async def test_a_callback_for_an_incarnation_already_freed_fails_quietly() -> None:
    # A listener may outlive its incarnation (it reaches it through a weak proxy): a callback
    # then fails the way any callback failure does, kept in ``failure``, and leaves nothing
    # unawaited behind.
    host = Host()
    r = Rebalancer(weakref.proxy(host), asyncio.Event(), _epoch, 5.0, assign_budget=1.0)
    del host
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await r.partitions_assigned(frozenset({A}))
        gc.collect()
    assert isinstance(r.failure, ReferenceError)
    assert _never_awaited(caught) == []
