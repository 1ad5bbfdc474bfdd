"""IcebergSink: Kafka records into Apache Iceberg tables, each offset exactly once through the
table's snapshots (``jobs.py`` and ``table.py`` say how; the task is the table sinks' shared
one)."""

from __future__ import annotations

from collections.abc import Mapping

from daemon.connectors.iceberg.settings import CONFIG_DEF, IcebergSettings
from daemon.connectors.tables.connector import TableSinkConnector
from daemon.connectors.tables.task import TableSinkTask


class IcebergSinkTask(TableSinkTask):
    """One task of an IcebergSink."""

    format = "iceberg"
    jobs = "daemon.connectors.iceberg.jobs"

    def load_settings(self, config: Mapping[str, str]) -> IcebergSettings:
        return IcebergSettings.from_config(config)


class IcebergSinkConnector(TableSinkConnector):
    """Writes records into Iceberg tables through Spark, exactly once (see ``jobs.py``)."""

    task_type = IcebergSinkTask
    CONFIG_DEF = CONFIG_DEF


# Their public home is the package (see its ``__init__``).
IcebergSinkConnector.__module__ = IcebergSinkTask.__module__ = "daemon.connectors.iceberg"
