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


def test_another_spark_lines_builds_by_name(tmp_path: Path) -> None:
    """``--spark-line`` names the builds of a line other than the installed pyspark's (for a
    venv of that line that shares the jars directory); all of them present, Maven is not run."""
    jars = tmp_path / "jars"
    jars.mkdir()
    names = [
        "delta-spark_2.12-3.3.3.jar",
        "delta-storage-3.3.3.jar",
        "iceberg-spark-runtime-3.5_2.12-1.12.0.jar",
    ]
    for name in names:
        stand_in_jar(jars / name)
    result = connectd("fetch-jars", "--spark-line", "3.5", "--dir", jars)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"present  {jars}/{name}" for name in names]


def test_a_spark_line_connectd_does_not_support_is_a_configuration_error(tmp_path: Path) -> None:
    result = connectd("fetch-jars", "--spark-line", "3.4", "--dir", tmp_path / "jars")
    assert result.returncode == 78, result.stderr
    assert "--spark-line 3.4: expected one of 3.5, 4.0, 4.1" in result.stderr
    assert not (tmp_path / "jars").exists()
