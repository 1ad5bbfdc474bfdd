"""DeltaSink: Kafka records into Delta Lake tables, each offset exactly once.

``sink`` (the connector and its task), ``settings``, ``jobs`` (the executor side: every read
and commit of a Delta table). Nothing is imported here: executor processes import ``jobs``
without the task side.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DeltaSinkConnector", "DeltaSinkTask"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from daemon.connectors.delta import sink

        return getattr(sink, name)
    raise AttributeError(f"module 'daemon.connectors.delta' has no attribute {name!r}")
