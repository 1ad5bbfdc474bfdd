"""When a run until caught up is done (``daemon.runtime.caughtup.progress``), on statuses made
here: a partition is caught up when a task committed its start-time end offset, or has no lag
with the log end past it (a transaction marker after the last record); a task FAILED for good
ends the run naming it, one with an automatic restart coming is waited for."""

from __future__ import annotations

from typing import Any

from daemon.connectors.records import TopicPartition
from daemon.runtime.caughtup import progress
from daemon.runtime.model import AutoRestart, ConnectorStatus, PartitionFreshness, TaskStatus
from daemon.structs import State

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def _fresh(p: int, committed: int | None, log_end: int | None, lag: int | None) -> Any:
    return PartitionFreshness("t", p, committed, log_end, lag, None, None)


class Herder:
    def __init__(self, *tasks: TaskStatus, state: State = State.RUNNING) -> None:
        self.status = ConnectorStatus("c", state, "w", tasks)

    def connector_status(self, name: str) -> ConnectorStatus:
        return self.status


def _task(*fresh: PartitionFreshness, **more: Any) -> TaskStatus:
    return TaskStatus(0, more.pop("state", State.RUNNING), "w", freshness=fresh, **more)


def test_a_partition_is_caught_up_at_its_end_offset_or_with_no_lag_past_it() -> None:
    targets = {"c": {A: 10, B: 5}}
    behind = Herder(_task(_fresh(0, 9, 10, 1), _fresh(1, 5, 5, 0)))
    assert progress(behind, targets).behind == {"c": 1}  # type: ignore[arg-type]
    committed = Herder(_task(_fresh(0, 10, 12, 2), _fresh(1, 5, 5, 0)))
    assert progress(committed, targets).done == ["c"]  # type: ignore[arg-type]
    # A transaction marker at offset 9: the sink committed 9, the log ends at 10, no lag left.
    marker = Herder(_task(_fresh(0, 9, 10, 0), _fresh(1, 5, 5, 0)))
    assert progress(marker, targets).done == ["c"]  # type: ignore[arg-type]
    unknown = Herder(_task(_fresh(1, 5, 5, 0)))  # partition 0 not reported by any task yet
    assert progress(unknown, targets).behind == {"c": 1}  # type: ignore[arg-type]
    empty = Herder(_task())
    assert progress(empty, {"c": {A: 0}}).finished  # type: ignore[arg-type]


def test_a_failure_for_good_ends_the_run_and_one_being_restarted_is_waited_for() -> None:
    targets = {"c": {A: 10}}
    final = Herder(_task(state=State.FAILED, trace="ConversionError: bad record\n  at ..."))
    done = progress(final, targets)  # type: ignore[arg-type]
    assert done.finished and done.failed == {"c": "task 0: ConversionError: bad record"}
    coming = AutoRestart(count=1, next_restart="2026-11-30T02:00:00Z")
    retried = Herder(_task(state=State.FAILED, trace="OSError: x", auto_restart=coming))
    assert progress(retried, targets).behind == {"c": 1}  # type: ignore[arg-type]
    connector = Herder(state=State.FAILED)
    assert progress(connector, targets).failed == {"c": "the connector failed"}  # type: ignore[arg-type]
