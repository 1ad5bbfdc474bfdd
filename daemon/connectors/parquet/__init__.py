"""ParquetSink: Kafka records into file tables (Parquet, ORC, JSON, CSV), each offset once.

``sink`` (the connector and its task: the table sinks' own, holding ParquetSink's format),
``settings`` (its settings), ``place`` (whether a ``path`` can hold a table), ``format`` (the
table format: a table's handle), ``table`` (where a table's commit log runs: in the daemon,
or in executor jobs), ``upkeep`` (the commit log's clean-up), ``columns`` (the table's columns
read back from its files), ``write`` (the Spark write, in an executor), ``jobs`` (executor
jobs for tables on Hadoop filesystems). Nothing is imported here: executor processes import
``write`` and ``jobs`` without the task side.
"""

from __future__ import annotations

from typing import Any

# The connector's public name stays ``daemon.connectors.parquet.ParquetSinkConnector`` (what
# ``GET /connector-plugins`` shows and what a ``connector.class`` may name); the class is
# imported on first use.
__all__ = ["ParquetSinkConnector", "ParquetSinkTask"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from daemon.connectors.parquet import sink

        return getattr(sink, name)
    raise AttributeError(f"module 'daemon.connectors.parquet' has no attribute {name!r}")
