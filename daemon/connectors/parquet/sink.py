"""ParquetSink: Kafka records into file tables (Parquet, ORC, JSON or CSV) written by Spark, each
Kafka offset exactly once. The connector and task are the table sinks' own (``tables.task``,
``tables.connector``) holding ParquetSink's format (``parquet.format`` says how a table keeps
exactly-once) and settings (``parquet.settings``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from daemon import __version__
from daemon.connectors.parquet.format import ParquetFormat
from daemon.connectors.parquet.settings import CONFIG_DEF, ParquetSettings
from daemon.connectors.parquet.write import WRITE_STAGED, spark_writes
from daemon.connectors.tables.connector import TableSinkConnector
from daemon.connectors.tables.task import TableSinkTask

__all__ = ["CONFIG_DEF", "ParquetSinkConnector", "ParquetSinkTask", "__version__"]


class ParquetSinkTask(TableSinkTask):
    """One task of a ParquetSink. Tests' hooks: ``write_function`` names another executor
    function with ``write_staged``'s signature (to hang a write on purpose); ``crash_after``
    a point of the next flush job of a Hadoop table at which its executor SIGKILLs itself."""

    write_function: ClassVar[str] = WRITE_STAGED

    def crash_after(self) -> str | None:
        return None

    def make_format(self, config: Mapping[str, str]) -> ParquetFormat:
        return ParquetFormat(
            config, write_function=self.write_function, crash_after=self.crash_after
        )


class ParquetSinkConnector(TableSinkConnector):
    """Writes records into file tables through Spark, exactly once (``parquet.format``)."""

    task_type = ParquetSinkTask
    CONFIG_DEF = CONFIG_DEF

    @classmethod
    def executor_spark(cls, config: Mapping[str, str]) -> bool:
        """Spark from the start unless pyarrow writes this table's files (a local path,
        format parquet, a codec pyarrow writes as Spark does, ``write.engine`` auto or arrow):
        then a batch with a column only Spark writes as Spark would asks for it itself."""
        if getattr(cls.task_type, "write_function", WRITE_STAGED) != WRITE_STAGED:
            return True  # a test's write function: it may use its session
        try:
            settings = ParquetSettings.from_config(config)
        except Exception:
            return True  # refused where it runs, saying why
        return spark_writes(
            settings.engine, None, settings.format, (), settings.compression, settings.path
        )


# Their public home is the package (see its ``__init__``).
ParquetSinkConnector.__module__ = ParquetSinkTask.__module__ = "daemon.connectors.parquet"
