"""A connector asks for task reconfiguration (``ConnectorContext.request_task_reconfiguration``,
Connect's ``requestTaskReconfiguration``) when what it watches changes: the worker calls
``task_configs`` again and, in standalone mode, restarts the tasks with the new configurations
(more, fewer, or the same count with new content); an unchanged answer restarts nothing.
``raise_error`` fails the connector and leaves its tasks running. In-process daemon, real
broker, no Spark (``support.reconfiguring.FileTasksSink``). The distributed path (through the
leader) is ``cluster/test_distributed_task_configs.py``."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

from daemon.daemon import Daemon
from daemon.runtime.model import State

pytestmark = pytest.mark.integration


async def _file_tasks_sink(
    run_daemon: DaemonFactory,
    bootstrap: str,
    tmp_path: Path,
    name: str,
    topic: str,
    **extra: str,
) -> tuple[Daemon, Path]:
    """An in-process daemon running a ``FileTasksSink`` ``name`` whose file says 1 task; the
    daemon and the file."""
    d = await run_daemon(worker_properties(bootstrap, tmp_path / "state"))
    assert d.herder is not None
    watched = tmp_path / "tasks"
    watched.write_text("1")
    config = {
        "connector.class": "support.reconfiguring:FileTasksSink",
        "topics": topic,
        "tasks.file": str(watched),
        **extra,
    }
    await d.herder.create_connector(name, config)
    return d, watched


async def test_changed_task_configurations_restart_the_tasks_with_them(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=3)
    d, watched = await _file_tasks_sink(
        run_daemon, kafka_bootstrap, tmp_path, "grows", topic, **{"tasks.max": "3"}
    )
    herder = d.herder
    assert herder is not None and d.rest_url is not None

    def running(n: int, generation: str) -> bool:
        status = herder.connector_status("grows")
        infos = herder.task_infos("grows")
        return (
            len(status.tasks) == n
            and all(t.state is State.RUNNING for t in status.tasks)
            and [i.config.get("tasks.generation") for i in infos] == [generation] * n
        )

    await wait_until(lambda: running(1, "1"), 60, "one task")
    first = herder.connector_status("grows").tasks[0].incarnation
    watched.write_text("3")
    await wait_until(lambda: running(3, "3"), 60, "three tasks with the new configuration")
    assert herder.connector_status("grows").tasks[0].incarnation != first  # restarted
    watched.write_text("2")
    await wait_until(lambda: running(2, "2"), 60, "two tasks")

    # A request whose answer is the same configurations ("02" is 2 tasks): nothing restarts.
    before = [t.incarnation for t in herder.connector_status("grows").tasks]
    rt = herder.worker.get("grows")
    assert rt is not None
    rounds = rt.reconfigurations.rounds
    watched.write_text("02")
    await wait_until(lambda: rt.reconfigurations.rounds > rounds, 10, "one more round")
    assert [t.incarnation for t in herder.connector_status("grows").tasks] == before

    # Standalone takes no task configurations from outside (Connect's message), 404 first.
    async with aiohttp.ClientSession(d.rest_url) as http:
        async with http.post("/connectors/grows/tasks", json=[{"a": "b"}]) as r:
            assert r.status == 400, await r.text()
            assert "standalone mode does not support" in (await r.json())["message"]
        async with http.post("/connectors/nope/tasks", json=[]) as r:
            assert r.status == 404


async def test_a_connector_that_raises_an_error_fails_and_its_tasks_run_on(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    d, watched = await _file_tasks_sink(
        run_daemon, kafka_bootstrap, tmp_path, "fails", topic, **{"errors.restart.enabled": "false"}
    )
    herder = d.herder
    assert herder is not None
    await wait_until(
        lambda: [t.state for t in herder.connector_status("fails").tasks] == [State.RUNNING],
        60,
        "its task running",
    )
    watched.write_text("fail")
    await wait_until(
        lambda: herder.connector_status("fails").state is State.FAILED, 30, "connector FAILED"
    )
    status = herder.connector_status("fails")
    assert status.trace is not None and "told to fail" in status.trace
    assert [t.state for t in status.tasks] == [State.RUNNING]
