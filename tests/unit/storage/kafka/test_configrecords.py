"""The config log's records and snapshot, without a broker: Connect's keys and values, the
commit rule for task configs, deletions, target states, restart requests, hostile records."""

from __future__ import annotations

import json
import logging

import pytest

from daemon.storage.kafka import configrecords as rec
from daemon.storage.kafka.configrecords import ConfigLogState
from daemon.structs import TargetState, TaskId

Record = tuple[bytes | None, bytes | None, int]


def _records(*pairs: tuple[str, bytes | None]) -> list[Record]:
    return [(k.encode(), v, offset) for offset, (k, v) in enumerate(pairs)]


def _state(*pairs: tuple[str, bytes | None]) -> ConfigLogState:
    state = ConfigLogState()
    state.apply_all(_records(*pairs))
    return state


def _put(state: ConfigLogState, record: tuple[str, bytes | None], offset: int) -> None:
    state.apply(record[0].encode(), record[1], offset)


def test_records_are_connects_json_and_keys() -> None:
    assert rec.connector_record("s3", {"a": "${env:X}"}) == (
        "connector-s3",
        b'{"properties":{"a":"${env:X}"}}',
    )
    assert rec.connector_record("s3", None) == ("connector-s3", None)
    assert rec.task_record(TaskId("my-sink", 12), {}) == ("task-my-sink-12", b'{"properties":{}}')
    assert rec.commit_record("s3", 2) == ("commit-s3", b'{"tasks":2}')
    assert rec.restart_record("s3", include_tasks=True, only_failed=False) == (
        "restart-connector-s3",
        b'{"include-tasks":true,"only-failed":false}',
    )
    # Connect writes STARTED for a running connector, and PAUSED in the legacy field for STOPPED.
    states = {s: json.loads(rec.target_state_record("c", s)[1] or b"") for s in TargetState}
    assert states == {
        TargetState.RUNNING: {"state": "STARTED", "state.v2": "STARTED"},
        TargetState.PAUSED: {"state": "PAUSED", "state.v2": "PAUSED"},
        TargetState.STOPPED: {"state": "PAUSED", "state.v2": "STOPPED"},
    }


def test_task_configs_wait_for_their_commit_and_apply_all_at_once() -> None:
    state = _state(
        rec.connector_record("c", {"connector.class": "EchoSink"}),
        rec.task_record(TaskId("c", 0), {"n": "0"}),
        rec.task_record(TaskId("c", 1), {"n": "1"}),
    )
    assert state.snapshot().tasks("c") == ()
    _put(state, rec.commit_record("c", 2), 3)
    snap = state.snapshot()
    assert snap.tasks("c") == ({"n": "0"}, {"n": "1"})
    assert snap.offset == 4 and not snap.inconsistent


def test_a_commit_with_missing_task_configs_marks_the_connector_inconsistent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = _state(
        rec.connector_record("c", {}),
        rec.task_record(TaskId("c", 0), {"n": "0"}),
        rec.commit_record("c", 1),
        rec.task_record(TaskId("c", 1), {"n": "1"}),  # task 0's record was compacted away
        rec.commit_record("c", 2),
    )
    snap = state.snapshot()
    assert snap.inconsistent == {"c"} and snap.tasks("c") == ()
    assert "commit-c at offset 4" in caplog.text
    # A fresh, complete set makes it consistent again; fewer tasks than before is fine.
    _put(state, rec.task_record(TaskId("c", 0), {"n": "new"}), 5)
    _put(state, rec.commit_record("c", 1), 6)
    assert state.snapshot().tasks("c") == ({"n": "new"},)
    assert not state.snapshot().inconsistent


def test_deletion_removes_the_connector_its_tasks_state_and_restarts() -> None:
    state = _state(
        rec.connector_record("c", {}),
        rec.task_record(TaskId("c", 0), {}),
        rec.commit_record("c", 1),
        rec.target_state_record("c", TargetState.PAUSED),
        rec.restart_record("c", include_tasks=False, only_failed=False),
        rec.task_record(TaskId("c", 0), {"pending": "yes"}),
    )
    before = state.snapshot()
    _put(state, rec.connector_record("c", None), 10)
    _put(state, rec.target_state_record("c", None), 11)
    after = state.snapshot()
    assert after.connectors == {} and after.task_configs == {}
    assert after.target_states == {} and after.restart_requests == {}
    # Re-created: no old pending task config leaks in, the state starts RUNNING.
    _put(state, rec.connector_record("c", {"v": "2"}), 12)
    _put(state, rec.commit_record("c", 1), 13)
    assert state.snapshot().inconsistent == {"c"}
    assert state.snapshot().target_state("c") is TargetState.RUNNING
    assert before.target_state("c") is TargetState.PAUSED  # snapshots never change
    with pytest.raises(TypeError):
        before.connectors["x"] = {}  # type: ignore[index]


