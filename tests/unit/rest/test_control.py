"""Status, tasks, restarts, pause/resume/stop and active topics through a real HTTP client."""

from __future__ import annotations

import asyncio

import pytest
from support.fake_worker import Client, FakeWorker, local_settings, serving_client

NAME = "sink-hang-connector"
STATES = {"UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"}


async def _wait_state(client: Client, want: str, deadline_s: float = 5.0) -> dict[str, object]:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        status = (await client.get(f"/connectors/{NAME}/status")).json
        if status["connector"]["state"] == want:
            return dict(status)
        assert loop.time() < end, f"connector never became {want}: {status}"
        await asyncio.sleep(0.01)


async def test_status_shape(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME, tasks_max=2)
    answer = await client.get(f"/connectors/{NAME}/status")
    assert answer.status == 200
    status = answer.json
    assert status["name"] == NAME
    assert status["type"] == "sink"
    assert status["connector"] == {"state": "RUNNING", "worker_id": worker.worker_id}
    assert [t["id"] for t in status["tasks"]] == [0, 1]
    for task in status["tasks"]:
        assert task["state"] in STATES
        assert task["worker_id"] == worker.worker_id
        assert isinstance(task["incarnation"], int)
        assert isinstance(task["executor_pid"], int)
    (await client.get("/connectors/nope/status")).error(404)


async def test_failed_task_shows_its_trace(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME)
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom'
    worker.fail_task(NAME, 0, trace)
    task = (await client.get(f"/connectors/{NAME}/tasks/0/status")).json
    assert task["state"] == "FAILED"
    assert task["trace"] == trace


async def test_tasks_and_task_status(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME, tasks_max=2)
    tasks = (await client.get(f"/connectors/{NAME}/tasks")).json
    assert [t["id"] for t in tasks] == [
        {"connector": NAME, "task": 0},
        {"connector": NAME, "task": 1},
    ]
    assert tasks[0]["config"]["connector.class"] == "HangSink"
    one = (await client.get(f"/connectors/{NAME}/tasks/1/status")).json
    assert one["id"] == 1 and one["state"] == "RUNNING"
    assert one["worker_id"] == worker.worker_id
    (await client.get("/connectors/nope/tasks")).error(404)
    assert f"{NAME}-7" in (await client.get(f"/connectors/{NAME}/tasks/7/status")).error(404)
    (await client.get(f"/connectors/{NAME}/tasks/x/status")).error(404)


async def test_restart_connector_alone_is_204(client: Client) -> None:
    await client.create(NAME)
    answer = await client.call("POST", f"/connectors/{NAME}/restart")
    assert answer.status == 204 and answer.text == ""
    answer = await client.call(
        "POST", f"/connectors/{NAME}/restart?includeTasks=false&onlyFailed=false"
    )
    assert answer.status == 204
    (await client.call("POST", "/connectors/nope/restart")).error(404)


async def test_restart_with_tasks_is_202_restarting(client: Client) -> None:
    await client.create(NAME, tasks_max=2)
    before = (await client.get(f"/connectors/{NAME}/status")).json
    answer = await client.call("POST", f"/connectors/{NAME}/restart?includeTasks=true")
    assert answer.status == 202
    assert answer.json["connector"]["state"] == "RESTARTING"
    assert {t["state"] for t in answer.json["tasks"]} == {"RESTARTING"}
    after = await _wait_state(client, "RUNNING")
    old = {t["incarnation"] for t in before["tasks"]}
    new = {t["incarnation"] for t in after["tasks"]}  # type: ignore[index]
    assert not old & new


async def test_restart_only_failed(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME, tasks_max=2)
    worker.fail_task(NAME, 1, "boom")
    answer = await client.call(
        "POST", f"/connectors/{NAME}/restart?includeTasks=true&onlyFailed=true"
    )
    assert answer.status == 202
    states = {t["id"]: t["state"] for t in answer.json["tasks"]}
    assert states == {0: "RUNNING", 1: "RESTARTING"}
    assert answer.json["connector"]["state"] == "RUNNING"


@pytest.mark.parametrize("query", ["includeTasks=yes", "onlyFailed=1", "includeTasks="])
async def test_restart_with_unknown_query_value_is_400(client: Client, query: str) -> None:
    await client.create(NAME)
    assert "expected true or false" in (
        await client.call("POST", f"/connectors/{NAME}/restart?{query}")
    ).error(400)


