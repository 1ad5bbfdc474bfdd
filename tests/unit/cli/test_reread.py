"""config.plan.reread: what a reload (SIGHUP) reads, all or nothing, every problem located."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import daemon.connectors.builtin  # noqa: F401 (registers EchoSink)
from daemon.cli import plan
from daemon.config.plan import LaunchPlan, reread
from daemon.connectors.api import default_registry
from daemon.errors import InvalidConfig

CONNECTOR = "name=echo\nconnector.class=EchoSink\ntopics=t\ntasks.max=2\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    worker = tmp_path / "worker.properties"
    worker.write_text(f"bootstrap.servers=127.0.0.1:1\nstate.dir={tmp_path / 'state'}\n")
    connector = tmp_path / "echo.properties"
    connector.write_text(CONNECTOR)
    return worker, connector


def _plan(worker: Path, connector: Path) -> LaunchPlan:
    args = argparse.Namespace(command="standalone", worker=str(worker), connectors=[str(connector)])
    return plan(args)


def _problems(current: LaunchPlan) -> list[str]:
    with pytest.raises(InvalidConfig) as caught:
        reread(current, default_registry)
    return [str(p) for p in caught.value.problems]


def test_files_are_read_again(files: tuple[Path, Path]) -> None:
    worker, connector = files
    current = _plan(worker, connector)
    assert current.worker_file == worker and current.connector_files == (connector,)
    connector.write_text(CONNECTOR.replace("tasks.max=2", "tasks.max=1"))
    worker.write_text(worker.read_text() + "log.level=DEBUG\n")
    new = reread(current, default_registry)
    assert new.connectors[0].properties["tasks.max"] == "1"
    assert new.worker.log_level.value == "DEBUG"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name=echo\nconnector.class=EchoSink\ntopics=t\ntasks.max=two\n", ": tasks.max: "),
        ("name=echo\ntopics=t\n", ": connector.class: required key is missing"),
        ("name=echo\nconnector.class=NoSuchSink\ntopics=t\n", ": connector.class: "),
        ("name=echo\nconnector.class=EchoSink\ntopics=t\nlog.first.records=-1\n", "log.first"),
        ("name=echo\nconnector.class=EchoSink\ntopics=t\n\\u12\n", "echo.properties"),
    ],
    ids=["bad-value", "missing-class", "unknown-class", "connector-validation", "bad-syntax"],
)
def test_a_broken_connector_file_is_named_with_its_key(
    files: tuple[Path, Path], text: str, expected: str
) -> None:
    worker, connector = files
    current = _plan(worker, connector)
    connector.write_text(text)
    problems = _problems(current)
    assert problems, problems
    assert all(p.startswith(str(connector)) for p in problems), problems
    assert any(expected in p for p in problems), problems


def test_a_broken_worker_file_is_named_with_its_key(files: tuple[Path, Path]) -> None:
    worker, connector = files
    current = _plan(worker, connector)
    worker.write_text(worker.read_text() + "offset.flush.interval.ms=often\n")
    (problem,) = _problems(current)
    assert problem.startswith(f"{worker}:3: offset.flush.interval.ms: "), problem


def test_a_missing_file_is_a_problem_too(files: tuple[Path, Path]) -> None:
    worker, connector = files
    current = _plan(worker, connector)
    connector.unlink()
    (problem,) = _problems(current)
    assert problem.startswith(str(connector)), problem


def test_two_files_naming_one_connector(files: tuple[Path, Path], tmp_path: Path) -> None:
    worker, connector = files
    other = tmp_path / "other.properties"
    other.write_text(CONNECTOR.replace("name=echo", "name=other"))
    args = argparse.Namespace(
        command="standalone", worker=str(worker), connectors=[str(connector), str(other)]
    )
    current = plan(args)
    other.write_text(CONNECTOR)
    (problem,) = _problems(current)
    assert problem == f"{other}: name: 'echo' is also the name in {connector}"


def test_toml_plans_reread_their_file(tmp_path: Path) -> None:
    toml = tmp_path / "connectd.toml"
    body = (
        'mode = "standalone"\n[worker]\n"bootstrap.servers" = "127.0.0.1:1"\n'
        '[[connectors]]\nname = "echo"\n[connectors.config]\n'
        '"connector.class" = "EchoSink"\ntopics = "t"\n"tasks.max" = TASKS\n'
    )
    toml.write_text(body.replace("TASKS", "2"))
    current = plan(argparse.Namespace(command="run", config=str(toml)))
    assert current.config_file == toml
    toml.write_text(body.replace("TASKS", "1"))
    assert reread(current, default_registry).connectors[0].properties["tasks.max"] == "1"
    toml.write_text(body.replace("TASKS", '"x"'))
    assert all(p.startswith(str(toml)) for p in _problems(current))
