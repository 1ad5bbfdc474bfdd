"""Spark lines: which pyspark versions connectd runs with, and the jars each line's formats use."""

from __future__ import annotations

import re
from importlib import metadata

import pytest

from daemon import sparklines as lines
from daemon.errors import ConfigError
from daemon.executor import formats
from daemon.sparkcheck import master_ui_urls
from daemon.sparklines import LINES, UnsupportedSpark


@pytest.mark.parametrize(
    ("version", "line"),
    [("3.5.9", "3.5"), ("4.0.5", "4.0"), ("4.1.4", "4.1"), ("4.1.0.dev1", "4.1")],
)
def test_supported_versions_map_to_their_line(version: str, line: str) -> None:
    assert lines.for_version(version).name == line


@pytest.mark.parametrize("version", ["3.4.4", "4.2.1", "2.4.8", "not-a-version"])
def test_other_versions_are_refused_naming_them_and_the_supported_lines(version: str) -> None:
    with pytest.raises(UnsupportedSpark) as info:
        lines.for_version(version)
    message = str(info.value)
    assert version in message
    if version[0].isdigit():
        assert "3.5.x, 4.0.x, 4.1.x" in message and "connectd[spark41]" in message
    assert isinstance(info.value, ConfigError)  # the CLI's exit 78


def test_the_installed_pyspark_is_of_a_supported_line() -> None:
    import pyspark

    assert lines.current().name == lines.line_of(pyspark.__version__)
    assert metadata.version("pyspark") == pyspark.__version__


def test_every_line_has_builds_of_both_formats_for_its_scala() -> None:
    for line in LINES.values():
        delta = formats.artifacts(["delta"], line)
        [iceberg] = formats.artifacts(["iceberg"], line)
        assert [a.artifact.split("_")[-1] for a in delta[:1]] == [line.scala]
        assert delta[1].artifact == "delta-storage" and delta[1].version == delta[0].version
        assert iceberg.artifact == f"iceberg-spark-runtime-{line.name}_{line.scala}"
        assert re.fullmatch(r"\d+\.\d+\.\d+", iceberg.version)
        assert line.extra == f"spark{line.name.replace('.', '')}"
    # Delta's builds name the Spark line they target from Delta 4.1 on: the unsuffixed
    # delta-spark_2.13 follows the newest Spark and breaks older lines.
    assert formats.artifacts(["delta"], LINES["4.0"])[0].artifact == "delta-spark_4.0_2.13"
    assert formats.artifacts(["delta"], LINES["4.1"])[0].artifact == "delta-spark_4.1_2.13"


def test_the_extras_in_pyproject_pin_each_line() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    for line in LINES.values():
        major, minor = line.name.split(".")
        nxt = f"{major}.{int(minor) + 1}"
        assert f'{line.extra} = ["pyspark>={line.name}.0,<{nxt}"]' in text


def test_a_masters_ui_is_port_8080_of_each_host_unless_named() -> None:
    assert master_ui_urls("spark://m1:7077,m2:7078") == [
        "http://m1:8080/",
        "http://m2:8080/",
    ]
    assert master_ui_urls("spark://m1:7077", ["https://ui.example/"]) == ["https://ui.example/"]
    assert master_ui_urls("spark://[::1]:7077") == ["http://[::1]:8080/"]
    assert master_ui_urls("local[*]") == []
    assert master_ui_urls("yarn") == []
    assert master_ui_urls("k8s://https://api.example:6443") == []


def test_a_master_of_another_line_is_a_mismatch_naming_both_versions() -> None:
    import pyspark

    mine = lines.line_of(pyspark.__version__)
    other = "3.5.9" if mine != "3.5" else "4.1.4"
    error = lines.mismatch("spark://m:7077", other, "http://m:8080/")
    assert error is not None and not error.retriable
    message = str(error)
    assert f"runs Spark {other} (its web UI http://m:8080/ says so)" in message
    assert f"pyspark {pyspark.__version__} (Spark {mine})" in message
    assert f"connectd[spark{other[0]}{other[2]}]" in message
    assert lines.mismatch("spark://m:7077", f"{mine}.0", "http://m:8080/") is None
    unsupported = str(lines.mismatch("spark://m:7077", "3.4.1", "http://m:8080/"))
    assert "a line connectd supports (3.5.x, 4.0.x, 4.1.x)" in unsupported


def test_a_ui_that_cannot_be_read_gives_no_version_and_says_why() -> None:
    from support.kafka import free_port

    url = f"http://127.0.0.1:{free_port()}/"
    version, where, failures = lines.read_master_version([url], timeout=2.0)
    assert (version, where) == ("", "")
    assert len(failures) == 1 and failures[0].startswith(url)
