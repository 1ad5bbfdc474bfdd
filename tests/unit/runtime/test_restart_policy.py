"""The auto-restart schedule: Strimzi's n·(n+1), in minutes, or seconds for retriable errors."""

from __future__ import annotations

from daemon.config import parse_connector
from daemon.errors import ConfigError, ExecutorDied, WriteTimeout
from daemon.runtime.restart import HEALTHY_MIN, RestartPolicy


def test_schedule_is_strimzis_in_minutes_for_other_failures() -> None:
    policy = RestartPolicy()
    delays = [policy.delay(n, ValueError("boom")) for n in range(8)]
    assert delays == [0, 120, 360, 720, 1200, 1800, 2520, None]


def test_retriable_connectd_errors_use_seconds() -> None:
    policy = RestartPolicy()
    assert [policy.delay(n, ExecutorDied("x")) for n in range(4)] == [0, 2, 6, 12]
    assert policy.delay(1, WriteTimeout("x")) == 2
    assert policy.delay(1, ConfigError("x")) == 120  # not retriable


def test_limits_cap_and_disable() -> None:
    assert RestartPolicy(max_restarts=2).delay(2, ValueError()) is None
    assert RestartPolicy(max_restarts=-1).delay(50, ExecutorDied("x")) == 50 * 51
    assert RestartPolicy(backoff_max=30.0).delay(3, ValueError()) == 30.0
    assert RestartPolicy(enabled=False).delay(0, ValueError()) is None


def test_healthy_interval_is_the_next_delay_at_least_the_minimum() -> None:
    policy = RestartPolicy()
    assert policy.healthy_after(0, ExecutorDied("x")) == HEALTHY_MIN
    assert policy.healthy_after(3, ExecutorDied("x")) == 12
    assert policy.healthy_after(1, ValueError()) == 120


def test_from_connector_config() -> None:
    config = parse_connector(
        {
            "name": "c",
            "connector.class": "x.y:Z",
            "topics": "t",
            "errors.restart.max": "-1",
            "errors.restart.backoff.max.ms": "5000",
            "errors.restart.enabled": "false",
        }
    ).config
    policy = RestartPolicy.from_connector(config)
    assert policy == RestartPolicy(enabled=False, max_restarts=-1, backoff_max=5.0)