def test_target_states_read_the_newer_field_first_and_older_writers_too() -> None:
    state = _state(
        rec.connector_record("a", {}),
        rec.connector_record("b", {}),
        rec.connector_record("c", {}),
        ("target-state-a", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
        ("target-state-b", b'{"state":"PAUSED"}'),  # a worker before STOPPED existed
        ("target-state-c", b'{"state":"STARTED","state.v2":42}'),  # bad v2: fall back
        ("target-state-later", b'{"state":"STOPPED","state.v2":"STOPPED"}'),
    )
    snap = state.snapshot()
    assert snap.target_state("a") is TargetState.STOPPED
    assert snap.target_state("b") is TargetState.PAUSED
    assert snap.target_state("c") is TargetState.RUNNING
    # a target state written before its connector (Connect's initial_state) is kept for it
    assert snap.target_state("later") is TargetState.STOPPED and "later" not in snap.connectors
    state.apply(b"target-state-a", None, 9)  # a tombstone while the connector exists
    assert state.snapshot().target_state("a") is TargetState.RUNNING


def test_restart_requests_keep_the_latest_with_its_offset(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = _state(
        rec.connector_record("c", {}),
        rec.restart_record("c", include_tasks=False, only_failed=False),
        rec.connector_record("d", {}),
        rec.restart_record("c", include_tasks=True, only_failed=True),
        ("restart-connector-d", b'{"include-tasks":"yes"}'),  # Connect: a bad flag is false
    )
    snap = state.snapshot()
    assert [(r.connector, r.offset) for r in snap.restarts_since(0)] == [("c", 3), ("d", 4)]
    assert snap.restart_requests["c"].include_tasks and snap.restart_requests["c"].only_failed
    assert not snap.restart_requests["d"].include_tasks
    assert snap.restarts_since(4) == [snap.restart_requests["d"]]
    assert "restart-connector-d at offset 4" in caplog.text


HOSTILE: list[tuple[bytes | None, bytes | None, str]] = [
    (b"connector-x", b"\xff\xfe not json", "connector-x at offset 7: the value is not JSON"),
    (b"connector-x", b"null", "connector-x at offset 7: the value is JSON null"),
    (b"connector-x", b'["a"]', "connector-x at offset 7: expected"),
    (b"connector-x", b'{"properties":{"a":1}}', "connector-x at offset 7: expected"),
    (b"connector-x", b'{"properties":"a=b"}', "connector-x at offset 7: expected"),
    (b"task-x-0", b'{"properties":[]}', "task-x-0 at offset 7: expected"),
    (b"task-x-zero", b'{"properties":{}}', "task-x-zero at offset 7: expected task-"),
    (b"task-x-\xd9\xa3", b'{"properties":{}}', "at offset 7: expected task-"),
    (b"task-0", b'{"properties":{}}', "task-0 at offset 7: expected task-"),
    (b"task-x-0", None, "task-x-0 at offset 7: a task config cannot be null"),
    (b"commit-x", b'{"tasks":"2"}', "commit-x at offset 7: expected"),
    (b"commit-x", b'{"tasks":true}', "commit-x at offset 7: expected"),
    (b"commit-x", b'{"tasks":-1}', "commit-x at offset 7: expected"),
    (b"commit-x", None, "commit-x at offset 7: expected"),
    (b"target-state-x", b'{"state":"RUNNING"}', "target-state-x at offset 7: unknown target"),
    (b"target-state-x", b"3", "target-state-x at offset 7: expected a JSON object"),
    (b"restart-connector-x", b"[]", "restart-connector-x at offset 7: expected a JSON"),
    (b"whatever", b"{}", "whatever at offset 7: unknown key"),
    (b"\xff\xfe", b"{}", "at offset 7 is not UTF-8"),
    (None, b"{}", "record at offset 7 has no key"),
]


@pytest.mark.parametrize(("key", "value", "warning"), HOSTILE)
def test_a_hostile_record_is_skipped_with_a_warning_naming_key_and_offset(
    caplog: pytest.LogCaptureFixture, key: bytes | None, value: bytes | None, warning: str
) -> None:
    state = _state(
        rec.connector_record("x", {"good": "yes"}),
        rec.task_record(TaskId("x", 0), {"n": "0"}),
        rec.commit_record("x", 1),
        rec.target_state_record("x", TargetState.PAUSED),
    )
    before = state.snapshot()
    with caplog.at_level(logging.WARNING, "connectd.storage.configlog"):
        state.apply(key, value, 7)
    assert warning in caplog.text
    after = state.snapshot()
    assert after.offset == 8  # read past, never re-read
    assert (after.connectors, after.task_configs, after.target_states) == (
        before.connectors,
        before.task_configs,
        before.target_states,
    )


def test_connects_other_record_kinds_are_read_past_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        state = _state(
            ("tasks-fencing-c", b'{"task-count":3}'),
            ("session-key", b'{"key":"a2V5","algorithm":"HmacSHA256","creation-timestamp":1}'),
        )
    assert caplog.text == "" and state.snapshot().offset == 2


def test_cluster_log_levels_keep_the_latest_per_namespace_and_their_offsets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key, value = rec.logger_level_record("org.apache", "DEBUG")
    assert (key, value) == ("logger-cluster-org.apache", b'{"level":"DEBUG"}')  # Connect's
    with caplog.at_level(logging.WARNING):
        state = _state(
            ("logger-cluster-org.apache", b'{"level":"DEBUG"}'),
            ("logger-cluster-connectd", b'{"level":"TRACE"}'),
            ("logger-cluster-org.apache", b'{"level":"WARN"}'),
            ("logger-cluster-bad", b'{"level":3}'),
            ("logger-cluster-", b'{"level":"INFO"}'),
        )
    assert "skipped logger-cluster-bad at offset 3" in caplog.text
    assert "skipped logger-cluster- at offset 4" in caplog.text
    snap = state.snapshot()
    assert [(r.namespace, r.level, r.offset) for r in snap.levels_since(0)] == [
        ("connectd", "TRACE", 1),
        ("org.apache", "WARN", 2),
    ]
    assert [r.namespace for r in snap.levels_since(2)] == ["org.apache"]
    assert snap.levels_since(3) == []
