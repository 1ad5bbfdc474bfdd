"""Iceberg tables from a test, never through the daemon: the offsets a connector committed,
read from the table's own metadata files (progress while a test runs); a session pool whose
executors load Iceberg (Spark's own reader, and the jobs run directly)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.connectors.iceberg.state import KEY_PREFIX
from support.spark import ThreadedPool


def metadata(table_dir: Path) -> dict[str, Any] | None:
    """The table's current ``vN.metadata.json`` (Hadoop catalog layout), or None."""
    meta = table_dir / "metadata"
    try:
        version = (meta / "version-hint.text").read_text().strip()
        return json.loads((meta / f"v{version}.metadata.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None  # not there yet, or being replaced


def rows_with_pyiceberg(table_dir: Path, columns: list[str]) -> Any:
    """The columns ``columns`` of the table's current snapshot as a pyarrow table, read by
    pyiceberg from its metadata files: a reader that is neither Spark nor connectd."""
    from pyiceberg.table import StaticTable

    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    location = table_dir / "metadata" / f"v{version}.metadata.json"
    table = StaticTable.from_metadata(f"file://{location}")
    return table.scan(selected_fields=tuple(columns)).to_arrow()


def committed_offsets(table_dir: Path, connector: str) -> dict[tuple[str, int], int | None]:
    """Next offset per partition in the newest snapshot of main carrying ``connector``'s
    state (compaction snapshots carry none: walk back to one that does)."""
    meta = metadata(table_dir)
    if meta is None or meta.get("current-snapshot-id") in (None, -1):
        return {}
    snapshots = {s["snapshot-id"]: s for s in meta["snapshots"]}
    at = snapshots.get(meta["current-snapshot-id"])
    while at is not None:
        state = at.get("summary", {}).get(KEY_PREFIX + connector)
        if state:
            return {(t, int(p)): o for t, p, o, _ in json.loads(state)["partitions"]}
        at = snapshots.get(at.get("parent-snapshot-id"))
    return {}


def committed(table_dir: Path, connector: str) -> int:
    return sum(o or 0 for o in committed_offsets(table_dir, connector).values())


def spark_count(
    spark: Any, batch: Any, *, catalog: dict[str, str], table: str, where: str = ""
) -> dict[str, int]:
    """In an executor: rows and distinct (topic, partition, offset) of an Iceberg table, and
    with ``where`` (Spark SQL) the rows it holds for."""
    from daemon.connectors.iceberg.catalog import declare

    cat = declare(spark, {**catalog, "table": table})
    df = spark.table(cat.table)
    out = {
        "rows": df.count(),
        "distinct": df.select("kafka_topic", "kafka_partition", "kafka_offset").distinct().count(),
    }
    if where:
        out["where"] = df.filter(where).count()
    return out


@pytest.fixture(scope="session")
def iceberg_pool(formats_pool: ThreadedPool) -> ThreadedPool:
    """Executors whose sessions load Iceberg (the session's formats pool)."""
    return formats_pool


def spark_typed(
    spark: Any, batch: Any, *, catalog: dict[str, str], table: str, select: list[str]
) -> dict[str, Any]:
    """In an executor: an Iceberg table's Spark schema (``simpleString``) and the ``select``
    expressions (Spark SQL) of its rows, each cast to a string, ordered by the first one."""
    from daemon.connectors.iceberg.catalog import declare

    cat = declare(spark, {**catalog, "table": table})
    df = spark.table(cat.table)
    rows = df.selectExpr(*(f"cast({e} as string)" for e in select)).collect()
    return {
        "schema": df.schema.simpleString(),
        "rows": sorted((list(r) for r in rows), key=lambda r: int(r[0])),
    }
