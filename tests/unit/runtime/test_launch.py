"""``connectd standalone`` refuses a connector the registry cannot validate before it starts
anything: exit code 78 (configuration error), no process started."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import procs

from daemon.cli import EX_CONFIG, main


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)


def test_an_unknown_connector_class_is_a_config_error(
    tmp_path: Path, restore_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(
        f"bootstrap.servers=127.0.0.1:1\nstate.dir={tmp_path / 'state'}\n"
        "listeners=http://127.0.0.1:0\n"
    )
    connector = tmp_path / "c.properties"
    connector.write_text("name=c\nconnector.class=NoSuchSink\ntopics=t\n")
    before = set(procs.live_descendants())
    assert main(["standalone", str(worker), str(connector)]) == EX_CONFIG
    assert "connector.class" in capsys.readouterr().err
    assert set(procs.live_descendants()) <= before
