"""Which connector owns each partition of an Iceberg table in a local Hadoop-catalog warehouse,
read from its metadata file in the daemon, without Spark: for ``SinkConnector.check_existing``
(in a thread, under a deadline).

A Hadoop catalog keeps ``<warehouse>/<namespace>/<table>/metadata/v<N>.metadata.json`` and
names the current one in ``version-hint.text``; the snapshots of ``main`` carry the owners
(``state.owners_of``). Other catalogs (REST, Hive) and warehouses on Hadoop filesystems are
not read here: the open job refuses the second connector at its first claim anyway.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from daemon.connectors.iceberg.state import owners_of
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.location import is_hadoop_uri, table_path
from daemon.connectors.tables.settings import Target


def iceberg_owners(target: Target) -> dict[TopicPartition, str] | None:
    """Per partition, the connector owning it in the table of ``target`` (``{}``: no table
    yet); ``None`` where the daemon cannot read it. Blocks on files."""
    catalog: Mapping[str, str] = target.kwargs.get("catalog") or {}
    warehouse = str(catalog.get("catalog.warehouse") or "")
    if catalog.get("catalog.type", "hadoop") != "hadoop" or not warehouse:
        return None
    if is_hadoop_uri(warehouse):
        return None
    meta = table_path(warehouse).joinpath(*str(target.kwargs["table"]).split(".")) / "metadata"
    doc = _current(meta)
    if doc is None:
        return {} if not meta.exists() else None
    owners = owners_of(_summaries(doc))
    return {TopicPartition(t, p): c for (t, p), c in owners.items()}


def _current(meta: Path) -> dict[str, Any] | None:
    try:
        version = (meta / "version-hint.text").read_text().strip()
        return json.loads((meta / f"v{version}.metadata.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None  # none yet, compressed metadata, or being replaced


def _summaries(doc: Mapping[str, Any]) -> Iterator[Mapping[str, str]]:
    """The summaries of ``main``'s snapshots, the head first."""
    snapshots = {s["snapshot-id"]: s for s in doc.get("snapshots", [])}
    head = (doc.get("refs", {}).get("main") or {}).get(
        "snapshot-id", doc.get("current-snapshot-id")
    )
    at = snapshots.get(head)
    while at is not None:
        yield at.get("summary", {})
        at = snapshots.get(at.get("parent-snapshot-id"))
