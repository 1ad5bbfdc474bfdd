"""The defining rule on the real ``TaskSlot``: if the old executor cannot be reaped, no new
incarnation starts; once it is reaped, a restart proceeds.

Real parts throughout: a ``ConnectorRuntime`` with its ``TaskSlot`` and ``Incarnation`` (HangSink,
whose every write blocks forever in its executor), a real Kafka consumer, and a private
``ExecutorPool`` of executors without Spark (they start in a fraction of a second; the rule is
the runtime's, not Spark's). The only test seam is ``daemon.executor.process.set_kill_hook``,
keyed by the blocked executor's pid: it makes that executor's kill hang until the test lets it
go, or not take at all (the process survives, as one stuck in uninterruptible sleep would).

What "no new incarnation" is checked by: the slot keeps the same ``Incarnation`` object and
epoch, and the pool's event log (``ExecutorPool.events``) shows no further lease for the task.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.daemon import wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

from daemon.config import Mode, Providers, parse_worker
from daemon.connectors.api import default_registry
from daemon.connectors.registry import validate_connector
from daemon.errors import StopFailed
from daemon.executor import ExecutorPool
from daemon.executor.info import PoolEvent, PoolEventKind
from daemon.executor.process import kill_tree, read_stat, set_kill_hook
from daemon.runtime.connector import ConnectorRuntime
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.model import State, TargetState
from daemon.runtime.settings import TaskSettings
from daemon.runtime.slot.slot import TaskSlot
from daemon.storage.epochs import EpochStore

pytestmark = pytest.mark.integration

NAME = "slot-hang"
TASK = f"{NAME}-0"
GRACEFUL = 0.5
KILL = 2.0


class KillHold:
    """The kill seam for one executor pid: ``hang`` (until ``release``) or ``survive``."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.released = threading.Event()
        self.calls = 0

    def hang(self, pid: int) -> None:
        def hook() -> bool:
            self.calls += 1
            self.released.wait(120.0)  # bounded: a forgotten hold cannot wedge the session
            return True

        self.pids.append(pid)
        set_kill_hook(pid, hook)

    def survive(self, pid: int) -> None:
        def hook() -> bool:
            self.calls += 1
            return False

        self.pids.append(pid)
        set_kill_hook(pid, hook)

    def release(self) -> None:
        for pid in self.pids:
            set_kill_hook(pid, None)
        self.released.set()


@pytest.fixture
def kill_hold() -> Iterator[KillHold]:
    hold = KillHold()
    try:
        yield hold
    finally:
        hold.release()


@pytest.fixture
async def hang_connector(
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    make_pool: Callable[..., Awaitable[ExecutorPool]],
    kill_hold: KillHold,
    tmp_path: Path,
) -> AsyncIterator[tuple[ConnectorRuntime, ExecutorPool]]:
    """A HangSink connector with one task on a private pool of executors without Spark;
    automatic restarts off, so every restart in a test is the test's own."""
    pool = await make_pool(with_spark=False, cds=False, start_timeout=30.0)
    await pool.wait_ready(2, timeout=30.0)
    props = worker_properties(
        kafka_bootstrap, tmp_path / "state", **{"task.write.timeout.ms": "600000"}
    )
    worker = parse_worker(props, mode=Mode.STANDALONE).config
    env = RuntimeEnv(
        worker=worker,
        executors=pool,
        epochs=EpochStore(worker.state_dir),
        providers=Providers.from_worker(worker),
        registry=default_registry,
        settings=TaskSettings.from_worker(worker),
        graceful_timeout=GRACEFUL,
        kill_timeout=KILL,
    )
    topic = await kafka_topic(partitions=1)
    config = validate_connector(
        NAME,
        {
            "connector.class": "HangSink",
            "tasks.max": "1",
            "topics": topic,
            "errors.restart.enabled": "false",
        },
    )
    connector = ConnectorRuntime(NAME, config, TargetState.RUNNING, env)
    try:
        async with connector.lock:
            await connector.start()
        yield connector, pool
    finally:
        kill_hold.release()
        with contextlib.suppress(StopFailed):
            await connector.shutdown("the test is over")


def _blocked_pid(slot: TaskSlot) -> int | None:
    """The executor pid the live incarnation's write blocks in, once the executor said so."""
    inc = slot.inc
    if inc is None or inc.done or inc.task is None:
        return None
    pid: int | None = getattr(inc.task, "executor_pid", None)
    return pid


def _events(pool: ExecutorPool, kind: PoolEventKind) -> list[PoolEvent]:
    return [e for e in pool.events.snapshot() if e.kind is kind and e.task_id == TASK]


