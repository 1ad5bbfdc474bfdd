"""DeltaSink: Kafka records into Delta Lake tables, each offset exactly once through Delta's
own transaction log (``jobs.py`` says how; the task is the table sinks' shared one)."""

from __future__ import annotations

from collections.abc import Mapping

from daemon.connectors.delta.settings import CONFIG_DEF, DeltaSettings
from daemon.connectors.tables.connector import TableSinkConnector
from daemon.connectors.tables.task import TableSinkTask


class DeltaSinkTask(TableSinkTask):
    """One task of a DeltaSink."""

    format = "delta"
    jobs = "daemon.connectors.delta.jobs"

    def load_settings(self, config: Mapping[str, str]) -> DeltaSettings:
        return DeltaSettings.from_config(config)


class DeltaSinkConnector(TableSinkConnector):
    """Writes records into Delta tables through Spark, exactly once (see ``jobs.py``)."""

    task_type = DeltaSinkTask
    CONFIG_DEF = CONFIG_DEF


# Their public home is the package (see its ``__init__``).
DeltaSinkConnector.__module__ = DeltaSinkTask.__module__ = "daemon.connectors.delta"
