"""``tasks.max.enforce`` as Connect 4 has it (issue 35): a connector that generates more task
configurations than ``tasks.max`` fails, naming both counts, where connectd used to cut the
list silently; with ``tasks.max.enforce=false`` every generated task runs, with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory

from daemon.runtime.model import State

pytestmark = pytest.mark.integration


async def test_more_task_configs_than_tasks_max_fail_unless_not_enforced(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = await kafka_topic(partitions=4)
    greedy = {"connector.class": "support.failing_sinks:GreedySink", "topics": topic}
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"))
    herder = d.herder
    assert herder is not None

    await herder.create_connector("strict", {**greedy, "tasks.max": "2"})
    status = await wait_until(
        lambda: (s := herder.connector_status("strict")).state is State.FAILED and s, 30
    )
    assert status.trace is not None
    assert "generated 4 task configurations, more than tasks.max=2" in status.trace
    assert status.tasks == ()
    assert status.auto_restart is not None and status.auto_restart.next_restart is None
    assert "Connector strict is not restarted automatically" in caplog.text  # not retriable

    await herder.create_connector(
        "lenient", {**greedy, "tasks.max": "2", "tasks.max.enforce": "false"}
    )
    await wait_until(
        lambda: (
            len(herder.connector_status("lenient").tasks) == 4
            and all(t.state is State.RUNNING for t in herder.connector_status("lenient").tasks)
        ),
        30,
        "four running tasks",
    )
    assert "generated 4 task configurations, more than tasks.max=2; all run" in caplog.text
