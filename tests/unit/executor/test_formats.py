"""Table formats: the registry, the merged session settings, the jar checks, and the worker
settings that name them."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest
from support.jars import stand_in_jar

from daemon.config import parse_worker
from daemon.config.executors import TABLE_FORMATS
from daemon.errors import ConfigError, InvalidConfig
from daemon.executor import PoolSettings, formats
from daemon.executor.formats import NAMES, JarsMissing

DELTA_EXT = "io.delta.sql.DeltaSparkSessionExtension"
ICEBERG_EXT = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def test_the_worker_config_knows_the_same_formats() -> None:
    assert set(TABLE_FORMATS) == set(NAMES)


def test_pinned_jars() -> None:
    assert [a.file_name for a in formats.artifacts(["delta"])] == [
        "delta-spark_4.1_2.13-4.4.0.jar",
        "delta-storage-4.4.0.jar",
    ]
    assert [a.coordinates for a in formats.artifacts(["iceberg"])] == [
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
    ]


def test_default_jars_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert formats.default_jars_dir() == tmp_path / "connectd" / "jars"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert formats.default_jars_dir() == tmp_path / ".cache" / "connectd" / "jars"


def test_delta_conf() -> None:
    conf = formats.session_conf({"spark.ui.enabled": "false"}, ["delta"], Path("/j"))
    assert conf == {
        "spark.ui.enabled": "false",
        "spark.jars": "/j/delta-spark_4.1_2.13-4.4.0.jar,/j/delta-storage-4.4.0.jar",
        "spark.sql.extensions": DELTA_EXT,
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.databricks.delta.snapshotPartitions": "1",
    }


def test_both_formats_and_the_operators_lists_are_joined() -> None:
    operator = {
        "spark.jars": "/opt/mine.jar",
        "spark.sql.extensions": "my.Extension",
        "spark.databricks.delta.snapshotPartitions": "4",
    }
    conf = formats.session_conf(operator, ["iceberg", "delta"], Path("/j"))
    assert conf["spark.jars"].split(",") == [
        "/opt/mine.jar",
        "/j/delta-spark_4.1_2.13-4.4.0.jar",
        "/j/delta-storage-4.4.0.jar",
        "/j/iceberg-spark-runtime-4.1_2.13-1.12.0.jar",
    ]
    assert conf["spark.sql.extensions"] == f"my.Extension,{DELTA_EXT},{ICEBERG_EXT}"
    assert conf["spark.databricks.delta.snapshotPartitions"] == "4"  # the operator's wins
    assert operator["spark.jars"] == "/opt/mine.jar"  # not changed in place


def test_no_format_leaves_the_conf_alone() -> None:
    assert formats.session_conf({"spark.jars": " a.jar "}, []) == {"spark.jars": " a.jar "}


def test_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown table format 'hudi'; known formats: delta"):
        formats.session_conf({}, ["delta", "hudi"])
    with pytest.raises(ConfigError, match="iceberg"):
        formats.check_names(["Delta"])


def test_missing_jars_name_files_dir_and_fix(tmp_path: Path) -> None:
    stand_in_jar(tmp_path / "delta-storage-4.4.0.jar")
    assert formats.missing_jars(["delta"], tmp_path) == [
        tmp_path / "delta-spark_4.1_2.13-4.4.0.jar"
    ]
    with pytest.raises(JarsMissing) as caught:
        formats.require_jars(["delta", "iceberg"], tmp_path)
    message = str(caught.value)
    assert "delta-spark_4.1_2.13-4.4.0.jar" in message
    assert "iceberg-spark-runtime-4.1_2.13-1.12.0.jar" in message
    assert "delta-storage" not in message.split(":", 1)[1].split(";")[0]
    assert str(tmp_path) in message
    assert f"connectd fetch-jars delta iceberg --dir {tmp_path}" in message
    assert "make jars" in message
    assert not caught.value.retriable
    for jar in formats.jar_paths(["delta", "iceberg"], tmp_path):
        stand_in_jar(jar)
    formats.require_jars(["delta", "iceberg"], tmp_path)


def test_an_interrupted_copy_counts_as_missing_and_is_named_so(tmp_path: Path) -> None:
    for jar in formats.jar_paths(["delta"], tmp_path):
        stand_in_jar(jar)
    whole = tmp_path / "delta-storage-4.4.0.jar"
    with zipfile.ZipFile(whole, "w") as jar:
        jar.writestr("io/delta/storage/LogStore.class", b"\xca\xfe\xba\xbe" * 4096)
    assert formats.jar_problem(whole) is None
    whole.write_bytes(whole.read_bytes()[:-30])  # the copy stopped before the zip's end
    assert formats.jar_problem(whole) == "incomplete"
    assert formats.jar_problem(tmp_path / "nope.jar") == "missing"
    assert formats.missing_jars(["delta"], tmp_path) == [whole]
    with pytest.raises(JarsMissing, match=re.escape("delta-storage-4.4.0.jar (incomplete")):
        formats.require_jars(["delta"], tmp_path)


def test_pool_settings_load_formats(tmp_path: Path) -> None:
    settings = PoolSettings(formats=frozenset({"iceberg"}), jars_dir=tmp_path)
    assert settings.base_conf().get("spark.jars") is None
    conf = settings.session_conf()
    assert conf["spark.sql.extensions"] == ICEBERG_EXT
    both = settings.session_conf(["delta"])
    assert both["spark.sql.extensions"] == f"{DELTA_EXT},{ICEBERG_EXT}"
    assert both["spark.jars"].startswith(str(tmp_path / "delta-spark"))
    with pytest.raises(ConfigError, match="known formats"):
        PoolSettings(formats=frozenset({"hudi"}))


def test_worker_settings() -> None:
    config, _ = parse_worker({})
    assert config.executor_spark_formats == () and config.executor_jars_dir is None
    config, _ = parse_worker(
        {"executor.spark.formats": " Delta,iceberg,delta ", "executor.jars.dir": "/srv/jars"}
    )
    assert config.executor_spark_formats == ("delta", "iceberg")
    assert config.executor_jars_dir == Path("/srv/jars")
    config, _ = parse_worker({"executor.spark.formats": ["iceberg"]})  # a TOML array
    assert config.executor_spark_formats == ("iceberg",)


def test_worker_setting_with_an_unknown_format_names_the_key() -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_worker({"executor.spark.formats": "delta,hudi"}, file="w.properties")
    [problem] = [str(p) for p in caught.value.problems if p.is_error]
    assert "executor.spark.formats" in problem and "'hudi'" in problem
    assert "delta, iceberg" in problem
