"""Which connector owns a partition of an Iceberg table (``state``: ``connectd.owners``, or, on
a table written before it existed, derived from the connectors' states), the refusal of a
partition another connector owns and the takeover, and the same read from a local Hadoop
catalog's metadata file without Spark (``iceberg.existing``), as ``check_existing`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.connectors.iceberg import state
from daemon.connectors.iceberg.existing import iceberg_owners
from daemon.connectors.iceberg.sink import IcebergSinkConnector
from daemon.connectors.iceberg.state import Entry
from daemon.connectors.records import TopicPartition
from daemon.storage.logstate import PartitionsOwned


def test_owners_come_from_the_newest_map_or_else_from_the_states() -> None:
    older = {state.key("a"): state.encode({("t", 0): Entry(5, 1)}, epoch=1, task=0)}
    newer = {
        state.key("b"): state.encode(
            {("t", 0): Entry(9, 1), ("t", 1): Entry(3, 1)}, epoch=1, task=0
        )
    }
    # No owners map yet: each partition's owner is the connector whose state is newest.
    assert state.owners_of([newer, older]) == {("t", 0): "b", ("t", 1): "b"}
    assert state.owners_of([{"total-data-files": "4"}, older]) == {("t", 0): "a"}
    mapped = {state.OWNERS: state.encode_owners({("t", 0): "a"})}
    assert state.owners_of([{}, mapped, newer]) == {("t", 0): "a"}
    assert state.decode_owners(state.encode_owners({("x.y", 3): "c/d"})) == {("x.y", 3): "c/d"}


def test_a_partition_another_connector_owns_is_refused_unless_taken_over() -> None:
    owners = {("t", 0): "old", ("t", 1): "me"}
    with pytest.raises(PartitionsOwned, match=r"connector .old. owns it.*takeover=old"):
        state.claim(owners, "me", [["t", 0], ["t", 1]], "db.t")
    assert state.claim(owners, "me", [["t", 0], ["t", 2]], "db.t", ("old",)) == {("t", 0): "old"}
    # Taken over: the fence continues from the old owner's offset.
    fenced = state.fence({("t", 0): Entry(None, 1)}, 4, [["t", 0]], "db.t", {("t", 0): 42})
    assert fenced == {("t", 0): Entry(42, 4)}


def _metadata(warehouse: Path, table: str, snapshots: list[dict[str, object]]) -> None:
    meta = warehouse.joinpath(*table.split(".")) / "metadata"
    meta.mkdir(parents=True)
    doc = {
        "current-snapshot-id": snapshots[-1]["snapshot-id"],
        "refs": {"main": {"snapshot-id": snapshots[-1]["snapshot-id"], "type": "branch"}},
        "snapshots": snapshots,
    }
    (meta / "v3.metadata.json").write_text(json.dumps(doc))
    (meta / "version-hint.text").write_text("3")


def test_owners_are_read_from_a_hadoop_catalogs_metadata(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    owners = state.encode_owners({("orders", 0): "first", ("other", 0): "first"})
    _metadata(
        warehouse,
        "db.orders",
        [
            {"snapshot-id": 1, "summary": {state.OWNERS: owners}},
            {"snapshot-id": 2, "parent-snapshot-id": 1, "summary": {"operation": "replace"}},
        ],
    )
    config = {
        "topics": "orders",
        "table": "db.orders",
        "catalog.type": "hadoop",
        "catalog.warehouse": str(warehouse),
    }
    connector = IcebergSinkConnector()
    target = connector.task_type().make_format(config).settings.target("orders")
    found = iceberg_owners(target)
    assert found == {TopicPartition("orders", 0): "first", TopicPartition("other", 0): "first"}
    (problem,) = connector.check_existing("second", config)
    assert problem.key == "table" and "orders-0" in str(problem) and "'first'" in str(problem)
    assert connector.check_existing("second", {**config, "takeover": "first"}) == []
    assert connector.check_existing("first", config) == []
    missing = connector.task_type().make_format({**config, "table": "db.none"}).settings
    assert iceberg_owners(missing.target("orders")) == {}
    rest = {**config, "catalog.type": "rest", "catalog.uri": "http://x"}
    assert connector.check_existing("second", rest) == []  # not readable here
