"""Issue 13 item 7: a ParquetSink ``path`` that cannot hold a table is refused up front.

A regular file, a read-only directory (a read-only tmpfs when the test may mount one, else a
directory without write permission), a directory below a read-only one, and ``gs://bucket/x``
(no atomic exclusive create there: docs/connectors.md refuses it by name). On a real daemon
process: ``POST /connectors`` answers 400 with Connect's body naming ``path`` and why,
``/config/validate`` files the error under ``path``, nothing is created; ``check-config``
fails (exit 78) naming the file, ``path`` and why, and so does the daemon started with such a
file. Before the fix each was created (201) and failed later with ``FileExistsError``,
``OSError: [Errno 30]`` or a Py4J trace.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.daemon import ROOT, ProcessFactory, worker_properties, write_properties

pytestmark = pytest.mark.integration


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory no table can be written to: a read-only tmpfs if this user may mount one
    (root), else a directory without write permission."""
    where = tmp_path / "ro"
    where.mkdir()
    mounted = False
    if os.geteuid() == 0:
        mount = ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)]
        mounted = subprocess.run(mount, capture_output=True, check=False).returncode == 0
    if not mounted:
        where.chmod(0o555)
    try:
        yield where
    finally:
        if mounted:
            subprocess.run(["umount", str(where)], check=True)
        else:
            where.chmod(0o755)


def cases(tmp_path: Path, read_only: Path) -> dict[str, tuple[str, str]]:
    """name → (path, what the error must say)."""
    regular = tmp_path / "regular-file"
    regular.write_text("not a table\n")
    ro_why = "read-only filesystem" if os.geteuid() == 0 else "not writable"
    return {
        "file": (str(regular), f"{regular} exists and is not a directory"),
        "ro": (str(read_only), ro_why),
        "below-ro": (str(read_only / "a" / "table"), f"its parent {read_only} is "),
        "gs": ("gs://bucket/x", "gs:// offers no atomic exclusive create"),
    }


def sink(path: str) -> dict[str, str]:
    return {"connector.class": "ParquetSink", "topics": "orders", "path": path}


def test_bad_table_paths_are_refused_at_create_validate_check_and_start(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path, read_only_dir: Path
) -> None:
    bad = cases(tmp_path, read_only_dir)
    # Nothing is written: the accepted connector's executors would start only to be stopped.
    worker = worker_properties(kafka_bootstrap, tmp_path / "state", executor_pool_start="on-demand")
    daemon = daemon_process(worker)

    for name, (path, why) in bad.items():
        code, answer = daemon.rest("POST", "/connectors", {"name": name, "config": sink(path)})
        assert code == 400, (name, answer)
        assert answer["error_code"] == 400
        message = answer["message"]
        assert message.startswith("Connector configuration is invalid"), message
        assert "path: " in message and why in message, (name, message)

        code, infos = daemon.rest(
            "PUT", "/connector-plugins/ParquetSink/config/validate", {"name": name, **sink(path)}
        )
        assert code == 200 and infos["error_count"] == 1, (name, infos)
        (value,) = [c["value"] for c in infos["configs"] if c["value"]["name"] == "path"]
        assert any(why in e for e in value["errors"]), (name, value)
    assert daemon.rest("GET", "/connectors") == (200, [])

    # A good path next to them is accepted (the checks do not refuse what works).
    good = sink(str(tmp_path / "tables" / "orders"))
    assert daemon.rest("POST", "/connectors", {"name": "good", "config": good})[0] == 201

    # check-config: one error per file, naming it, path and why; exit 78.
    worker_file = write_properties(tmp_path / "worker.properties", worker)
    files = {
        name: write_properties(tmp_path / f"{name}.properties", {"name": name, **sink(path)})
        for name, (path, _) in bad.items()
    }
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon",
            "check-config",
            str(worker_file),
            *map(str, files.values()),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    out = checked.stdout + checked.stderr
    assert checked.returncode == 78, out
    for name, (_, why) in bad.items():
        line = next((x for x in out.splitlines() if str(files[name]) in x and "path:" in x), "")
        assert why in line, (name, out)

    # The daemon started with such a file refuses to start, naming it (a configuration error).
    started = daemon_process(worker, [sink(bad["file"][0]) | {"name": "file"}], wait=False)
    with contextlib.suppress(subprocess.TimeoutExpired):
        started.wait(120)
    assert started.proc is not None and started.proc.returncode == 78, started.log()
    assert bad["file"][1] in started.log()
