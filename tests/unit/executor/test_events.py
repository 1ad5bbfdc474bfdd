"""The pool's event log: leases and reaps in order, with monotonic times and log lines."""

from __future__ import annotations

import logging
import threading

import pytest

from daemon.executor.info import PoolEventKind, PoolEvents


def test_events_keep_their_order_and_times(caplog: pytest.LogCaptureFixture) -> None:
    events = PoolEvents()
    with caplog.at_level(logging.DEBUG, logger="connectd.executor"):
        events.leased(1, 101, "c-0")
        events.leased(1, 101, "c-0")  # the same task again: DEBUG, not INFO
        events.reaped(1, 101, "c-0", "killed its process tree")
        events.reap_failed(2, 102, None, "still running: [103]")
        events.leased(3, 104, "c-0")
    got = events.snapshot()
    assert [(e.kind, e.executor, e.pid, e.task_id) for e in got] == [
        (PoolEventKind.LEASED, 1, 101, "c-0"),
        (PoolEventKind.LEASED, 1, 101, "c-0"),
        (PoolEventKind.REAPED, 1, 101, "c-0"),
        (PoolEventKind.REAP_FAILED, 2, 102, None),
        (PoolEventKind.LEASED, 3, 104, "c-0"),
    ]
    times = [e.at for e in got]
    assert times == sorted(times)
    levels = [(r.levelno, r.getMessage().split(" at monotonic")[0]) for r in caplog.records]
    assert levels == [
        (logging.INFO, "executor 1 (pid 101) leased to task c-0"),
        (logging.DEBUG, "executor 1 (pid 101) leased to task c-0"),
        (logging.INFO, "executor 1 (pid 101) reaped"),
        (logging.INFO, "executor 3 (pid 104) leased to task c-0"),
    ]


def test_events_are_bounded_and_readable_from_another_thread() -> None:
    events = PoolEvents(maxlen=3)
    for pid in range(5):
        events.leased(pid, pid, "c-0")
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.extend(e.pid for e in events.snapshot()))
    reader.start()
    reader.join(timeout=5)
    assert seen == [2, 3, 4]
