"""The auto-restart policy: Strimzi's n·(n+1)-minute schedule, what is retried, the count reset,
the notes a FAILED status carries, and the clocks (a fake one here: no real waiting)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace

import pytest
from support.clocks import ManualClock
from support.daemon import wait_until

from daemon.config import parse_connector
from daemon.errors import (
    CommitRejected,
    ConfigError,
    ConnectorNotFound,
    ConversionError,
    ExecutorDied,
    InvalidConfig,
    TaskTimeout,
    WriteTimeout,
)
from daemon.runtime.slot.autorestart import (
    MINUTE,
    AutoRestarter,
    Clock,
    RestartPolicy,
    retriable,
)
from daemon.storage.logstate import TableLost


class FakeClock(Clock):
    """Time moves only when someone sleeps (or the test advances it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def test_the_schedule_is_strimzis_in_minutes() -> None:
    policy = RestartPolicy()
    assert [policy.interval(n) / MINUTE for n in range(10)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60]
    assert not policy.exhausted(6) and policy.exhausted(7)
    # The 7th restart comes about 112 minutes after the first failure (seeds/004).
    assert sum(policy.interval(n) for n in range(7)) / MINUTE == 112


def test_limits_cap_and_disable() -> None:
    assert RestartPolicy(max_restarts=2).exhausted(2)
    assert not RestartPolicy(max_restarts=-1).exhausted(10_000)
    assert RestartPolicy(backoff_max=30.0).interval(3) == 30.0
    assert RestartPolicy(backoff_max=30.0).healthy_after(3) == 12 * MINUTE  # not capped by it
    assert RestartPolicy().healthy_after(20) == 60 * MINUTE


def test_only_failures_a_restart_can_help_are_retried() -> None:
    for failure in (
        WriteTimeout("deadline"),
        ExecutorDied("x"),
        TaskTimeout("x"),
        OSError("network"),
        RuntimeError("a bug, or a blip"),
    ):
        assert retriable(failure), failure
    for failure in (
        ConfigError("x"),
        InvalidConfig([]),
        ConnectorNotFound("x"),
        ConversionError("x"),
        CommitRejected("x"),
        ModuleNotFoundError("no module named x"),
        ImportError("cannot import name X"),
    ):
        assert not retriable(failure), failure


CONNECTOR = {"name": "c", "connector.class": "x.y:Z", "topics": "t"}


def test_from_connector_config() -> None:
    given = {
        **CONNECTOR,
        "errors.restart.max": "-1",
        "errors.restart.backoff.max.ms": "5000",
        "errors.restart.enabled": "false",
    }
    config = parse_connector(given).config
    policy = RestartPolicy.from_connector(config)
    assert policy == RestartPolicy(enabled=False, max_restarts=-1, backoff_max=5.0)
    assert RestartPolicy.from_connector(parse_connector(CONNECTOR).config) == RestartPolicy()


def test_worker_defaults_with_the_connectors_keys_over_them() -> None:
    worker = SimpleNamespace(
        errors_restart_enabled=False,
        errors_restart_max=3,
        errors_restart_backoff_max=timedelta(minutes=10),
    )
    own = {**CONNECTOR, "errors.restart.max": "5"}
    policy = RestartPolicy.from_configs(worker, parse_connector(own).config, given=own.keys())
    assert policy == RestartPolicy(enabled=False, max_restarts=5, backoff_max=600.0)
    # No worker config: the connector's values (defaults included).
    plain = RestartPolicy.from_configs(None, parse_connector(own).config, given=own.keys())
    assert plain == RestartPolicy(max_restarts=5)


class Owner:
    """Stands in for a task slot: each automatic restart fails again after ``run`` seconds."""

    def __init__(self, auto: AutoRestarter, clock: FakeClock, run: float = 1.0) -> None:
        self.auto = auto
        self.clock = clock
        self.run = run
        self.restarts: list[float] = []
        self.fail_again = True

    async def action(self) -> None:
        self.auto.begin()
        self.restarts.append(self.clock.now)
        self.auto.running()
        if self.fail_again:
            self.clock.now += self.run
            self.auto.failed(RuntimeError("again"), self.action)


async def settle(auto: AutoRestarter) -> None:
    for _ in range(1000):
        if not auto.pending:
            return
        await asyncio.sleep(0)
    raise AssertionError("the restarter never settled")


async def test_restarts_follow_the_schedule_until_exhausted() -> None:
    clock = FakeClock()
    auto = AutoRestarter(
        "Task c-0", "POST /connectors/c/tasks/0/restart", RestartPolicy(max_restarts=3), clock
    )
    owner = Owner(auto, clock)
    auto.running()
    failed_at = clock.now
    assert auto.failed(WriteTimeout("deadline"), owner.action)
    await settle(auto)
    gaps = [b - a for a, b in zip([failed_at, *owner.restarts], owner.restarts, strict=False)]
    assert gaps == [0, 2 * MINUTE, 6 * MINUTE]  # "since the previous one"
    assert auto.count == 3 and auto.next_wall is None
    assert auto.note is not None and "exhausted" in auto.note and "after 3 automatic" in auto.note
    assert "POST /connectors/c/tasks/0/restart" in auto.note
    status = auto.status()
    assert status.count == 3 and status.next_restart is None
    assert status.last_restart is not None and status.last_restart.endswith("+00:00")
    assert "exhausted" in (auto.annotate("Traceback ...\nRuntimeError: again") or "")


async def test_a_healthy_run_longer_than_the_next_interval_resets_the_count() -> None:
    clock = FakeClock()
    auto = AutoRestarter("Task c-0", "POST ...", RestartPolicy(), clock)
    owner = Owner(auto, clock)
    owner.fail_again = False
    auto.running()
    auto.failed(RuntimeError("first"), owner.action)
    await settle(auto)
    assert auto.count == 1
    # Ran 1 minute (< 2): the next restart waits for the rest of the 2 minutes.
    clock.now += MINUTE
    auto.failed(RuntimeError("second"), owner.action)
    await settle(auto)
    assert auto.count == 2 and clock.sleeps == [MINUTE]
    # Ran 6 minutes and a bit (> 6, the next interval): counted from 0 again, at once.
    clock.now += 6 * MINUTE + 1
    auto.failed(RuntimeError("third"), owner.action)
    await settle(auto)
    assert auto.count == 1 and clock.sleeps == [MINUTE]


async def test_what_is_not_retried_stays_with_a_note() -> None:
    clock = FakeClock()
    auto = AutoRestarter("Task c-0", "POST /connectors/c/tasks/0/restart", RestartPolicy(), clock)
    called: list[int] = []

    async def action() -> None:
        called.append(1)

    assert not auto.failed(ConfigError("bad"), action)
    assert auto.note is not None and "ConfigError is not retriable" in auto.note
    assert "configuration error or a missing class" in auto.note
    assert auto.status().count == 0 and auto.status().next_restart is None
    lost = AutoRestarter("Task c-0", "POST x", RestartPolicy(), clock)
    assert not lost.failed(TableLost("gone"), action)
    assert (
        lost.note is not None
        and "TableLost is not retriable (a restart would meet the" in lost.note
    )
    assert "missing class" not in lost.note
    disabled = AutoRestarter("Task c-0", "POST x", RestartPolicy(enabled=False), clock)
    assert not disabled.failed(RuntimeError("x"), action)
    assert disabled.note is not None and "errors.restart.enabled=false" in disabled.note
    assert not auto.pending and not disabled.pending  # nothing was scheduled
    await asyncio.sleep(0)  # (a restart scheduled "now" would have run its action here)
    assert called == []


async def test_a_pending_restart_can_be_cancelled_and_shows_when_it_comes() -> None:
    clock = ManualClock()  # never moved: the second restart waits its 2 minutes forever
    auto = AutoRestarter("Task c-0", "POST x", RestartPolicy(), clock)
    called: list[int] = []

    async def action() -> None:
        called.append(1)
        auto.begin()

    auto.failed(RuntimeError("x"), action)
    await wait_until(lambda: called == [1] and not auto.pending, 5, "the first restart, at once")
    assert auto.count == 1
    auto.failed(RuntimeError("x"), action)
    status = auto.status()
    assert status.next_restart is not None and status.next_restart > (status.last_restart or "")
    assert auto.pending
    waiting = auto._pending  # the timer task: after cancel() it must end without the restart
    assert waiting is not None
    auto.cancel()
    assert not auto.pending and auto.status().next_restart is None
    done, _ = await asyncio.wait([waiting], timeout=5)
    assert done == {waiting} and waiting.cancelled()  # so its action can never run
    assert called == [1] and auto.count == 1


async def test_the_manual_clock_wakes_a_waiting_restart_exactly_at_its_time() -> None:
    clock = ManualClock()
    auto = AutoRestarter("Task c-0", "POST x", RestartPolicy(), clock)
    called: list[float] = []

    async def action() -> None:
        called.append(clock.monotonic())
        auto.begin()

    began = clock.monotonic()
    auto.failed(RuntimeError("x"), action)
    await wait_until(lambda: len(called) == 1 and not auto.pending, 5, "the first, at once")
    auto.failed(RuntimeError("x"), action)
    await wait_until(lambda: clock.sleeping == [2 * MINUTE], 5, "a restart waiting 2 minutes")
    clock.advance(2 * MINUTE - 1)
    await asyncio.sleep(0.01)
    assert len(called) == 1 and auto.pending
    assert await clock.advance_to_next() == 1
    await wait_until(lambda: len(called) == 2, 5, "the second, after 2 minutes of the clock")
    assert called == [began, began + 2 * MINUTE]
    with pytest.raises(ValueError):
        clock.advance(-1)