def _runs(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.running


def _assert_no_new_incarnation(slot: TaskSlot, pool: ExecutorPool, inc: Any, pid: int) -> None:
    assert slot.inc is inc, "a new incarnation was started while the old executor lives"
    assert [e.pid for e in _events(pool, PoolEventKind.LEASED)] == [pid]
    status = slot.status("w")
    assert status.state is State.FAILED
    assert status.trace is not None and f"pid {pid}" in status.trace, status.trace
    assert status.incarnation == inc.first_epoch


async def _restart_proceeds(slot: TaskSlot, pool: ExecutorPool, old_pid: int, epoch: int) -> None:
    """A restart now succeeds: a new incarnation (larger epoch) blocks in a new executor, which
    was leased only after the old one was reaped."""
    await slot.restart("the old executor is reaped now")
    assert slot.state is State.RUNNING
    assert slot.inc is not None and slot.inc.epoch > epoch
    new_pid = await wait_until(lambda: _blocked_pid(slot), 60, "the new incarnation's block")
    assert new_pid != old_pid
    assert read_stat(old_pid) is None, "the old executor is not reaped (zombie or running)"
    leases = _events(pool, PoolEventKind.LEASED)
    assert [e.pid for e in leases] == [old_pid, new_pid]
    reaped = [e for e in pool.events.snapshot() if e.kind is PoolEventKind.REAPED]
    old_reaps = [e for e in reaped if e.pid == old_pid]
    if old_reaps:  # reaped by the pool (not by the test, after a kill that did not take)
        assert old_reaps[0].at < leases[1].at


async def test_a_reap_that_hangs_keeps_the_next_incarnation_out(
    hang_connector: tuple[ConnectorRuntime, ExecutorPool], kill_hold: KillHold
) -> None:
    connector, pool = hang_connector
    slot = connector.slots[0]
    pid = await wait_until(lambda: _blocked_pid(slot), 60, "the first block")
    inc, epoch = slot.inc, slot.inc.epoch if slot.inc else 0
    kill_hold.hang(pid)

    # The kill hangs: the coroutine cannot finish its cancellation within the kill timeout.
    with pytest.raises(StopFailed, match=f"executor pid {pid}"):
        await slot.restart("first attempt")
    assert kill_hold.calls == 1
    _assert_no_new_incarnation(slot, pool, inc, pid)
    assert _runs(pid)

    # Again, still held: the second cancellation ends the coroutine, but the pool still holds
    # the executor, so the reap is not confirmed either.
    with pytest.raises(StopFailed, match=f"executor pid {pid}"):
        await slot.restart("second attempt")
    _assert_no_new_incarnation(slot, pool, inc, pid)
    await wait_until(lambda: inc is not None and inc.done, 30, "the old coroutine's end")
    assert not slot.live and _runs(pid)

    # The known gap: a slot whose stop failed and whose coroutine ended is not live, so the
    # connector's ``_start_tasks`` calls ``start()`` on it. It must refuse.
    with pytest.raises(StopFailed, match="not confirmed reaped"):
        await slot.start()
    await connector._start_tasks()
    _assert_no_new_incarnation(slot, pool, inc, pid)

    # The kill goes through: the pool reaps the executor, and a restart proceeds.
    kill_hold.release()
    await wait_until(lambda: read_stat(pid) is None, 30, f"executor {pid} reaped by the pool")
    await _restart_proceeds(slot, pool, pid, epoch)


async def test_an_executor_that_survives_its_kill_keeps_the_next_incarnation_out(
    hang_connector: tuple[ConnectorRuntime, ExecutorPool], kill_hold: KillHold
) -> None:
    connector, pool = hang_connector
    slot = connector.slots[0]
    pid = await wait_until(lambda: _blocked_pid(slot), 60, "the first block")
    inc, epoch = slot.inc, slot.inc.epoch if slot.inc else 0
    kill_hold.survive(pid)
    try:
        # The pool's kill "does not take": the pool gives the executor up, the write ends,
        # the coroutine ends; only /proc still shows the executor running.
        with pytest.raises(StopFailed, match=f"executor pid {pid} still runs"):
            await slot.restart("first attempt")
        assert not slot.live and _runs(pid)
        assert pool.current_pid(TASK) is None  # the pool no longer tracks it
        _assert_no_new_incarnation(slot, pool, inc, pid)

        # Every way in refuses while it runs: a restart (which checks that very process again,
        # though the pool forgot it), a start, the connector starting its tasks.
        with pytest.raises(StopFailed, match=f"executor pid {pid} still runs"):
            await slot.restart("second attempt")
        with pytest.raises(StopFailed, match="not confirmed reaped"):
            await slot.start()
        await connector._start_tasks()
        _assert_no_new_incarnation(slot, pool, inc, pid)
    finally:
        # The kill finally takes (the process is ours: the pool spawned it in this process).
        kill_hold.release()
        report = kill_tree(pid, reap_leader=True, session=pid, timeout=10.0)
        assert report.clean, report
    await _restart_proceeds(slot, pool, pid, epoch)
