"""Which connector owns a partition of a Delta table: the stamps of connectd's application
transactions (``delta.txns``), and the same read from a local table's log files without Spark
(``delta.existing``: JSON commits after a Parquet checkpoint), as ``check_existing`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from daemon.connectors.delta import txns
from daemon.connectors.delta.existing import delta_owners
from daemon.connectors.delta.sink import DeltaSinkConnector
from daemon.connectors.delta.txns import Txn
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.settings import Target


def test_app_ids_of_any_connector_split_from_the_right() -> None:
    assert txns.split_app_id("connectd/a/b/orders/3") == ("a/b", "orders", 3)
    assert txns.split_app_id("connectd/c/orders/x") is None
    assert txns.split_app_id("spark-streaming/q/1") is None
    assert txns.parse_app_id("connectd/c/orders/3", "c") == ("orders", 3)
    assert txns.parse_app_id("connectd/c/orders/3", "d") is None


def test_the_newest_stamp_owns_and_a_new_stamp_is_newer_than_all() -> None:
    held = [
        Txn("connectd/old/t/0", 5 << 40, 1000),
        Txn("connectd/new/t/0", 2 << 40, 2000),  # a smaller epoch: epochs are per connector
        Txn("connectd/old/t/1", 5 << 40, 1500),
        Txn("other/t/0", 1, 9000),
        Txn(txns.claim_app("t", 0), 7, 9000),  # every connector's serialisation point
    ]
    assert txns.owners(held) == {("t", 0): "new", ("t", 1): "old"}
    assert txns.owners(held, [("t", 1)]) == {("t", 1): "old"}
    assert txns.stamp(held, [("t", 0)], now_ms=100) == 2001  # a clock behind: still later
    assert txns.stamp(held, [("t", 0)], now_ms=5000) == 5000


def _commit(log: Path, version: int, *actions: dict[str, object]) -> None:
    log.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(a) for a in actions]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _txn(app: str, version: int, updated: int) -> dict[str, object]:
    return {"txn": {"appId": app, "version": version, "lastUpdated": updated}}


def test_owners_are_read_from_the_checkpoint_and_the_commits_after_it(tmp_path: Path) -> None:
    table = tmp_path / "t"
    log = table / "_delta_log"
    target = Target(str(table), {"path": str(table)})
    assert delta_owners(target) == {}  # no table yet
    _commit(log, 0, {"commitInfo": {}}, _txn("connectd/a/orders/0", 1 << 40, 100))
    checkpoint = pa.table(
        {
            "txn": [
                {"appId": "connectd/a/orders/0", "version": 1 << 40, "lastUpdated": 100},
                {"appId": "connectd/a/orders/1", "version": 1 << 40, "lastUpdated": 100},
                None,  # another action's row
            ]
        }
    )
    pq.write_table(checkpoint, log / f"{1:020d}.checkpoint.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": 3}))
    _commit(log, 2, _txn("connectd/b/orders/0", 1 << 40, 200), _txn("connectd/a/orders/0", 1, 100))
    assert delta_owners(target) == {
        TopicPartition("orders", 0): "b",
        TopicPartition("orders", 1): "a",
    }
    # A catalog table or a Hadoop URI: not read here (the open job refuses there).
    assert delta_owners(Target("table:x", {"path": "", "table": "x"})) is None
    assert delta_owners(Target("hdfs://nn/t", {"path": "hdfs://nn/t"})) is None

    connector = DeltaSinkConnector()
    config = {"topics": "orders", "path": str(table)}
    problems = connector.check_existing("c", config)
    assert [p.key for p in problems] == ["path", "path"]
    assert "orders-1" in str(problems[0]) and "'a'" in str(problems[0])
    assert "orders-0" in str(problems[1]) and "takeover=b" in str(problems[1])
    assert connector.check_existing("b", {**config, "takeover": "a"}) == []
    assert connector.check_existing("c", {"topics": "other", "path": str(table)}) == []
