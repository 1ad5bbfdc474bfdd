"""ParquetSink: Kafka records into a file table (Parquet, ORC, JSON, CSV), each offset once.

``sink`` (the connector and its task), ``settings`` (its settings), ``buffer`` (what is not
written yet), ``table`` (where the commit log runs), ``write`` (the Spark write, in an
executor), ``jobs`` (executor jobs for tables on Hadoop filesystems). Nothing is imported
here: executor processes import ``write`` and ``jobs`` without the task side.
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
