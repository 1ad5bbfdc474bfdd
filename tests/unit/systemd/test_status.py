"""The STATUS= line: connectors and tasks, and the record rate between two refreshes."""

from __future__ import annotations

import pytest

from daemon.runtime.model import ConnectorStatus, State, TaskStatus
from daemon.systemd import StatusLine, rate_text


@pytest.mark.parametrize(
    ("consumed", "written", "seconds", "text"),
    [
        (500, 200, 5.0, "40.0 records/s written"),  # written wins when anything was written
        (500, 0, 5.0, "100 records/s consumed"),  # nothing written yet: what was consumed
        (7, 0, 5.0, "1.4 records/s consumed"),
        (123456, 123456, 2.0, "61728 records/s written"),
        (0, 0, 5.0, "0 records/s"),
        (10, 10, 0.0, "0 records/s"),  # no interval (two calls at once): no rate
    ],
)
def test_rate_text(consumed: int, written: int, seconds: float, text: str) -> None:
    assert rate_text(consumed, written, seconds) == text


class _Worker:
    def connector_names(self) -> list[str]:
        return ["a"]

    def connector_status(self, name: str) -> ConnectorStatus:
        return ConnectorStatus(name, State.RUNNING, "w", (TaskStatus(0, State.RUNNING, "w"),))


def test_status_line_rate_is_between_two_calls() -> None:
    now = [100.0]
    totals = [(0, 0)]
    worker: list[_Worker | None] = [None]
    status = StatusLine(lambda: worker[0], lambda: totals[0], clock=lambda: now[0])
    assert status() == "starting"  # no worker yet: no counts, no rate
    worker[0] = _Worker()
    now[0], totals[0] = 105.0, (250, 0)
    assert status() == "1 connectors, 1/1 tasks running, 0 failed, 50.0 records/s consumed"
    now[0], totals[0] = 107.0, (450, 300)
    assert status() == "1 connectors, 1/1 tasks running, 0 failed, 150 records/s written"
    now[0] = 112.0  # nothing moved in the last 5 s
    assert status() == "1 connectors, 1/1 tasks running, 0 failed, 0 records/s"
