"""Distributed mode's parts on the real broker, without worker processes: epochs drawn from
Kafka by several workers, and the assigned work of one worker following its assignments and the
config log (tasks that move away go through the stop sequence, a new config restarts them with
new epochs, a target state applies, a deleted connector stops)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import MappingProxyType

import pytest
from support.daemon import wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

from daemon.cluster import Allocation
from daemon.config import Mode, parse_worker
from daemon.connectors.api import default_registry
from daemon.connectors.registry import validate_connector
from daemon.executor import ExecutorPool
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.model import State, TargetState
from daemon.runtime.worker import Worker
from daemon.storage.kafka import ConfigSnapshot
from daemon.storage.kafka.epochs import KafkaEpochs
from daemon.structs import TaskId

pytestmark = pytest.mark.integration

NAME = "echo"


async def test_epochs_grow_across_workers(kafka_bootstrap: str, kafka_topic: TopicFactory) -> None:
    """Whichever worker draws, a later epoch is larger: the offsets of one partition."""
    topic = await kafka_topic(partitions=3)
    workers = [KafkaEpochs(topic, kafka_bootstrap, f"w{i}") for i in range(3)]
    for w in workers:
        await w.start()
    try:
        drawn = [await workers[i % 3].next_epoch_async(NAME) for i in range(12)]
        assert drawn == sorted(set(drawn)), drawn
        assert await workers[0].next_epoch_async(NAME, floor=10**6) == 10**6
        assert await workers[0].next_epoch_async(NAME) == 10**6 + 1  # never below its own
        other = await workers[1].next_epoch_async("another")
        assert other > drawn[-1]
    finally:
        for w in workers:
            await w.stop()


def _snapshot(
    offset: int,
    config: dict[str, str] | None,
    tasks: int,
    target: TargetState = TargetState.RUNNING,
) -> ConfigSnapshot:
    if config is None:
        return ConfigSnapshot(offset=offset)
    task_configs = tuple(MappingProxyType({**config, "task.id": str(i)}) for i in range(tasks))
    return ConfigSnapshot(
        offset=offset,
        connectors=MappingProxyType({NAME: MappingProxyType(config)}),
        task_configs=MappingProxyType({NAME: task_configs}),
        target_states=MappingProxyType({NAME: target}),
    )


@pytest.fixture
async def local_work(
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    make_pool: Callable[..., Awaitable[ExecutorPool]],
    tmp_path: Path,
) -> AsyncIterator[tuple[Worker, dict[str, str]]]:
    pool = await make_pool(with_spark=False, cds=False, start_timeout=30.0)
    worker = parse_worker(
        worker_properties(kafka_bootstrap, tmp_path / "state"), mode=Mode.STANDALONE
    ).config
    epochs_topic = await kafka_topic(partitions=1)
    epochs = KafkaEpochs(epochs_topic, kafka_bootstrap, "w0")
    await epochs.start()
    env = RuntimeEnv.of_worker(worker, pool, epochs=epochs, registry=default_registry)
    topic = await kafka_topic(partitions=3)
    config = validate_connector(
        NAME, {"connector.class": "EchoSink", "tasks.max": "3", "topics": topic}
    )
    work = Worker(env)
    try:
        yield work, config
    finally:
        await work.stop_all("the test is over")
        await epochs.stop()


def _states(work: Worker) -> dict[int, State]:
    rt = work.get(NAME)
    return {} if rt is None else {i: s.status("").state for i, s in rt.slots.items()}


def _epochs(work: Worker) -> dict[int, int | None]:
    rt = work.get(NAME)
    return {} if rt is None else {i: s.status("").incarnation for i, s in rt.slots.items()}


async def test_assigned_work_follows_assignments_and_the_log(
    local_work: tuple[Worker, dict[str, str]],
) -> None:
    work, config = local_work
    tasks = lambda *ns: Allocation.of((), (TaskId(NAME, n) for n in ns))  # noqa: E731
    running = State.RUNNING

    # Instance and tasks 0, 1 here.
    await work.reconcile(_snapshot(3, config, 3), Allocation.of([NAME]) | tasks(0, 1))
    await wait_until(lambda: _states(work) == {0: running, 1: running}, 30, "tasks 0, 1 run")
    rt = work.get(NAME)
    assert rt is not None and rt.runs_instance and rt.instance is not None
    first = _epochs(work)

    # A rebalance: the instance and task 0 move away, task 2 comes here.
    await work.reconcile(_snapshot(3, config, 3), tasks(1, 2))
    await wait_until(lambda: _states(work) == {1: running, 2: running}, 30, "tasks 1, 2 run")
    assert rt.instance is None and not rt.runs_instance
    assert _epochs(work)[1] == first[1], "a task that stays is not restarted"

    # Reconcile again with the same arguments: nothing changes.
    before = _epochs(work)
    await work.reconcile(_snapshot(3, config, 3), tasks(1, 2))
    assert _epochs(work) == before

    # A new configuration in the log: the tasks here restart, with larger epochs.
    changed = {**config, "log.every.records": "7"}
    await work.reconcile(_snapshot(9, changed, 3), tasks(1, 2))
    await wait_until(lambda: _states(work) == {1: running, 2: running}, 30, "restarted")
    after = _epochs(work)
    assert all((after[i] or 0) > (before[i] or 0) for i in (1, 2)), (before, after)

    # Paused in the log: paused here.
    await work.reconcile(_snapshot(10, changed, 3, TargetState.PAUSED), tasks(1, 2))
    await wait_until(lambda: _states(work) == {1: State.PAUSED, 2: State.PAUSED}, 30, "paused")

    # Deleted from the log: everything here stops.
    await work.reconcile(_snapshot(11, None, 0), tasks(1, 2))
    assert work.get(NAME) is None
