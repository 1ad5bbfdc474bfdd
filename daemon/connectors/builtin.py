"""The built-in connectors' aliases, registered into ``default_registry`` on import.

Cheap: only names are registered; a connector's module is imported when its alias is first
resolved (``ConnectorRegistry`` imports lazily), so importing this module costs nothing.
``daemon.connectors`` imports it, so every user of the registry sees the built-ins.
"""

from __future__ import annotations

from daemon.connectors.api import ConnectorRegistry, default_registry

#: Alias → ``"package.module:Class"``. ``resolve`` also accepts ``<alias>Connector``.
BUILTIN_ALIASES: dict[str, str] = {
    "ParquetSink": "daemon.connectors.parquet:ParquetSinkConnector",
    "HangSink": "daemon.connectors.testing:HangSinkConnector",
    "EchoSink": "daemon.connectors.testing:EchoSinkConnector",
    "DeltaSink": "daemon.connectors.delta:DeltaSinkConnector",
    "IcebergSink": "daemon.connectors.iceberg:IcebergSinkConnector",
}


def register_builtins(registry: ConnectorRegistry = default_registry) -> None:
    """Register the built-in aliases into ``registry`` (idempotent)."""
    for alias, target in BUILTIN_ALIASES.items():
        registry.register_alias(alias, target)


register_builtins()
