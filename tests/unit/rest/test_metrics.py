"""``daemon.metrics.Metrics``: per-daemon registries, recording, scrape-time collectors."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import REGISTRY
from support.fake_worker import FakeWorker

from daemon.connectors.records import TopicPartition
from daemon.executor.info import ExecutorInfo, ExecutorState, PoolStatus
from daemon.kafka import traffic
from daemon.metrics import Metrics
from daemon.runtime.looplag import LoopLag
from daemon.runtime.model import TargetState


def _text(metrics: Metrics) -> str:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return body.decode()


def test_two_daemons_do_not_share_metrics_or_touch_the_global_registry() -> None:
    a, b = Metrics(), Metrics()
    a.record_consumed("c", 0, 3)
    assert 'connectd_records_consumed_total{connector="c",task="0"} 3.0' in _text(a)
    assert 'connectd_records_consumed_total{connector="c"' not in _text(b)
    assert (
        REGISTRY.get_sample_value(
            "connectd_records_consumed_total", {"connector": "c", "task": "0"}
        )
        is None
    )


def test_recording_methods() -> None:
    m = Metrics()
    m.record_consumed("c", 1, 10)
    m.record_written("c", 1, 8, 0.03)
    m.record_written("c", 1, 2, 7.0)
    m.executor_killed("write deadline")
    m.task_restarted("c", 1, "rest")
    m.set_consumer_lags("c", 1, {TopicPartition("orders", 3): 42})
    m.observe_loop_lag(0.002)
    text = _text(m)
    assert 'connectd_records_written_total{connector="c",task="1"} 10.0' in text
    assert 'connectd_write_seconds_bucket{connector="c",le="0.05",task="1"} 1.0' in text
    assert 'connectd_write_seconds_count{connector="c",task="1"} 2.0' in text
    assert 'connectd_executor_kills_total{reason="write deadline"} 1.0' in text
    assert 'connectd_task_restarts_total{cause="rest",connector="c",task="1"} 1.0' in text
    assert (
        'connectd_consumer_lag_records{connector="c",partition="3",task="1",topic="orders"} 42.0'
        in text
    )
    assert "connectd_event_loop_lag_last_seconds 0.002" in text


def test_forget_task_drops_its_series() -> None:
    m = Metrics()
    m.record_consumed("c", 0, 1)
    m.set_consumer_lags("c", 0, {TopicPartition("t", 0): 5})
    m.set_consumer_lags("c", 1, {TopicPartition("t", 1): 6})
    m.forget_task("c", 0)
    text = _text(m)
    assert 'task="0"' not in text
    assert (
        'connectd_consumer_lag_records{connector="c",partition="1",task="1",topic="t"} 6.0' in text
    )
    m.forget_task("never", 9)  # unknown: no error


def test_a_task_consumers_kafka_client_figures_as_strimzi_exports_them() -> None:
    m = Metrics()
    counted = traffic.track("connectd-c-0")
    try:
        counted.bytes_in, counted.responses = 1234, 5
        m.watch_client(counted)
        text = _text(m)
        assert 'kafka_consumer_incoming_byte_total{clientid="connectd-c-0"} 1234.0' in text
        assert 'kafka_consumer_response_total{clientid="connectd-c-0"} 5.0' in text
        assert 'kafka_consumer_connection_count{clientid="connectd-c-0"} 0.0' in text
        again = traffic.track("connectd-c-0")  # a new incarnation while the old one closes
        m.forget_client(counted)
        traffic.release(counted)
        assert 'clientid="connectd-c-0"' in _text(m)  # the newer one still counts
        m.forget_client(again)
        traffic.release(again)
        assert 'clientid="connectd-c-0"' not in _text(m)
    finally:
        traffic.release(counted)
    # Shared with a consumer that had no metrics and was the last to close: not exported.
    shared = traffic.track("connectd-c-1")
    m.watch_client(shared)
    traffic.track("connectd-c-1")
    m.forget_client(shared)  # two users: kept
    traffic.release(shared)
    traffic.release(shared)  # the other one, which tells no metrics
    assert 'clientid="connectd-c-1"' not in _text(m)


async def test_worker_states_are_read_at_scrape_time() -> None:
    worker = FakeWorker()
    m = Metrics()
    m.watch_worker(worker)
    m.watch_worker(worker)  # idempotent
    config = {"name": "c", "connector.class": "HangSink", "topics": "t", "tasks.max": "2"}
    await worker.create_connector("c", config)
    text = _text(m)
    assert 'connectd_connector_state{connector="c",state="RUNNING"} 1.0' in text
    assert 'connectd_connector_state{connector="c",state="PAUSED"} 0.0' in text
    assert 'connectd_task_state{connector="c",state="RUNNING",task="1"} 1.0' in text
    await worker.pause_connector("c")
    assert 'connectd_connector_state{connector="c",state="PAUSED"} 1.0' in _text(m)
    await worker.delete_connector("c")
    assert 'connector="c"' not in _text(m)
    await worker.create_connector("d", {**config, "name": "d"}, TargetState.STOPPED)
    assert 'connectd_connector_state{connector="d",state="STOPPED"} 1.0' in _text(m)


class _Pool:
    def __init__(self, started: bool = True) -> None:
        self.started = started

    def status(self) -> PoolStatus:
        if not self.started:
            return PoolStatus(
                size=2, spares=1, started=False, closed=False, starting=0, idle=0, busy=0,
                stopping=0, writes_done=0, kills=0, deaths=0, start_failures=0,
                failure_streak=0, backoff_seconds=0.0, problem=None, cds_archive=None,
            )  # fmt: skip
        return PoolStatus(
            size=2, spares=1, started=True, closed=False, starting=1, idle=1, busy=1,
            stopping=0, writes_done=17, kills=2, deaths=1, start_failures=0, failure_streak=0,
            backoff_seconds=0.0, problem=None, cds_archive=None, aside=1,
        )  # fmt: skip

    def snapshot(self) -> list[ExecutorInfo]:
        if not self.started:
            return []
        return [
            ExecutorInfo(
                id=1, pid=123, state=ExecutorState.BUSY, task_id="c-0", writes_done=17,
                last_write_seconds=0.1, rss_bytes=1 << 30, tree_pids=(123, 124), java_pid=124,
                started_at=time.time(), startup_seconds=3.0, uses_cds=True,
            )
        ]  # fmt: skip


def test_pool_state_is_read_at_scrape_time() -> None:
    m = Metrics()
    m.watch_pool(_Pool())
    text = _text(m)
    assert 'connectd_executors{state="busy"} 1.0' in text
    assert "connectd_executor_deaths_total 1.0" in text
    assert "connectd_executor_writes_total 17.0" in text
    assert "connectd_executor_writes_aside 1.0" in text
    assert 'connectd_executor_rss_bytes{executor="1"} 1.073741824e+09' in text
    assert "connectd_executor_pool_started 1.0" in text


def test_a_pool_not_started_says_so() -> None:
    m = Metrics()
    m.watch_pool(_Pool(started=False))
    text = _text(m)
    assert "connectd_executor_pool_started 0.0" in text
    assert 'connectd_executors{state="starting"} 0.0' in text


async def test_event_loop_lag_from_the_daemons_monitor() -> None:
    m = Metrics()
    lag = LoopLag(interval=0.01, on_sample=m.observe_loop_lag)
    lag.start()
    await asyncio.sleep(0.03)
    time.sleep(0.1)  # block the loop on purpose
    await asyncio.sleep(0.05)
    await lag.stop()
    lines = _text(m).splitlines()
    total = next(x for x in lines if x.startswith("connectd_event_loop_lag_seconds_count"))
    fast = next(
        x for x in lines if x.startswith('connectd_event_loop_lag_seconds_bucket{le="0.05"}')
    )
    assert float(total.split()[-1]) >= 2
    assert float(fast.split()[-1]) < float(total.split()[-1])  # one sample was ~0.09 s late


def test_offsets_skipped_are_counted_per_partition() -> None:
    m = Metrics()
    m.record_offsets_skipped("c", 0, TopicPartition("orders", 2), 40)
    m.record_offsets_skipped("c", 1, TopicPartition("orders", 2), 2)  # another task, same data
    m.record_offsets_skipped("c", 0, TopicPartition("orders", 3), 0)  # nothing skipped
    text = _text(m)
    assert 'connectd_offsets_skipped_total{connector="c",partition="2",topic="orders"} 42.0' in text
    assert 'partition="3",topic="orders"' not in text
