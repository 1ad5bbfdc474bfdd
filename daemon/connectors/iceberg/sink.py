"""IcebergSink: Kafka records into Apache Iceberg tables, each offset exactly once through the
table's snapshots (``jobs.py`` and ``table.py`` say how). The connector and task are the table
sinks' own holding a format reached through Iceberg's executor jobs (``tables.jobtables``)."""

from __future__ import annotations

from collections.abc import Mapping

from daemon.connectors.iceberg.existing import iceberg_owners
from daemon.connectors.iceberg.settings import CONFIG_DEF, IcebergSettings
from daemon.connectors.tables.connector import TableSinkConnector
from daemon.connectors.tables.jobtables import JobFormat, JobKind
from daemon.connectors.tables.task import TableSinkTask

#: Iceberg's jobs, session format and owners' reader.
ICEBERG = JobKind(
    format="iceberg", jobs="daemon.connectors.iceberg.jobs", key="table", owners=iceberg_owners
)


def iceberg_format(config: Mapping[str, str], kind: JobKind = ICEBERG) -> JobFormat:
    return JobFormat(kind, IcebergSettings.from_config(config))


class IcebergSinkTask(TableSinkTask):
    """One task of an IcebergSink."""

    table_format = iceberg_format


class IcebergSinkConnector(TableSinkConnector):
    """Writes records into Iceberg tables through Spark, exactly once (see ``jobs.py``)."""

    task_type = IcebergSinkTask
    CONFIG_DEF = CONFIG_DEF
    executor_formats = frozenset({"iceberg"})


# Their public home is the package (see its ``__init__``).
IcebergSinkConnector.__module__ = IcebergSinkTask.__module__ = "daemon.connectors.iceberg"
