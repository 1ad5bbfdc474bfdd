"""What the runtime records into ``Metrics``: writes and kills from ``ExecutorBinding``, consumer
lag from ``TaskConsumer`` (no broker, no Spark: a fake pool and a fake aiokafka state)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import WriteTimeout
from daemon.metrics import Metrics
from daemon.runtime.consumer import TaskConsumer, _lags
from daemon.runtime.executors import ExecutorBinding, task_labels


class FakePool:
    """Leases this process as the executor while ``run`` is in progress."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.pid: int | None = None
        self.started = asyncio.Event()

    async def run(
        self,
        task_id: str,
        fn: str,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
    ) -> Any:
        self.pid = os.getpid()
        self.started.set()
        try:
            if self.behaviour == "timeout":
                raise WriteTimeout(f"task {task_id}: ran past its deadline")
            if self.behaviour == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(0.01)
            return "done"
        finally:
            self.pid = None

    def current_pid(self, task_id: str) -> int | None:
        return self.pid

    def snapshot(self) -> list[Any]:
        return []

    def status(self) -> Any:
        raise NotImplementedError


def _value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_task_labels_split_connects_task_id() -> None:
    assert task_labels(str(TaskId("my-sink", 12))) == ("my-sink", 12)
    assert task_labels("odd") == ("odd", 0)


async def test_a_successful_write_counts_its_rows_and_duration() -> None:
    m = Metrics()
    binding = ExecutorBinding(FakePool("ok"), "orders-sink-1", 5.0, metrics=m)
    table = pa.table({"x": [1, 2, 3]})
    assert await binding.run_in_executor("mod:fn", table, timeout=0) == "done"
    await binding.run_in_executor("mod:commit", None, timeout=0)
    task = {"connector": "orders-sink", "task": "1"}
    assert _value(m, "connectd_records_written_total", **task) == 3
    assert _value(m, "connectd_write_seconds_count", **task) == 2
    assert (_value(m, "connectd_write_seconds_sum", **task) or 0) >= 0.02
    assert m.totals() == (0, 3)


async def test_a_write_deadline_counts_a_kill_and_no_rows() -> None:
    m = Metrics()
    binding = ExecutorBinding(FakePool("timeout"), "c-0", 5.0, metrics=m)
    with pytest.raises(WriteTimeout):
        await binding.run_in_executor("mod:fn", pa.table({"x": [1]}), timeout=1)
    assert _value(m, "connectd_executor_kills_total", reason="write deadline") == 1
    assert _value(m, "connectd_records_written_total", connector="c", task="0") is None


@pytest.mark.parametrize("stop_sequence", [False, True])
async def test_a_cancelled_write_counts_a_kill_unless_the_stop_sequence_did_it(
    stop_sequence: bool,
) -> None:
    m = Metrics()
    pool = FakePool("hang")
    binding = ExecutorBinding(pool, "c-0", 5.0, metrics=m)
    write = asyncio.ensure_future(binding.run_in_executor("mod:fn", None, timeout=0))
    await asyncio.wait_for(pool.started.wait(), 5)
    await asyncio.sleep(0.01)  # the binding's watch has seen the executor
    if stop_sequence:
        binding.close("graceful stop timed out")  # the slot counts this one as "task stop"
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    expected = None if stop_sequence else 1.0
    assert _value(m, "connectd_executor_kills_total", reason="write cancelled") == expected


async def test_without_metrics_nothing_is_recorded() -> None:
    binding = ExecutorBinding(FakePool("ok"), "c-0", 5.0)
    assert await binding.run_in_executor("mod:fn", None, timeout=0) == "done"


def _state(highwater: int | None, position: int | None) -> SimpleNamespace:
    return SimpleNamespace(
        highwater=highwater, position=position, has_valid_position=position is not None
    )


def _fake_consumer(states: Mapping[Any, SimpleNamespace]) -> Any:
    from aiokafka import TopicPartition as KafkaTP

    by_tp = {KafkaTP(t, p): s for (t, p), s in states.items()}
    assignment = SimpleNamespace(tps=frozenset(by_tp), state_value=by_tp.get)
    return SimpleNamespace(
        _subscription=SimpleNamespace(subscription=SimpleNamespace(assignment=assignment))
    )


def test_lag_is_highwater_minus_position_where_both_are_known() -> None:
    consumer = _fake_consumer(
        {
            ("t", 0): _state(100, 40),
            ("t", 1): _state(7, 7),
            ("t", 2): _state(None, 3),  # no fetch response yet
            ("t", 3): _state(50, None),  # position being reset
        }
    )
    assert _lags(consumer) == {TopicPartition("t", 0): 60, TopicPartition("t", 1): 0}
    assert _lags(SimpleNamespace(_subscription=SimpleNamespace(subscription=None))) == {}


async def test_each_poll_replaces_the_tasks_lag_series_and_close_drops_them() -> None:
    m = Metrics()
    states = {("t", 0): _state(10, 4), ("t", 1): _state(5, 5)}

    class Target:
        async def partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            pass

        async def partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            pass

    consumer = TaskConsumer(
        {"group_id": "connect-c"}, topics=["t"], target=Target(), metrics=m, task_id=TaskId("c", 2)
    )
    fake = _fake_consumer(states)

    async def getmany(timeout_ms: int, max_records: int | None) -> dict[Any, Any]:
        return {}

    async def stop() -> None:
        pass

    fake.getmany, fake.stop = getmany, stop
    consumer._consumer = fake
    await consumer.poll(10)
    lag = "connectd_consumer_lag_records"
    assert _value(m, lag, connector="c", task="2", topic="t", partition="0") == 6
    assert _value(m, lag, connector="c", task="2", topic="t", partition="1") == 0
    del states[("t", 0)]  # revoked
    consumer._consumer = _fake_consumer(states)
    consumer._consumer.getmany, consumer._consumer.stop = getmany, stop
    await consumer.poll(10)
    assert _value(m, lag, connector="c", task="2", topic="t", partition="0") is None
    assert _value(m, lag, connector="c", task="2", topic="t", partition="1") == 0
    await consumer.close()
    assert _value(m, lag, connector="c", task="2", topic="t", partition="1") is None
