"""What the runtime records into ``Metrics``: writes and kills from ``ExecutorBinding``, consumer
lag from ``TaskConsumer`` (no broker, no Spark: a fake pool and a fake aiokafka state)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Mapping
from types import SimpleNamespace
from typing import Any

import prometheus_client
import pyarrow as pa
import pytest
from support.daemon import wait_until

from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import WriteTimeout
from daemon.executor.lease import WriteLease
from daemon.metrics import Metrics
from daemon.runtime.executors import ExecutorBinding, task_labels
from daemon.runtime.incarnation.consumer import TaskConsumer, _lags


class FakePool:
    """Leases this process as the executor while a submitted write is in progress."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.pid: int | None = None
        self.started = asyncio.Event()

    def submit(
        self,
        task_id: str,
        fn: str,
        batch: pa.Table | None = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
        formats: Collection[str] = (),
        group: str | None = None,
        group_limit: int | None = None,
        spark: bool = True,
    ) -> WriteLease:
        lease = WriteLease(task_id, asyncio.get_running_loop())
        lease.start(self._write(lease))
        return lease

    async def _write(self, lease: WriteLease) -> Any:
        self.pid = os.getpid()
        self.started.set()
        try:
            if self.behaviour == "timeout":
                raise WriteTimeout(f"task {lease.task_id}: ran past its deadline")
            if self.behaviour == "hang":
                await asyncio.Event().wait()
            await asyncio.sleep(0.01)
            return "done"
        except asyncio.CancelledError:
            lease.killed = True  # cancelled while its "executor" held it: a pool kills that one
            raise
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


def _samples(registry: prometheus_client.CollectorRegistry, *names: str) -> dict[Any, float]:
    """Every sample of the metric families ``names`` (all of ``connectd_*`` without names):
    ``{(sample name, sorted labels): value}``, so a test can say exactly what was recorded."""
    out: dict[Any, float] = {}
    for family in registry.collect():
        if (names and family.name not in names) or not family.name.startswith("connectd_"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue  # prometheus-client's creation timestamps: not a recorded value
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _kills(m: Metrics) -> dict[str, float]:
    """``connectd_executor_kills_total`` by reason."""
    return {
        dict(labels)["reason"]: value
        for (name, labels), value in _samples(m.registry, "connectd_executor_kills").items()
        if name == "connectd_executor_kills_total"
    }


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
    # Under the task's own labels only (the task id split at its last "-"), and no kill.
    written = _samples(m.registry, "connectd_records_written")
    assert written == {("connectd_records_written_total", tuple(sorted(task.items()))): 3.0}
    assert _kills(m) == {}


async def test_a_write_deadline_counts_a_kill_and_no_rows() -> None:
    m = Metrics()
    binding = ExecutorBinding(FakePool("timeout"), "c-0", 5.0, metrics=m)
    with pytest.raises(WriteTimeout):
        await binding.run_in_executor("mod:fn", pa.table({"x": [1]}), timeout=1)
    assert _kills(m) == {"write deadline": 1.0}
    assert _samples(m.registry, "connectd_records_written", "connectd_write_seconds") == {}
    assert m.totals() == (0, 0)


@pytest.mark.parametrize("stop_sequence", [False, True])
async def test_a_cancelled_write_counts_a_kill_unless_the_stop_sequence_did_it(
    stop_sequence: bool,
) -> None:
    m = Metrics()
    pool = FakePool("hang")
    binding = ExecutorBinding(pool, "c-0", 5.0, metrics=m)
    write = asyncio.ensure_future(binding.run_in_executor("mod:fn", None, timeout=0))
    # An executor holds the write (the fake leases this process), so cancelling kills it.
    await wait_until(lambda: binding.current_pid() == os.getpid(), 5, "the write leased")
    if stop_sequence:
        binding.close("graceful stop timed out")  # the slot counts this one as "task stop"
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    assert binding.current_pid() is None
    assert _kills(m) == ({} if stop_sequence else {"write cancelled": 1.0})
    assert _samples(m.registry, "connectd_records_written", "connectd_write_seconds") == {}


async def test_without_metrics_nothing_is_recorded() -> None:
    """A binding without ``Metrics`` records nowhere: not in prometheus-client's global
    registry either (each ``Metrics`` has its own), whatever the write's outcome."""
    before = _samples(prometheus_client.REGISTRY)
    binding = ExecutorBinding(FakePool("ok"), "c-0", 5.0)
    assert await binding.run_in_executor("mod:fn", pa.table({"x": [1, 2]}), timeout=0) == "done"
    with pytest.raises(WriteTimeout):
        await ExecutorBinding(FakePool("timeout"), "c-0", 5.0).run_in_executor(
            "mod:fn", None, timeout=1
        )
    pool = FakePool("hang")
    hung = ExecutorBinding(pool, "c-0", 5.0)
    write = asyncio.ensure_future(hung.run_in_executor("mod:fn", None, timeout=0))
    await wait_until(lambda: hung.current_pid() == os.getpid(), 5, "the write leased")
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    assert _samples(prometheus_client.REGISTRY) == before == {}


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
