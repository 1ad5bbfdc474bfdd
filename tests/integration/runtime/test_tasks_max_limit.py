"""Issue 29 item 3, with real ``connectd standalone`` processes and their REST API: a connector
asking for more tasks than the worker's ``tasks.max.limit`` is refused at create and at validate
with Connect's error body, naming the key; one stored under a higher bound is restored FAILED
with the reason after the bound is lowered (its tasks are never made), while the other
connectors run and ``DELETE`` removes it. A task left without a partition (more tasks than the
topics have partitions) logs a warning saying so.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration


def _echo(name: str, topic: str, tasks: int) -> dict[str, str]:
    return {"name": name, "connector.class": "EchoSink", "topics": topic, "tasks.max": str(tasks)}


def _status(p: DaemonProcess, name: str) -> dict[str, object]:
    code, body = p.rest("GET", f"/connectors/{name}/status")
    assert code == 200, body
    return dict(body)


async def test_tasks_above_the_limit_are_refused_and_a_stored_one_fails_at_start(
    daemon_process: ProcessFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=2)
    state = tmp_path / "state"
    worker = worker_properties(kafka_bootstrap, state, tasks_max_limit="4")
    first = daemon_process(worker, [_echo("small", topic, 1)])

    code, body = first.rest(
        "POST", "/connectors", {"name": "huge", "config": _echo("huge", topic, 100_000)}
    )
    assert code == 400, body
    assert body["error_code"] == 400
    assert "tasks.max" in body["message"] and "tasks.max.limit=4" in body["message"]
    code, names = first.rest("GET", "/connectors")
    assert (code, names) == (200, ["small"])
    # The same answer through PUT .../config (create or update) and for an existing connector.
    code, body = first.rest("PUT", "/connectors/small/config", _echo("small", topic, 5))
    assert code == 400 and "tasks.max.limit=4" in body["message"], body
    assert first.rest("GET", "/connectors/small/config")[1]["tasks.max"] == "1"

    # Validation files the error under tasks.max, as Connect files its own errors.
    code, infos = first.rest(
        "PUT", "/connector-plugins/EchoSink/config/validate", _echo("huge", topic, 100_000)
    )
    assert code == 200, infos
    assert infos["error_count"] == 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]}
    (message,) = errors["tasks.max"]
    assert "100000 is more tasks than this worker runs for one connector" in message

    # A connector stored with 4 tasks, then the bound lowered to 2: restored FAILED with the
    # reason, no task made; the other connector runs; DELETE removes it.
    code, body = first.rest(
        "POST", "/connectors", {"name": "four", "config": _echo("four", topic, 4)}
    )
    assert code == 201, body
    await wait_until(lambda: len(_status(first, "four")["tasks"]) == 4, timeout=30)  # type: ignore[arg-type]
    # Two of its four tasks get no partition of the 2-partition topic: each says so (once per
    # task; one that was idle only during the group's joining may have said so too).
    idle = "has no partition: tasks.max=4 is more than the 2 partition(s) of its topics"
    await wait_until(lambda: first.log().count(idle) >= 2, timeout=30, what="two idle warnings")
    first.signal(signal.SIGTERM)
    assert first.wait(60) == 0

    second = daemon_process({**worker, "tasks.max.limit": "2"}, [_echo("small", topic, 1)])
    four = _status(second, "four")
    assert four["connector"]["state"] == "FAILED", four  # type: ignore[index]
    trace = four["connector"]["trace"]  # type: ignore[index]
    assert "tasks.max" in trace and "tasks.max.limit=2" in trace, trace
    assert four["tasks"] == []
    await wait_until(
        lambda: _status(second, "small")["connector"]["state"] == "RUNNING",  # type: ignore[index]
        timeout=30,
    )
    assert second.rest("DELETE", "/connectors/four")[0] == 204
    assert second.rest("GET", "/connectors")[1] == ["small"]
    assert "four" not in second.rest("GET", "/connectors")[1]
