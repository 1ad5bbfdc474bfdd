"""The worker's API where no task runs (STOPPED connectors): validation, persistence, states,
and the offsets API's preconditions. No broker and no executors needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.daemon import NoExecutors

from daemon.config import parse_worker
from daemon.errors import Conflict, ConnectorExists, ConnectorNotFound, InvalidConfig, TaskNotFound
from daemon.runtime.model import SinkOffset, State, TargetState
from daemon.runtime.standalone import StandaloneHerder
from daemon.storage.standalone import StandaloneStore

SINK = "support.daemon:RecordingSink"


def _worker(tmp_path: Path) -> StandaloneHerder:
    config = parse_worker(
        {"bootstrap.servers": "127.0.0.1:1", "state.dir": str(tmp_path), "listeners": "http://h:9"}
    ).config
    return StandaloneHerder(config, NoExecutors(), store=StandaloneStore(tmp_path))


def _config(**extra: str) -> dict[str, str]:
    return {"connector.class": SINK, "topics": "t", "tasks.max": "2", **extra}


async def test_stopped_connector_lifecycle_and_persistence(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    assert worker.worker_id == "h:9"
    await worker.start()
    info = await worker.create_connector("c", _config(), TargetState.STOPPED)
    assert info.name == "c" and info.config["name"] == "c" and info.tasks == ()
    status = worker.connector_status("c")
    assert status.state is State.STOPPED and status.tasks == ()
    assert worker.connector_names() == ["c"]
    with pytest.raises(ConnectorExists):
        await worker.create_connector("c", _config(), TargetState.STOPPED)
    with pytest.raises(TaskNotFound):
        await worker.restart_task("c", 0)
    with pytest.raises(TaskNotFound):
        worker.task_status("c", 0)
    created, info = await worker.put_connector_config("c", _config(**{"tasks.max": "3"}))
    assert not created and info.config["tasks.max"] == "3"
    assert worker.connector_status("c").state is State.STOPPED  # still stopped: no tasks

    again = _worker(tmp_path)
    await again.start()
    assert again.connector_config("c")["tasks.max"] == "3"
    assert again.connector_status("c").state is State.STOPPED

    await again.delete_connector("c")
    assert again.connector_names() == []
    with pytest.raises(ConnectorNotFound, match="Connector c not found"):
        again.connector_status("c")
    third = _worker(tmp_path)
    await third.start()
    assert third.connector_names() == []


async def test_invalid_configs_are_refused_with_every_problem(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    await worker.start()
    with pytest.raises(InvalidConfig) as info:
        await worker.create_connector("c", {"connector.class": SINK, "tasks.max": "zero"})
    text = str(info.value)
    assert "topics" in text and "tasks.max" in text
    with pytest.raises(InvalidConfig, match="differs from the connector's name"):
        await worker.create_connector("c", _config(name="other"))
    with pytest.raises(InvalidConfig, match=r"connector\.class"):
        await worker.create_connector("c", _config(**{"connector.class": "NoSuchSink"}))
    assert worker.connector_names() == []


async def test_command_line_configs_keep_a_stored_target_state(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    await worker.start()
    await worker.create_connector("c", _config(), TargetState.STOPPED)
    restarted = _worker(tmp_path)
    await restarted.start([{"name": "c", **_config(**{"tasks.max": "1"})}])
    assert restarted.connector_status("c").state is State.STOPPED
    assert restarted.connector_config("c")["tasks.max"] == "1"


async def test_offsets_can_only_change_when_stopped(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    await worker.start()
    await worker.create_connector("c", _config(), TargetState.PAUSED)
    # Its tasks cannot reach a broker here; only the refusal matters.
    with pytest.raises(Conflict) as info:
        await worker.alter_offsets("c", [SinkOffset("t", 0, 5)])
    assert info.value.status == 400 and "STOPPED" in str(info.value)
    with pytest.raises(Conflict):
        await worker.reset_offsets("c")
    await worker.stop()
