"""The status view without a broker: Connect's putSafe rule, tombstones, hostile records."""

from __future__ import annotations

import logging

import pytest

from daemon.storage.kafka.statusstore import Status, StatusView, connector_key, task_key
from daemon.structs import State, TaskId

TASK = TaskId("my-sink", 3)


def _apply(view: StatusView, key: str, status: Status | None, offset: int) -> None:
    view.apply(key.encode(), None if status is None else status.encode(), offset)


@pytest.mark.parametrize(
    ("current", "incoming", "applied"),
    [
        (None, Status(State.RUNNING, "w1", 1), True),  # nothing yet
        (Status(State.RUNNING, "w2", 7), Status(State.FAILED, "w1", 6), False),  # zombie
        (Status(State.RUNNING, "w2", 7), Status(State.FAILED, "w2", 6), True),  # same worker
        (Status(State.RUNNING, "w2", 7), Status(State.UNASSIGNED, "w1", 7), True),  # same gen
        (Status(State.RUNNING, "w2", 7), Status(State.RUNNING, "w3", 8), True),  # newer
    ],
)
def test_the_put_safe_rule(current: Status | None, incoming: Status, applied: bool) -> None:
    view = StatusView()
    if current is not None:
        _apply(view, task_key(TASK), current, 0)
        _apply(view, connector_key("my-sink"), current, 1)
    _apply(view, task_key(TASK), incoming, 2)
    _apply(view, connector_key("my-sink"), incoming, 3)
    expected = incoming if applied else current
    assert expected is not None
    for got in (view.tasks[TASK], view.connectors["my-sink"]):
        assert (got.worker_id, got.generation, got.state) == (
            expected.worker_id,
            expected.generation,
            expected.state,
        )


def test_tombstones_and_connects_destroyed_remove_whoever_wrote_last() -> None:
    view = StatusView()
    _apply(view, task_key(TASK), Status(State.RUNNING, "w2", 9), 0)
    _apply(view, connector_key("c"), Status(State.RUNNING, "w2", 9), 1)
    _apply(view, task_key(TASK), None, 2)
    view.apply(b"status-connector-c", b'{"state":"DESTROYED","worker_id":"w1","generation":1}', 3)
    assert view.tasks == {} and view.connectors == {}


def test_the_offset_and_trace_are_kept() -> None:
    view = StatusView()
    _apply(view, task_key(TASK), Status(State.FAILED, "w1", 2, "Traceback: boom"), 41)
    assert view.tasks[TASK] == Status(State.FAILED, "w1", 2, "Traceback: boom", 41)


HOSTILE: list[tuple[bytes | None, bytes, str]] = [
    (b"status-task-c-0", b"not json", "status-task-c-0 at offset 5: the value is not JSON"),
    (b"status-task-c-0", b"[1]", "status-task-c-0 at offset 5: expected a JSON object"),
    (b"status-task-c-0", b'{"state":"BORED","worker_id":"w","generation":1}', "unknown state"),
    (b"status-task-c-0", b'{"state":["RUNNING"],"worker_id":"w","generation":1}', "unknown"),
    (b"status-task-c-0", b'{"state":"RUNNING","worker_id":5,"generation":1}', "worker_id 5"),
    (b"status-task-c-0", b'{"state":"RUNNING","worker_id":"w","generation":"9"}', "'9'"),
    (b"status-task-c-0", b'{"state":"RUNNING","worker_id":"w","generation":true}', "True"),
    (b"status-task-c-0", b'{"state":"RUNNING","worker_id":"w","generation":1,"trace":{}}', "trace"),
    (b"status-task-c-x", b"{}", "status-task-c-x at offset 5: expected status-task-"),
    (b"status-whatever", b"{}", "status-whatever at offset 5: unknown key"),
    (b"\xff", b"{}", "record at offset 5 has no UTF-8 key"),
    (None, b"{}", "record at offset 5 has no UTF-8 key"),
]


@pytest.mark.parametrize(("key", "value", "warning"), HOSTILE)
def test_a_hostile_record_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture, key: bytes | None, value: bytes, warning: str
) -> None:
    view = StatusView()
    good = Status(State.RUNNING, "w", 1, offset=0)
    _apply(view, "status-task-c-0", good, 0)
    with caplog.at_level(logging.WARNING, "connectd.storage.status"):
        view.apply(key, value, 5)
    assert warning in caplog.text
    assert view.tasks == {TaskId("c", 0): good} and view.connectors == {}


def test_connects_topic_tracking_records_are_read_past(caplog: pytest.LogCaptureFixture) -> None:
    view = StatusView()
    with caplog.at_level(logging.WARNING):
        view.apply(b"status-topic-orders:connector-c", b'{"topic":{"name":"orders"}}', 0)
    assert caplog.text == "" and view.tasks == {} and view.connectors == {}


def test_members_that_left_on_purpose_are_remembered_and_bounded() -> None:
    """``status-left-<member>`` records feed the leader's reservations; a tombstone forgets
    one; only the newest ``MAX_LEFT`` are kept, whatever a hostile writer floods in."""
    from daemon.storage.kafka.statusstore import LEFT_PREFIX, MAX_LEFT

    view = StatusView()
    view.apply(f"{LEFT_PREFIX}m1".encode(), b'{"worker_id": "h:1"}', 0)
    view.apply(f"{LEFT_PREFIX}m2".encode(), b'{"worker_id": "h:2"}', 1)
    view.apply(f"{LEFT_PREFIX}m1".encode(), None, 2)
    assert list(view.left) == ["m2"]
    for i in range(MAX_LEFT + 5):
        view.apply(f"{LEFT_PREFIX}x{i}".encode(), b"{}", 3 + i)
    assert len(view.left) == MAX_LEFT
    assert "m2" not in view.left and f"x{MAX_LEFT + 4}" in view.left
    assert not view.tasks and not view.connectors


def test_a_departure_says_what_the_member_ran() -> None:
    """What ``StatusWriter.put_left`` writes is read back as the member's departure (a new
    leader reserves that work); an older connectd's record, or a broken one, says no work."""
    import json

    from daemon.storage.kafka.statusstore import LEFT_PREFIX, Departure, decode_departure

    ran = Departure(
        "http://w1:8083", frozenset({"c"}), frozenset({TaskId("c", 0), TaskId("c", 2)}), 1234
    )
    value = {
        "worker_id": "w1:8083",
        "url": ran.url,
        "connectors": sorted(ran.connectors),
        "tasks": [[t.connector, t.task] for t in sorted(ran.tasks)],
        "at": ran.at_ms,
    }
    view = StatusView()
    view.apply((LEFT_PREFIX + "m1").encode(), json.dumps(value).encode(), 0)
    assert view.left["m1"] == ran
    assert decode_departure(b'{"worker_id": "w1:8083"}') == Departure()
    for broken in (b"[1]", b"{", b'{"url": 5}', b'{"tasks": [["c", -1]], "url": "u", "at": 1}'):
        assert not decode_departure(broken).tasks
