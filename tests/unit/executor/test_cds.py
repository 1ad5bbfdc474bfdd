"""Class-data-sharing archive planning (no JVM is started here)."""

from __future__ import annotations

import mmap
import os
import subprocess
import time
from pathlib import Path

from daemon.executor import PoolSettings, cds
from daemon.executor.launch import start_message


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


def test_the_archive_name_follows_the_jars_times_as_the_jvm_checks_them(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    jar = jars / "spark-core.jar"
    jar.write_bytes(b"jar")
    before = cds.jars_fingerprint("4.1.4", jars)
    assert cds.jars_fingerprint("4.1.4", jars) == before
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert cds.jars_fingerprint("4.1.4", jars) != before  # a reinstall: same names and sizes


def test_reads_whether_a_process_maps_a_file(tmp_path: Path) -> None:
    maps = Path("/proc/self/maps").read_text().splitlines()
    mapped_file = next(line.split()[-1] for line in maps if line.split()[-1].startswith("/"))
    assert cds.mapped(os.getpid(), mapped_file) is True
    assert cds.mapped(os.getpid(), str(tmp_path / "not-mapped.jsa")) is False
    assert cds.mapped(_dead_pid(), mapped_file) is None
    # Mapped, then replaced on disk (a rebuilt archive installed meanwhile): still mapped.
    replaced = tmp_path / "replaced.jsa"
    replaced.write_bytes(b"\0" * 4096)
    with replaced.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ):
        os.replace(_new_file(tmp_path), replaced)
        assert cds.mapped(os.getpid(), str(replaced)) is True


def test_tidy_removes_dead_builders_output_and_long_unused_archives(tmp_path: Path) -> None:
    plan = cds.CdsPlan(cds.JavaRuntime(tmp_path, "17", 17), tmp_path / "spark-jdk17-mine.jsa")
    plan.archive.write_bytes(b"mine")
    month_ago = time.time() - (cds.UNUSED_DAYS + 1) * 86400
    os.utime(plan.archive, (month_ago, month_ago))
    dead = tmp_path / f".spark-jdk17-mine.jsa.{_dead_pid()}.tmp"
    live = tmp_path / f".spark-jdk17-mine.jsa.{os.getpid()}.tmp"
    old = tmp_path / "spark-jdk17-old.jsa"
    recent = tmp_path / "spark-jdk17-recent.jsa"
    other = tmp_path / "notes.txt"
    for path in (dead, live, old, old.with_suffix(".lock"), recent, other):
        path.write_bytes(b"x")
    os.utime(old, (month_ago, month_ago))
    os.utime(other, (month_ago, month_ago))
    plan.tidy()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([plan.archive.name, live.name, recent.name, other.name])
    assert plan.archive.stat().st_mtime > time.time() - 60  # marked used now


def _new_file(directory: Path) -> Path:
    path = directory / "new.jsa"
    path.write_bytes(b"new")
    return path


def _dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_rejected_archive_is_replaced_once_then_given_up() -> None:
    r = cds.Rejections()
    assert r.rejected(1.0, can_build=True) == cds.Rejections.REPLACE
    assert r.rejected(2.0, can_build=True) == cds.Rejections.NOTHING  # already being replaced
    r.built(10.0)
    assert r.rejected(5.0, can_build=True) == cds.Rejections.NOTHING  # given the old archive
    assert r.rejected(11.0, can_build=True) == cds.Rejections.GIVE_UP  # the new one too
    assert cds.Rejections().rejected(1.0, can_build=False) == cds.Rejections.GIVE_UP
    unrelated = cds.Rejections()
    unrelated.built(3.0)  # a build nobody asked to replace anything
    assert unrelated.rejected(4.0, can_build=True) == cds.Rejections.REPLACE


def test_the_start_message_names_the_archive_the_jvm_options_give(tmp_path: Path) -> None:
    plan = cds.CdsPlan(cds.JavaRuntime(tmp_path, "17", 17), tmp_path / "spark.jsa")
    plan.archive.write_bytes(b"archive")
    settings = PoolSettings()
    given = start_message(settings, tmp_path, plan.executor_options(), archive_in=plan.archive)
    assert (
        f"-XX:SharedArchiveFile={given.archive_in}" in given.conf["spark.driver.extraJavaOptions"]
    )
    assert start_message(settings, tmp_path, "").archive_in is None


def test_the_archive_builder_never_registers_on_a_cluster(tmp_path: Path) -> None:
    """A builder is not a writer: with a cluster master its session is still local, so it takes
    no core there and shows no second application named like an executor."""
    settings = PoolSettings(spark_master="spark://127.0.0.1:7077")
    builder = start_message(settings, tmp_path, "", archive_out=tmp_path / "out.jsa")
    assert builder.master == "local[1]"
    assert start_message(settings, tmp_path, "").master == "spark://127.0.0.1:7077"
