"""Standalone state, fast (issue 13, items 2 and 3; the daemon processes are in
tests/integration/runtime/test_standalone_state.py): origins in the state file (and a file
from before them), the command line as the truth for file-defined connectors, the state.dir
lock."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from support.daemon import NoExecutors

from daemon.config import parse_worker
from daemon.errors import ConfigError
from daemon.runtime.model import TargetState
from daemon.runtime.standalone import StandaloneHerder
from daemon.storage.standalone import REST, Origin, StandaloneStore, StoredConnector
from daemon.storage.statelock import StateDirLock, StateDirLocked

SINK = "support.daemon:RecordingSink"


def _worker(tmp_path: Path) -> StandaloneHerder:
    config = parse_worker(
        {"bootstrap.servers": "127.0.0.1:1", "state.dir": str(tmp_path), "listeners": "http://h:9"}
    ).config
    return StandaloneHerder(config, NoExecutors(), store=StandaloneStore(tmp_path))


def _config(name: str) -> dict[str, str]:
    return {"name": name, "connector.class": SINK, "topics": "t", "tasks.max": "1"}


async def test_origins_round_trip_and_an_older_file_reads_as_unknown(tmp_path: Path) -> None:
    store = StandaloneStore(tmp_path)
    await store.save("f", StoredConnector({"name": "f"}, origin=Origin("/etc/connectd/f.json")))
    await store.save("r", StoredConnector({"name": "r"}, TargetState.PAUSED))
    raw = json.loads(store.path.read_text())["connectors"]
    assert raw["f"]["origin"] == "file" and raw["f"]["file"] == "/etc/connectd/f.json"
    assert raw["r"]["origin"] == "rest" and "file" not in raw["r"]
    again = await StandaloneStore(tmp_path).load()
    assert again["f"].origin == Origin("/etc/connectd/f.json")
    assert again["r"] == StoredConnector({"name": "r"}, TargetState.PAUSED, REST)

    # Written by a connectd that did not record origins.
    old = {"format": 1, "connectors": {"x": {"config": {"name": "x"}, "target": "STOPPED"}}}
    store.path.write_text(json.dumps(old))
    assert await StandaloneStore(tmp_path).load() == {
        "x": StoredConnector({"name": "x"}, TargetState.STOPPED, None)
    }


async def test_the_command_line_is_the_truth_for_file_defined_connectors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connectd.worker")
    first = _worker(tmp_path)
    await first.start(
        [_config("a"), _config("b")], [Origin("/cfg/a.properties"), Origin("/cfg/b.properties")]
    )
    await first.create_connector("c", _config("c"), TargetState.STOPPED)
    await first.stop()
    # An entry from an older state file (no origin): kept, as nothing says where it came from.
    store = StandaloneStore(tmp_path)
    await store.save("old", StoredConnector(_config("old"), TargetState.STOPPED, None))

    caplog.clear()
    again = _worker(tmp_path)
    await again.start([_config("a")], [Origin("/elsewhere/a.properties")])
    assert again.connector_names() == ["a", "c", "old"]
    assert again.origin("a") == Origin("/elsewhere/a.properties")
    assert again.origin("c") == REST and again.origin("old") is None
    text = caplog.text
    assert "Connector b (from file /cfg/b.properties) is not on the command line" in text
    assert "Connector c restored from the state file" in text and "the REST API" in text
    assert "Connector old restored from the state file" in text
    assert "origin not recorded" in text and "DELETE /connectors/old" in text
    assert "Connector c is STOPPED, as it was before the restart" in text
    assert "PUT /connectors/c/resume" in text
    stored = await StandaloneStore(tmp_path).load()
    assert sorted(stored) == ["a", "c", "old"]
    assert stored["a"].origin == Origin("/elsewhere/a.properties")

    # A REST change keeps the origin; a file given for a REST-created name takes it over.
    await again.pause_connector("a")
    assert (await StandaloneStore(tmp_path).load())["a"].origin == Origin("/elsewhere/a.properties")
    await again.put_connector_config("c", _config("c"), origin=Origin("/cfg/c.properties"))
    assert (await StandaloneStore(tmp_path).load())["c"].origin == Origin("/cfg/c.properties")
    await again.stop()

    third = _worker(tmp_path)
    await third.start([_config("a")], [Origin("/elsewhere/a.properties")])
    assert third.connector_names() == ["a", "old"]  # c is a file's now, not on the command line
    await third.stop()


def test_the_state_dir_lock_names_the_holder_and_is_free_after_release(tmp_path: Path) -> None:
    first = StateDirLock(tmp_path / "state")
    first.acquire()
    assert (tmp_path / "state" / "connectd.lock").read_text() == f"{os.getpid()}\n"
    second = StateDirLock(tmp_path / "state")
    with pytest.raises(StateDirLocked, match=rf"state\.dir {tmp_path}/state .*pid {os.getpid()}"):
        second.acquire()
    first.release()
    second.acquire()  # free once released (and when the holder's process ends, by the kernel)
    second.release()
    (tmp_path / "a-file").write_text("")  # a state.dir below a regular file: even root fails
    with pytest.raises(ConfigError, match=r"state\.dir .*a-file/state cannot be used"):
        StateDirLock(tmp_path / "a-file" / "state").acquire()
