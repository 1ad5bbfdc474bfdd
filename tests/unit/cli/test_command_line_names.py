"""The `connectd` command line, as a user runs it (real subprocesses, real files), issue 13:

- item 4: two connector files naming one connector (``a.properties`` and ``a2.properties`` both
  ``name=a``), or one file given twice, are refused at start (exit 78, Connect's "Connector a
  already exists", both files named) and by ``check-config``;
- item 14: ``connectd`` with no arguments prints the help and exits 2, a usage error.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import connectd
from support.kafka import free_port

ROOT = Path(__file__).resolve().parents[3]


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    worker = tmp_path / "worker.properties"
    # Nothing listens there: a run that got past the configuration would wait and exit 69.
    worker.write_text(
        f"bootstrap.servers=127.0.0.1:{free_port()}\nstate.dir={tmp_path / 'state'}\n"
        "startup.kafka.timeout.ms=1000\n"
    )
    a = tmp_path / "a.properties"
    a.write_text("name=a\nconnector.class=EchoSink\ntopics=t\n")
    a2 = tmp_path / "a2.properties"
    a2.write_text("name=a\nconnector.class=EchoSink\ntopics=other\n")
    return worker, a, a2


def test_no_arguments_is_a_usage_error_exit_2() -> None:
    result = connectd()
    assert result.returncode == 2, result
    assert "usage: connectd" in result.stderr
    assert "standalone" in result.stderr  # the help, not just the usage line


def test_two_files_naming_one_connector_are_refused_at_start(tmp_path: Path) -> None:
    worker, a, a2 = _files(tmp_path)
    result = connectd("standalone", worker, a, a2)
    print(result.stderr)
    assert result.returncode == 78, result
    assert (
        f"connectd: configuration error: {a2}: name: Connector a already exists: {a} names it too"
    ) in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "state").exists()  # refused before anything was touched

    twice = connectd("standalone", worker, a, a)
    assert twice.returncode == 78, twice
    assert f"{a}: name: Connector a already exists: the file is given twice" in twice.stderr


def test_check_config_names_both_files(tmp_path: Path) -> None:
    worker, a, a2 = _files(tmp_path)
    result = connectd("check-config", worker, a, a2)
    print(result.stdout)
    assert result.returncode == 78, result.stdout + result.stderr
    assert f"error: {a2}: name: Connector a already exists: {a} names it too" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("FAILED: 3 files checked, 1 error(s)")


def test_check_config_accepts_one_connector_written_in_two_forms(tmp_path: Path) -> None:
    """``examples/`` has the demo's connector as .json and .properties: the same connector,
    not two that conflict (``connectd standalone`` still takes only one of them)."""
    worker, a, _ = _files(tmp_path)
    as_json = tmp_path / "a.json"
    config = {"connector.class": "EchoSink", "topics": "t"}
    as_json.write_text(json.dumps({"name": "a", "config": {**config, "name": "a"}}))
    result = connectd("check-config", worker, a, as_json)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error:" not in result.stdout