async def test_restart_task_204_new_incarnation(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME)
    before = (await client.get(f"/connectors/{NAME}/tasks/0/status")).json
    answer = await client.call("POST", f"/connectors/{NAME}/tasks/0/restart")
    assert answer.status == 204
    after = (await client.get(f"/connectors/{NAME}/tasks/0/status")).json
    assert after["incarnation"] > before["incarnation"]
    assert after["executor_pid"] != before["executor_pid"]
    assert worker.max_live_seen == 1


async def test_restart_hung_task_never_leaves_two_incarnations(
    client: Client, worker: FakeWorker
) -> None:
    await client.create(NAME)
    worker.hang_task(NAME, 0)
    for _ in range(3):
        assert (await client.call("POST", f"/connectors/{NAME}/tasks/0/restart")).status == 204
        assert len(worker.live_incarnations[(NAME, 0)]) == 1
    assert worker.max_live_seen == 1


async def test_restart_task_that_cannot_be_reaped_is_500(
    client: Client, worker: FakeWorker
) -> None:
    await client.create(NAME)
    worker.hang_task(NAME, 0)
    worker.fail_next_reap = True
    message = (await client.call("POST", f"/connectors/{NAME}/tasks/0/restart")).error(500)
    assert "could not be reaped" in message
    assert len(worker.live_incarnations[(NAME, 0)]) == 1  # the old one, and no new one


async def test_restart_task_errors(client: Client) -> None:
    (await client.call("POST", "/connectors/nope/tasks/0/restart")).error(404)
    await client.create(NAME)
    (await client.call("POST", f"/connectors/{NAME}/tasks/3/restart")).error(404)
    (await client.call("POST", f"/connectors/{NAME}/tasks/zero/restart")).error(404)


async def test_pause_resume_stop(client: Client) -> None:
    await client.create(NAME)
    answer = await client.call("PUT", f"/connectors/{NAME}/pause")
    assert answer.status == 202 and answer.text == ""
    status = (await client.get(f"/connectors/{NAME}/status")).json
    assert status["connector"]["state"] == "PAUSED"
    assert {t["state"] for t in status["tasks"]} == {"PAUSED"}
    assert (await client.call("PUT", f"/connectors/{NAME}/resume")).status == 202
    await _wait_state(client, "RUNNING")
    answer = await client.call("PUT", f"/connectors/{NAME}/stop")
    assert answer.status == 204
    status = (await client.get(f"/connectors/{NAME}/status")).json
    assert status["connector"]["state"] == "STOPPED"
    assert status["tasks"] == []
    assert (await client.get(f"/connectors/{NAME}")).json["tasks"] == []
    assert (await client.call("PUT", f"/connectors/{NAME}/resume")).status == 202  # from STOPPED
    status = await _wait_state(client, "RUNNING")
    assert len(status["tasks"]) == 1  # type: ignore[arg-type]


@pytest.mark.parametrize("verb", ["pause", "resume", "stop"])
async def test_pause_resume_stop_unknown_is_404(client: Client, verb: str) -> None:
    (await client.call("PUT", f"/connectors/nope/{verb}")).error(404)


async def test_topics_and_reset(client: Client) -> None:
    await client.create(NAME, topics="a,b")
    answer = await client.get(f"/connectors/{NAME}/topics")
    assert answer.status == 200
    assert answer.json == {NAME: {"topics": ["a", "b"]}}
    reset = await client.call("PUT", f"/connectors/{NAME}/topics/reset")
    assert reset.status == 202 and reset.text == ""
    assert (await client.get(f"/connectors/{NAME}/topics")).json == {NAME: {"topics": []}}
    (await client.get("/connectors/nope/topics")).error(404)
    (await client.call("PUT", "/connectors/nope/topics/reset")).error(404)


async def test_topic_tracking_disabled_is_403(worker: FakeWorker) -> None:
    settings = local_settings(topic_tracking=False)
    async with serving_client(worker, settings) as client:
        await client.create(NAME)
        assert (await client.get(f"/connectors/{NAME}/topics")).error(
            403
        ) == "Topic tracking is disabled."
        (await client.call("PUT", f"/connectors/{NAME}/topics/reset")).error(403)


async def test_topic_reset_disabled_is_403(worker: FakeWorker) -> None:
    settings = local_settings(topic_tracking_reset=False)
    async with serving_client(worker, settings) as client:
        await client.create(NAME)
        assert (await client.get(f"/connectors/{NAME}/topics")).status == 200
        message = (await client.call("PUT", f"/connectors/{NAME}/topics/reset")).error(403)
        assert message == "Topic tracking reset is disabled."
