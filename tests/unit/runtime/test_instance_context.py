"""``InstanceContext`` and ``TaskReconfigurations`` (daemon.runtime.instance): requests from the
loop or another thread reach the owner only while the instance runs; rounds run one at a time,
requests during one make exactly one more, a failing round is tried again after a doubling
wait, and cancel ends it."""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest

from daemon.runtime import instance
from daemon.runtime.instance import InstanceContext, TaskReconfigurations


class Owner:
    name = "c"

    def __init__(self) -> None:
        self.requests: list[InstanceContext] = []
        self.failures: list[BaseException] = []

    def reconfiguration_requested(self, context: InstanceContext) -> None:
        self.requests.append(context)

    def instance_failed(self, context: InstanceContext, error: BaseException) -> None:
        self.failures.append(error)


async def _until(check: object, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.005)


async def test_requests_reach_the_owner_from_the_loop_and_other_threads() -> None:
    owner = Owner()
    ctx = InstanceContext(owner, asyncio.get_running_loop())
    ctx.request_task_reconfiguration()
    assert owner.requests == [ctx]
    thread = threading.Thread(target=lambda: ctx.raise_error(ValueError("x")))
    thread.start()
    thread.join()
    await _until(lambda: owner.failures)
    assert isinstance(owner.failures[0], ValueError)


async def test_a_closed_context_changes_nothing() -> None:
    owner = Owner()
    ctx = InstanceContext(owner, asyncio.get_running_loop())
    ctx.closed = True
    ctx.request_task_reconfiguration()
    threading.Thread(target=ctx.request_task_reconfiguration).start()
    ctx.raise_error(ValueError("late"))
    await asyncio.sleep(0.05)  # a window for a wrongly scheduled call to arrive
    assert owner.requests == [] and owner.failures == []


async def test_requests_during_a_round_make_one_more_round() -> None:
    started: list[int] = []
    gate = asyncio.Event()

    async def reconfigure() -> None:
        started.append(len(started))
        await gate.wait()

    r = TaskReconfigurations("c", reconfigure)
    r.request()
    await _until(lambda: started)
    for _ in range(5):
        r.request()
    gate.set()
    await _until(lambda: r.rounds == 2)
    assert started == [0, 1] and not r.running


async def test_a_failing_round_is_tried_again_with_a_growing_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(instance, "BACKOFF_FIRST", 0.01)
    attempts: list[float] = []

    async def reconfigure() -> None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 4:
            raise ConnectionError("the leader is away")

    r = TaskReconfigurations("c", reconfigure)
    r.request()
    await _until(lambda: r.rounds == 1)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert len(attempts) == 4 and gaps[2] > gaps[0]


async def test_cancel_ends_the_rounds() -> None:
    async def reconfigure() -> None:
        await asyncio.sleep(30)  # a round that would outlive the instance

    r = TaskReconfigurations("c", reconfigure)
    r.request()
    await asyncio.sleep(0)
    assert r.running
    r.cancel()
    await asyncio.sleep(0.01)
    assert not r.running and r.rounds == 0


async def test_a_round_that_stops_its_instance_is_not_cancelled_half_way() -> None:
    """A round failing the connector stops its instance, which cancels the rounds: the round
    itself finishes that stop (it is not cancelled at its next await) and none follows."""
    finished: list[str] = []
    r: TaskReconfigurations

    async def reconfigure() -> None:
        r.cancel()  # as ConnectorRuntime._stop_instance does
        await asyncio.sleep(0.01)  # the instance's stop() awaits
        finished.append("stop")

    r = TaskReconfigurations("c", reconfigure)
    r.request()
    r.request()  # one more round asked for: none may follow the stop
    await _until(lambda: finished)
    await asyncio.sleep(0.05)  # a window for a wrong further round
    assert finished == ["stop"] and not r.running
