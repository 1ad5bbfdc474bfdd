"""IcebergSink: Kafka records into an Apache Iceberg table, each offset once.

``sink`` (the connector and its task: the table sinks' own, holding Iceberg's format),
``settings``, ``existing`` (a local Hadoop-catalog table's owners read without Spark, for the
pre-creation check), ``catalog`` (the ``catalog.*`` settings as a Spark catalog), ``state``
(the committed offsets, epochs and owners kept in the table's snapshot summaries), ``table``
(the compare-and-set publish), ``jobs`` (the executor jobs: open, commit, skip, offsets) and
``upkeep`` (its job). Nothing is imported here: executor processes import ``jobs`` without the
task side.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IcebergSinkConnector", "IcebergSinkTask"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from daemon.connectors.iceberg import sink

        return getattr(sink, name)
    raise AttributeError(f"module 'daemon.connectors.iceberg' has no attribute {name!r}")
