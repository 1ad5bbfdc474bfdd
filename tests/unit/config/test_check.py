"""check-config: every problem printed, the kind of each file stated, 78 on errors, 0 otherwise."""

from __future__ import annotations

import io
from pathlib import Path

from daemon.config import check_main

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "config"
EXAMPLES = REPO / "examples"


def _run(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = check_main([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def test_stock_worker_files_pass_with_warnings() -> None:
    code, out, err = _run(
        FIXTURES / "connect-standalone.properties", FIXTURES / "connect-distributed.properties"
    )
    assert code == 0, out
    assert err == ""
    assert "connect-standalone.properties: checking as a standalone worker config" in out
    assert "connect-distributed.properties: checking as a distributed worker config" in out
    assert out.count("warning: ") == 11
    assert (
        out.count(
            "warning: " + str(FIXTURES / "connect-standalone.properties") + ":28: plugin.path: "
        )
        == 1
    )
    assert "error: " not in out
    assert out.splitlines()[-1] == "OK: 2 files checked, 0 error(s), 11 warning(s)"


def test_bad_connector_file_fails_with_all_three_problems() -> None:
    code, out, _ = _run(FIXTURES / "bad-connector.properties")
    assert code == 78
    path = FIXTURES / "bad-connector.properties"
    assert f"{path}: checking as a connector config (it sets name)" in out
    assert f"error: {path}:3: tasks.mx: unknown key 'tasks.mx', did you mean 'tasks.max'?" in out
    assert (
        f"error: {path}:5: errors.retry.delay.max.ms: 'soon' is not a number; "
        "expected milliseconds as an integer ≥ 0"
    ) in out
    assert f"error: {path}: connector.class: required key is missing" in out
    assert out.splitlines()[-1] == "FAILED: 1 file checked, 3 error(s), 0 warning(s)"


def test_every_example_is_clean() -> None:
    code, out, _ = _run(*sorted(EXAMPLES.iterdir()), REPO / "config.example.toml")
    assert code == 0, out
    assert "warning: " not in out and "error: " not in out


def test_every_bad_fixture_fails() -> None:
    for path in [
        *sorted(FIXTURES.glob("bad-*")),
        FIXTURES / "both-topics.properties",
        FIXTURES / "nested.json",
        FIXTURES / "name-mismatch.json",
    ]:
        code, out, _ = _run(path)
        assert code == 78, out
        assert "\nerror: " in out


def test_explicit_kinds_and_mode(tmp_path: Path) -> None:
    worker = tmp_path / "w.conf"
    worker.write_text("bootstrap.servers=localhost:9092\n")
    code, out, _ = _run("--mode", "distributed", "--worker", worker)
    assert code == 78
    assert f"{worker}: checking as a distributed worker config (as asked)" in out
    assert "group.id: required key is missing in distributed mode" in out
    code, out, _ = _run("--connector", EXAMPLES / "hang-sink.properties")
    assert code == 0 and "a connector config (as asked)" in out


def test_options_and_files_may_be_mixed() -> None:
    code, out, _ = _run(
        EXAMPLES / "worker.properties",
        "--connector",
        EXAMPLES / "hang-sink.json",
        FIXTURES / "both-topics.properties",
    )
    assert code == 78
    checked = {line.split(": checking")[0] for line in out.splitlines() if ": checking as" in line}
    assert checked == {
        str(EXAMPLES / "worker.properties"),
        str(FIXTURES / "both-topics.properties"),
        str(EXAMPLES / "hang-sink.json"),
    }
    assert out.splitlines()[-1] == "FAILED: 3 files checked, 1 error(s), 0 warning(s)"


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    code, out, _ = _run(
        tmp_path / "nope.properties", tmp_path / "nope.json", tmp_path / "nope.toml"
    )
    assert code == 78
    assert out.count("cannot read the file") == 3


def test_usage_errors_exit_64() -> None:
    code, out, err = _run()
    assert code == 64 and out == "" and "no file to check" in err
    code, _, err = _run("--mode", "sideways", "x.properties")
    assert code == 64 and "invalid choice" in err
    code, _, err = _run("--bogus")
    assert code == 64 and "usage:" in err


def test_executor_pool_start_is_checked_by_its_key(tmp_path: Path) -> None:
    """``executor.pool.start``: eager, on-demand or auto; anything else is refused (exit 78 from
    the real command) with the key, the value and what is expected; in TOML too."""
    from support.cli import connectd

    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:9092\nexecutor.pool.start=lazy\n")
    done = connectd("check-config", worker)
    assert done.returncode == 78, done.stdout + done.stderr
    assert (
        f"error: {worker}:2: executor.pool.start: 'lazy' is not one of eager, on-demand, auto;"
        " expected eager, on-demand or auto"
    ) in done.stdout
    for value in ("eager", "On-Demand", "auto"):
        worker.write_text(f"bootstrap.servers=127.0.0.1:9092\nexecutor.pool.start={value}\n")
        code, out, _ = _run(worker)
        assert code == 0, out
    toml = tmp_path / "worker.toml"
    toml.write_text('mode = "standalone"\n[worker]\n"executor.pool.start" = "never"\n')
    code, out, _ = _run(toml)
    assert code == 78 and "executor.pool.start: 'never' is not one of" in out, out


def test_executor_spark_session_is_checked_by_its_key_and_reaches_the_pool(tmp_path: Path) -> None:
    """``executor.spark.session``: on-demand or always, anything else refused (exit 78) naming
    the key, the value and what is expected; the value decides the pool's ``spark_on_demand``."""
    from support.cli import connectd

    from daemon.assembly import new_pool
    from daemon.config import load_worker

    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:9092\nexecutor.spark.session=lazy\n")
    done = connectd("check-config", worker)
    assert done.returncode == 78, done.stdout + done.stderr
    assert (
        f"error: {worker}:2: executor.spark.session: 'lazy' is not one of on-demand, always;"
        " expected on-demand or always"
    ) in done.stdout
    for value, on_demand in (("", True), ("on-demand", True), ("ALWAYS", False)):
        line = f"executor.spark.session={value}\n" if value else ""
        worker.write_text(f"bootstrap.servers=127.0.0.1:9092\n{line}")
        code, out, _ = _run(worker)
        assert code == 0, out
        pool = new_pool(load_worker(worker).config, None)
        assert pool.settings.spark_on_demand is on_demand
