"""Connect's windowed task metrics (``daemon.metrics.sampled``). The figures below are what
Kafka's own metrics library (kafka-clients 4.1.2) gave for the same steps (the conformance test
``tests/integration/conformance/test_connect_metric_stats.py`` runs it on many more)."""

from __future__ import annotations

import math

import pytest

from daemon.metrics import Metrics
from daemon.metrics.collectors import rebalance_families
from daemon.metrics.sampled import Sampled, StateTimes


def test_rate_avg_and_max_as_kafka_computes_them() -> None:
    now = [0.0]
    stat = Sampled(lambda: now[0])

    def at(seconds: float) -> tuple[float, float, float]:
        now[0] = seconds
        return stat.rate(), stat.avg(), stat.max()

    first = at(0)
    assert first[0] == 0 and math.isnan(first[1]) and math.isnan(first[2])
    for t, value in ((1, 5), (2, 7)):
        now[0] = t
        stat.record(value)
    assert at(3) == pytest.approx((12 / 33, 6.0, 7.0))  # padded to a full window
    now[0] = 31
    stat.record(2)
    assert at(40) == pytest.approx((14 / 40, 14 / 3, 7.0))
    assert at(61.5) == pytest.approx((14 / 61.5, 14 / 3, 7.0))  # last event 2 s: kept
    rate, avg, high = at(95)  # every sample's last event over 60 s ago: reset
    assert rate == 0 and math.isnan(avg) and math.isnan(high)


def test_the_metrics_export_connects_windowed_names() -> None:
    metrics = Metrics()
    metrics.record_consumed("c", 0, 30)
    metrics.record_put("c", 0, 30, 0.012)
    metrics.record_commit_attempt("c", 0, 0.004, ok=True)
    metrics.record_commit_attempt("c", 0, 0.006, ok=False)
    metrics.record_startup("connector", True)
    metrics.record_startup("task", False)
    text = metrics.render()[0].decode()
    task = '{connector="c",task="0"}'
    expected = {
        f"kafka_connect_sink_task_sink_record_read_rate{task}": 1.0,  # 30 over 30 s
        f"kafka_connect_sink_task_put_batch_max_time_ms{task}": 12.0,
        f"kafka_connect_connector_task_batch_size_avg{task}": 30.0,
        f"kafka_connect_connector_task_offset_commit_max_time_ms{task}": 6.0,
        f"kafka_connect_connector_task_offset_commit_success_percentage{task}": 0.5,
        f"kafka_connect_sink_task_offset_commit_skip_total{task}": 0.0,
        "kafka_connect_worker_connector_startup_success_total": 1.0,
        "kafka_connect_worker_task_startup_failure_total": 1.0,
        "kafka_connect_worker_task_startup_failure_percentage": 1.0,
    }
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    for name, value in expected.items():
        assert float(values[name]) == pytest.approx(value, rel=0.05), name
    metrics.forget_task("c", 0)
    assert "kafka_connect_sink_task_sink_record_read_rate{" not in metrics.render()[0].decode()


def test_running_and_pause_ratios_follow_the_incarnation() -> None:
    now = [100.0]
    times = StateTimes(lambda: now[0])
    now[0] = 102.0
    times.enter("running")  # 2 s starting
    now[0] = 108.0
    times.enter("paused")  # 6 s running
    now[0] = 110.0  # 2 s paused so far
    assert times.ratio("running") == pytest.approx(0.6)
    assert times.ratio("paused") == pytest.approx(0.2)
    times.restart()  # a new incarnation: its own figures
    now[0] = 111.0
    times.enter("running")
    now[0] = 112.0
    assert times.ratio("running") == pytest.approx(0.5) and times.ratio("paused") == 0


def test_rebalance_metrics_replay_the_members_log() -> None:
    member = {
        "rebalances": 3,
        "generation": 7,
        "rebalancing": False,
        "rebalance_log": ((10.0, 0.5), (50.0, 1.5), (95.0, 0.25)),
    }
    got = {m.name: m.samples[0].value for m in rebalance_families(member, now=100.0) if m.samples}
    p = "kafka_connect_worker_rebalance_"
    assert got[p + "completed_rebalances_total"] == 3 and got[p + "epoch"] == 7
    assert got[p + "rebalancing"] == 0
    assert got[p + "time_since_last_rebalance_ms"] == pytest.approx(5000)
    # At 100 s the rebalance that ended at 10 s is over 60 s old: Kafka's samples dropped it.
    assert got[p + "rebalance_max_time_ms"] == pytest.approx(1500)
    assert got[p + "rebalance_avg_time_ms"] == pytest.approx(875)
    never = {m.name: m.samples[0].value for m in rebalance_families(
        {**member, "rebalance_log": ()}, now=1.0)}  # fmt: skip
    assert never[p + "time_since_last_rebalance_ms"] == math.inf
    assert math.isnan(never[p + "rebalance_max_time_ms"])
