"""Issue 13, item 8 through real ``connectd`` processes: ``check-config`` reports a bad
``consumer.*`` / ``consumer.override.*`` value as an error naming the key and the expected type
(exit 78) and an unknown key as a warning with a "did you mean"; ``connectd standalone`` with
such a bad value exits 78 before it starts anything, as Connect refuses to start.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.cli import BARE_ENV
from support.cli import connectd as run_connectd

ROOT = Path(__file__).resolve().parents[3]


def connectd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_connectd(*args, cwd=cwd, env=BARE_ENV)


def _files(tmp_path: Path, worker_extra: str, connector_extra: str = "") -> tuple[Path, Path]:
    worker = tmp_path / "worker.properties"
    worker.write_text(
        "bootstrap.servers=127.0.0.1:1\n"
        f"state.dir={tmp_path / 'state'}\n"
        "listeners=http://127.0.0.1:0\n" + worker_extra
    )
    connector = tmp_path / "sink.properties"
    connector.write_text("name=sink\nconnector.class=EchoSink\ntopics=t\n" + connector_extra)
    return worker, connector


def test_check_config_reports_a_bad_value_and_a_typo(tmp_path: Path) -> None:
    worker, connector = _files(
        tmp_path,
        "consumer.max.poll.records=abc\nconsumer.max.poll.recordz=5\n",
        "consumer.override.isolation.level=serializable\n",
    )
    result = connectd("check-config", str(worker), str(connector), cwd=tmp_path)
    assert result.returncode == 78, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert (
        f"error: {worker}:4: consumer.max.poll.records: 'abc' is not a number;"
        " expected an integer ≥ 1" in lines
    )
    assert (
        f"warning: {worker}:5: consumer.max.poll.recordz: unknown key"
        " 'consumer.max.poll.recordz', did you mean 'consumer.max.poll.records'?" in lines
    )
    assert (
        f"error: {connector}:4: consumer.override.isolation.level: 'serializable' is not one of"
        " read_uncommitted, read_committed; expected read_uncommitted or read_committed" in lines
    )
    assert lines[-1] == "FAILED: 2 files checked, 2 error(s), 1 warning(s)"


def test_check_config_passes_a_typo_alone_with_its_warning(tmp_path: Path) -> None:
    worker, _ = _files(tmp_path, "consumer.max.poll.recordz=5\nproducer.ackz=all\n")
    result = connectd("check-config", str(worker), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "did you mean 'consumer.max.poll.records'?" in result.stdout
    assert "did you mean 'producer.acks'?" in result.stdout
    assert result.stdout.splitlines()[-1] == "OK: 1 file checked, 0 error(s), 2 warning(s)"


def test_standalone_refuses_to_start_with_a_bad_consumer_value(tmp_path: Path) -> None:
    worker, connector = _files(tmp_path, "consumer.max.poll.records=abc\n")
    result = connectd("standalone", str(worker), str(connector), cwd=tmp_path)
    assert result.returncode == 78, result.stderr
    assert "configuration error" in result.stderr
    assert "consumer.max.poll.records: 'abc' is not a number; expected an integer ≥ 1" in (
        result.stderr
    )
    assert not (tmp_path / "state").exists()  # refused before anything started


def test_standalone_refuses_a_connector_file_with_a_bad_override(tmp_path: Path) -> None:
    worker, connector = _files(tmp_path, "", "consumer.override.max.poll.records=0\n")
    result = connectd("standalone", str(worker), str(connector), cwd=tmp_path)
    assert result.returncode == 78, result.stderr
    assert "consumer.override.max.poll.records: '0' is less than 1" in result.stderr
