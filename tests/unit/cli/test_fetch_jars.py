"""`connectd fetch-jars`: the table formats' jars from Maven Central (here from the local Maven
cache, ~/.m2, where `make jars` put them), and its exit codes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.cli import ROOT, connectd
from support.jars import stand_in_jar

from daemon.executor import formats


def test_an_unknown_format_is_a_configuration_error(tmp_path: Path) -> None:
    result = connectd("fetch-jars", "delta", "hudi", "--dir", tmp_path / "jars")
    assert result.returncode == 78, result.stderr
    assert "unknown table format 'hudi'; known formats: delta, iceberg" in result.stderr
    assert not (tmp_path / "jars").exists()


def test_without_maven_it_says_so_and_exits_69(tmp_path: Path) -> None:
    result = connectd(
        "fetch-jars", "--dir", tmp_path, env={"PATH": str(tmp_path), "PYTHONPATH": str(ROOT)}
    )
    assert result.returncode == 69, result.stderr
    assert "Maven (mvn) is needed" in result.stderr


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    assert connectd("fetch-jars", "--timeout", "soon").returncode == 2
    assert connectd("fetch-jars", "--dir").returncode == 2


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven (make check-java says so)")
def test_fetches_the_missing_jars_and_skips_present_ones(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    # Present (a stand-in): skipped, so Maven runs once, for the small delta-storage jar.
    stand_in_jar(jars / "delta-spark_4.1_2.13-4.4.0.jar")
    stand_in = (jars / "delta-spark_4.1_2.13-4.4.0.jar").read_bytes()
    result = connectd("fetch-jars", "delta", "--dir", jars)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"present  {jars}/delta-spark_4.1_2.13-4.4.0.jar",
        f"fetched  {jars}/delta-storage-4.4.0.jar  (io.delta:delta-storage:4.4.0)",
    ]
    assert formats.missing_jars(["delta"], jars) == []
    assert (jars / "delta-spark_4.1_2.13-4.4.0.jar").read_bytes() == stand_in
    assert (jars / "delta-storage-4.4.0.jar").stat().st_size > 100_000
    assert sorted(p.name for p in jars.iterdir()) == [
        "delta-spark_4.1_2.13-4.4.0.jar",
        "delta-storage-4.4.0.jar",
    ]  # no staging directory left


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs Maven (make check-java says so)")
def test_an_interrupted_copy_is_fetched_again(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    stand_in_jar(jars / "delta-spark_4.1_2.13-4.4.0.jar")
    storage = jars / "delta-storage-4.4.0.jar"
    storage.write_bytes(b"PK\x03\x04 the first bytes of a jar, and no more")
    result = connectd("fetch-jars", "delta", "--dir", jars)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[1:] == [
        f"incomplete  {storage}: fetching it again",
        f"fetched  {storage}  (io.delta:delta-storage:4.4.0)",
    ]
    assert formats.jar_problem(storage) is None and storage.stat().st_size > 100_000
