"""ParquetSink connectors and tasks the runtime and Spark-cluster tests share: a task whose
first incarnation writes with another function, the sink config they use, and checks of
what landed in the table."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import ClassVar

from daemon.connectors.api import SinkTaskContext
from daemon.connectors.parquet import ParquetSinkTask
from daemon.storage.commitlog import META
from support.daemon import wait_until
from support.tables import coordinates


class FirstIncarnationTask(ParquetSinkTask):
    """A ParquetSink task whose connector's first incarnation (counted by connector name)
    writes with ``first_write`` instead of ParquetSink's write; later ones write normally."""

    first_write: ClassVar[str]
    starts: ClassVar[dict[str, int]]

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        name = context.task_id.connector
        self.starts[name] = self.starts.get(name, 0) + 1
        if self.starts[name] == 1:
            self.write_function = self.first_write
        await super().start(config, context)


def parquet_sink(topic: str, table: Path, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "1",
        "path": str(table),
        "flush.max.records": "50",
        "flush.interval.ms": "300",
        **extra,
    }


async def exactly_once_rows(table: Path, expected: Collection[tuple[int, int]]) -> None:
    """The table's rows are ``expected`` (partition, offset) pairs, each exactly once.

    The commit record is the commit point; its files are moved into place just after. So the
    rows are read once as many are visible as expected (or after 30 s): duplicates, missing
    rows and strangers all fail the comparison.
    """
    await wait_until(lambda: len(coordinates(table)) >= len(expected), 30, "the files in place")
    landed = coordinates(table)
    assert len(landed) == len(expected), f"{len(landed)} rows, {len(expected)} expected"
    assert len(set(landed)) == len(landed), "a record landed twice"
    assert set(landed) == set(expected)


def staged_files(table: Path) -> list[str]:
    """Files in the table's staging dirs (writes not committed, or not cleaned up)."""
    staging = table / META / "staging"
    if not staging.is_dir():
        return []
    return [str(p) for p in staging.rglob("*") if p.is_file()]
