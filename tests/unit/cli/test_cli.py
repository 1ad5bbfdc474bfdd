"""The `connectd` command as a user runs it: a real subprocess, real files, real exit codes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli import connectd

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "config"


def test_version_and_help() -> None:
    from daemon import __version__

    version = connectd("--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"connectd {__version__}"
    helped = connectd("--help")
    assert helped.returncode == 0
    for command in ("standalone", "distributed", "run", "check-config"):
        assert command in helped.stdout


def test_no_command_is_a_usage_error() -> None:
    result = connectd()
    assert result.returncode == 2
    assert "usage: connectd" in result.stderr


def test_stock_connect_worker_files_pass_with_a_warning_per_jvm_only_key() -> None:
    result = connectd(
        "check-config",
        str(FIXTURES / "connect-standalone.properties"),
        str(FIXTURES / "connect-distributed.properties"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning:")]
    for key in ("plugin.path", "internal.key.converter", "internal.value.converter"):
        per_file = [w for w in warnings if f": {key}:" in w]
        assert len(per_file) == 2, (key, per_file)  # once in each file
    assert "error:" not in result.stdout


def test_bad_connector_file_names_every_problem_and_exits_78() -> None:
    result = connectd("check-config", str(FIXTURES / "bad-connector.properties"))
    assert result.returncode == 78
    errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 3, result.stdout
    text = "\n".join(errors)
    assert "tasks.mx" in text and "did you mean 'tasks.max'" in text
    assert "errors.retry.delay.max.ms" in text and "'soon' is not a number" in text
    assert "connector.class" in text and "missing" in text


def test_standalone_with_a_bad_connector_file_exits_78_before_starting(tmp_path: Path) -> None:
    result = connectd(
        "standalone",
        str(ROOT / "examples" / "worker.properties"),
        str(FIXTURES / "bad-connector.properties"),
    )
    assert result.returncode == 78
    assert "configuration error" in result.stderr
    assert "tasks.mx" in result.stderr and "connector.class" in result.stderr


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    result = connectd("check-config", str(tmp_path / "nope.properties"))
    assert result.returncode == 78
    assert "nope.properties" in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["standalone", "distributed"])
def test_java_missing_exits_69_with_what_to_install(command: str, tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(
        "bootstrap.servers=127.0.0.1:9092\n"
        f"state.dir={tmp_path}\n"
        "group.id=g\nconfig.storage.topic=c\noffset.storage.topic=o\nstatus.storage.topic=s\n"
    )
    env = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)}
    result = connectd(command, str(worker), env=env)
    assert result.returncode == 69, result.stderr
    assert "openjdk-17" in result.stderr


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "value.converter=io.confluent.connect.avro.AvroConverter",
            "schema.registry.url is required",
        ),
        ("value.converter=no.such.module:Converter", "cannot be loaded"),
        ("key.converter=daemon.connectors.records:RawBatch", "is not a daemon.connectors"),
    ],
)
def test_a_worker_converter_that_cannot_be_made_exits_78_at_start(
    tmp_path: Path, setting: str, message: str
) -> None:
    """The worker's own converters are configured at start as a task would configure them."""
    worker = tmp_path / "worker.properties"
    base = (ROOT / "examples" / "worker.properties").read_text()
    worker.write_text(f"{base}\n{setting}\nstate.dir={tmp_path / 'state'}\n")
    result = connectd("standalone", str(worker))
    assert result.returncode == 78, result.stderr
    assert "configuration error" in result.stderr and message in result.stderr


@pytest.mark.parametrize("version", ["3.4.4", "4.2.0"])
def test_a_pyspark_of_no_supported_line_exits_78_naming_it(tmp_path: Path, version: str) -> None:
    """The installed pyspark's metadata names a line connectd does not support: refused at start,
    before a broker or Java is looked for, naming the version and the lines that work."""
    site = tmp_path / "site"
    dist = site / f"pyspark-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pyspark\nVersion: {version}\n")
    worker = tmp_path / "worker.properties"
    base = (ROOT / "examples" / "worker.properties").read_text()
    worker.write_text(f"{base}\nstate.dir={tmp_path / 'state'}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    result = connectd("standalone", str(worker), env=env)
    assert result.returncode == 78, result.stderr
    assert f"pyspark {version} is installed" in result.stderr
    assert "Spark lines 3.5.x, 4.0.x, 4.1.x" in result.stderr
