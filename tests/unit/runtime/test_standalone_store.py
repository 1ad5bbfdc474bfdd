"""The standalone state file: connector configs and target states survive a restart."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from daemon.errors import StorageCorrupt
from daemon.runtime.model import TargetState
from daemon.storage.standalone import StandaloneStore, StoredConnector


async def test_round_trip_across_instances(tmp_path: Path) -> None:
    store = StandaloneStore(tmp_path / "state")
    assert await store.load() == {}
    config = {"name": "a", "connector.class": "X", "password": "${env:SECRET}"}
    await store.save("a", StoredConnector(config))
    await store.save("b", StoredConnector({"name": "b"}, TargetState.PAUSED))
    await store.save("a", StoredConnector(config, TargetState.STOPPED))
    await store.delete("b")

    again = await StandaloneStore(tmp_path / "state").load()
    assert again == {"a": StoredConnector(config, TargetState.STOPPED)}
    raw = json.loads(store.path.read_text())
    assert raw["connectors"]["a"]["config"]["password"] == "${env:SECRET}"  # never resolved
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert [p.name for p in store.path.parent.iterdir()] == ["connectors.json"]  # no temp left


async def test_delete_before_load_keeps_the_others(tmp_path: Path) -> None:
    await StandaloneStore(tmp_path).save("a", StoredConnector({"name": "a"}))
    store = StandaloneStore(tmp_path)
    await store.delete("missing")
    assert list(await store.load()) == ["a"]


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"format": 2, "connectors": {}}', b'{"format": 1, "connectors": {"a": {}}}'],
)
async def test_a_damaged_file_is_reported_with_its_path(tmp_path: Path, content: bytes) -> None:
    store = StandaloneStore(tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(content)
    with pytest.raises(StorageCorrupt, match=r"connectors\.json"):
        await store.load()
