"""DeltaSink: Kafka records into Delta Lake tables, each offset exactly once through Delta's
own transaction log (``jobs.py`` says how). The connector and task are the table sinks' own
holding a format reached through Delta's executor jobs (``tables.jobtables``)."""

from __future__ import annotations

from collections.abc import Mapping

from daemon.connectors.delta.existing import delta_owners
from daemon.connectors.delta.settings import CONFIG_DEF, DeltaSettings
from daemon.connectors.tables.connector import TableSinkConnector
from daemon.connectors.tables.jobtables import JobFormat, JobKind
from daemon.connectors.tables.task import TableSinkTask

#: Delta's jobs, session format and owners' reader.
DELTA = JobKind(
    format="delta", jobs="daemon.connectors.delta.jobs", key="path", owners=delta_owners
)


def delta_format(config: Mapping[str, str], kind: JobKind = DELTA) -> JobFormat:
    return JobFormat(kind, DeltaSettings.from_config(config))


class DeltaSinkTask(TableSinkTask):
    """One task of a DeltaSink."""

    table_format = delta_format


class DeltaSinkConnector(TableSinkConnector):
    """Writes records into Delta tables through Spark, exactly once (see ``jobs.py``)."""

    task_type = DeltaSinkTask
    CONFIG_DEF = CONFIG_DEF
    executor_formats = frozenset({"delta"})


# Their public home is the package (see its ``__init__``).
DeltaSinkConnector.__module__ = DeltaSinkTask.__module__ = "daemon.connectors.delta"
