"""Class-data-sharing archive planning (no JVM is started here)."""

from __future__ import annotations

from pathlib import Path

from daemon.executor import cds


def test_finds_the_jdk_spark_runs_on() -> None:
    java = cds.find_java()
    assert java is not None
    assert java.major >= 17 and (java.home / "bin" / "java").exists()


def test_archive_name_depends_on_the_settings_that_shape_it(tmp_path: Path) -> None:
    a = cds.plan(tmp_path, {"spark.driver.memory": "512m"})
    b = cds.plan(tmp_path, {"spark.driver.memory": "512m", "spark.sql.x": "1"})
    c = cds.plan(tmp_path, {"spark.driver.memory": "1g"})
    assert a is not None and b is not None and c is not None
    assert a.archive == b.archive != c.archive
    assert a.archive.parent == tmp_path and a.archive.suffix == ".jsa"


def test_options_follow_the_archive_state(tmp_path: Path) -> None:
    java17 = cds.JavaRuntime(tmp_path, "17.0.15", 17)
    plan = cds.CdsPlan(java17, tmp_path / "spark.jsa")
    assert plan.executor_options() == ""
    out = plan.builder_output()
    assert f"-XX:ArchiveClassesAtExit={out}" in plan.builder_options(out)
    out.write_bytes(b"archive")
    assert plan.install(out) and not out.exists()
    assert f"-XX:SharedArchiveFile={plan.archive}" in plan.executor_options()
    empty = plan.builder_output()
    empty.write_bytes(b"")
    assert not plan.install(empty) and not empty.exists()
    java21 = cds.CdsPlan(cds.JavaRuntime(tmp_path, "21.0.1", 21), tmp_path / "x.jsa")
    assert java21.auto and "-XX:+AutoCreateSharedArchive" in java21.executor_options()


def test_only_one_builder_at_a_time(tmp_path: Path) -> None:
    plan = cds.CdsPlan(cds.JavaRuntime(tmp_path, "17", 17), tmp_path / "a" / "spark.jsa")
    with plan.build_lock() as first, plan.build_lock() as second:
        assert first and not second
    with plan.build_lock() as again:
        assert again
