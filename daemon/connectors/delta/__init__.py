"""DeltaSink: Kafka records into Delta Lake tables, each offset exactly once.

``sink`` (the connector and its task: the table sinks' own, holding Delta's format),
``settings``, ``existing`` (a local table's owners read without Spark, for the pre-creation
check), and the executor side: ``jobs`` (every read and commit of a Delta table), ``commit``
(the fence and the commit, one Delta transaction each), ``txns`` (what connectd's application
transactions say), ``log`` (reading the table through Delta's log). Nothing is imported here:
executor processes import ``jobs`` without the task side.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeltaSinkConnector", "DeltaSinkTask"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from daemon.connectors.delta import sink

        return getattr(sink, name)
    raise AttributeError(f"module 'daemon.connectors.delta' has no attribute {name!r}")
