"""Which connector owns each partition of a local Delta table, read from its log's files in the
daemon, without Spark: for ``SinkConnector.check_existing`` (in a thread, under a deadline).

A Delta table's state is its latest checkpoint (``_last_checkpoint`` names it: one Parquet
file, or several parts) plus the JSON commits after it; connectd's application transactions
(``txn`` actions: app id, version, ``lastUpdated``) say who owns a partition (``txns.py``).
Where this cannot be read as such (a table on a Hadoop filesystem, a catalog table, a
checkpoint of another kind), nothing is said: the open job refuses the second connector at its
first claim anyway.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daemon.connectors.delta.txns import Txn, owners
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.location import is_hadoop_uri, table_path
from daemon.connectors.tables.settings import Target


def delta_owners(target: Target) -> dict[TopicPartition, str] | None:
    """Per partition, the connector owning it in the Delta table of ``target`` (``{}``: no
    table yet); ``None`` where the daemon cannot read the table. Blocks on files."""
    path = str(target.kwargs.get("path") or "")
    if not path or is_hadoop_uri(path):
        return None
    txns = transactions(table_path(path) / "_delta_log")
    if txns is None:
        return None
    return {TopicPartition(t, p): c for (t, p), c in owners(txns).items()}


def transactions(log: Path) -> list[Txn] | None:
    """The table's application transactions; ``None`` if its checkpoint is of a kind not
    read here."""
    found: dict[str, Txn] = {}
    if not log.is_dir():
        return []
    since = -1
    last = log / "_last_checkpoint"
    if last.is_file():
        checkpoint = json.loads(last.read_text())
        since = int(checkpoint["version"])
        parts = checkpoint.get("parts")
        stem = f"{since:020d}.checkpoint"
        files = (
            [log / f"{stem}.{i:010d}.{int(parts):010d}.parquet" for i in range(1, int(parts) + 1)]
            if parts
            else [log / f"{stem}.parquet"]
        )
        if not all(f.is_file() for f in files):
            return None  # a V2 (UUID-named) checkpoint, or one being replaced
        import pyarrow.parquet as pq

        for f in files:
            for row in pq.read_table(f, columns=["txn"]).column("txn").to_pylist():
                if row is not None:
                    _take(found, row)
    for commit in sorted(log.glob("[0-9]" * 20 + ".json")):
        if int(commit.stem) <= since:
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "txn" in action:
                _take(found, action["txn"])
    return list(found.values())


def _take(found: dict[str, Txn], txn: dict[str, Any]) -> None:
    app = str(txn["appId"])
    found[app] = Txn(app, int(txn["version"]), int(txn.get("lastUpdated") or 0))
