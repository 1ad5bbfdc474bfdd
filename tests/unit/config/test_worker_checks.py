"""Issue 29 item 3: ``tasks.max`` above the worker's ``tasks.max.limit`` is refused wherever a
connector config is checked for a worker (``daemon.config.worker_checks``), and the runtime's
start applies the same bound."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from daemon.config import Mode, check_main, parse_worker
from daemon.config.worker import TASKS_MAX_LIMIT
from daemon.config.worker_checks import NONE_REFUSED, WorkerChecks
from daemon.connectors.api import default_registry
from daemon.connectors.registry import validate_connector
from daemon.errors import InvalidConfig


def _echo(tasks: str) -> dict[str, str]:
    return {"connector.class": "EchoSink", "topics": "t", "tasks.max": tasks}


def test_the_bound_is_a_worker_setting_with_a_default_and_a_range() -> None:
    worker = {"bootstrap.servers": "127.0.0.1:9092"}
    assert parse_worker(worker, mode=Mode.STANDALONE).config.tasks_max_limit == TASKS_MAX_LIMIT
    assert WorkerChecks.of(parse_worker(worker, mode=Mode.STANDALONE).config) == NONE_REFUSED
    for bad in ("0", "10001", "many"):
        with pytest.raises(InvalidConfig) as caught:
            parse_worker({**worker, "tasks.max.limit": bad}, mode=Mode.STANDALONE)
        (problem,) = caught.value.problems
        assert problem.key == "tasks.max.limit"
        assert problem.expected == "an integer from 1 to 10000"


def test_more_tasks_than_the_bound_is_an_error_naming_the_key() -> None:
    checks = WorkerChecks(tasks_max_limit=8)
    assert checks.problems(None, _echo("8")) == []
    (problem,) = checks.problems(None, _echo("9"))
    assert problem.key == "tasks.max" and problem.is_error
    assert problem.message.startswith("9 is more tasks than this worker runs for one connector")
    assert "tasks.max.limit=8" in problem.message
    assert problem.expected is not None and problem.expected.startswith("at most 8")
    # Left to the connector config's own parsing, and to the runtime's check at start:
    assert checks.problems(None, _echo("${file:/etc/secrets:tasks}")) == []
    assert checks.problems(None, _echo("lots")) == []


def test_the_runtime_bound_at_start() -> None:
    checks = WorkerChecks(tasks_max_limit=2)
    assert checks.tasks_max({"tasks.max": "2"}) == 2
    assert checks.tasks_max({}) == 1
    with pytest.raises(InvalidConfig, match=r"tasks\.max: 3 is more tasks .*tasks\.max\.limit=2"):
        checks.tasks_max({"tasks.max": "3"})


def test_a_bound_registry_refuses_it_and_the_default_allows_the_default_bound() -> None:
    bound = default_registry.bound(WorkerChecks(tasks_max_limit=4))
    with pytest.raises(InvalidConfig) as caught:
        validate_connector("c", _echo("100000"), bound)
    assert [p.key for p in caught.value.problems] == ["tasks.max"]
    assert validate_connector("c", _echo("4"), bound)["tasks.max"] == "4"
    assert validate_connector("c", _echo(str(TASKS_MAX_LIMIT)), default_registry)
    with pytest.raises(InvalidConfig):
        validate_connector("c", _echo(str(TASKS_MAX_LIMIT + 1)), default_registry)


def test_check_config_refuses_it_against_the_worker_file(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:9092\ntasks.max.limit=2\n")
    connector = tmp_path / "c.properties"
    connector.write_text("name=c\nconnector.class=EchoSink\ntopics=t\ntasks.max=3\n")
    out, err = io.StringIO(), io.StringIO()
    code = check_main([str(worker), str(connector)], out, err, resolver=default_registry.config_def)
    text = out.getvalue() + err.getvalue()
    assert code == 78, text
    (line,) = [x for x in text.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: {connector}:4: tasks.max: 3 is more tasks than this worker")
    out = io.StringIO()
    worker.write_text("bootstrap.servers=127.0.0.1:9092\ntasks.max.limit=3\n")
    assert (
        check_main([str(worker), str(connector)], out, err, resolver=default_registry.config_def)
        == 0
    )
