"""DeltaSink's settings: where the Delta table is, plus the table sinks' shared keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.config.definitions import REQUIRED, ConfigType, Importance
from daemon.connectors.parquet.place import scheme_problem
from daemon.connectors.parquet.settings import table_location
from daemon.connectors.tables.settings import (
    TOPIC,
    TableConfigDef,
    TableSettings,
    Target,
    check_topic,
    table_config_def,
    topic_table,
)


def _check_path(value: Any) -> None:
    text = topic_table(str(value), "topic")
    problem = scheme_problem(text)
    if problem is not None:
        raise ValueError(problem)
    table_location(text)


CONFIG_DEF = table_config_def(
    TableConfigDef().define(
        "path",
        ConfigType.STRING,
        REQUIRED,
        Importance.HIGH,
        "The Delta table's directory: an absolute local path, a file:/// URI or a Hadoop "
        f"filesystem URI (hdfs://, s3a:// ...). {TOPIC} in it is replaced by each record's "
        "topic: one table per topic. With a Spark cluster master, a local path only if "
        "executor.spark.local.paths.shared=true.",
        validator=_check_path,
        location=True,
    )
)


@dataclass(frozen=True)
class DeltaSettings:
    """A DeltaSink configuration, parsed and checked."""

    path: str  # may hold ${topic}
    table: TableSettings

    def target(self, topic: str) -> Target:
        check_topic(topic)
        path = table_location(topic_table(self.path, topic))
        return Target(path, {"path": path})

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> DeltaSettings:
        """``InvalidConfig`` listing every problem if the configuration is not usable."""
        values = CONFIG_DEF.parse(config)
        return cls(
            path=values["path"].strip(), table=TableSettings(**TableSettings.shared(values, config))
        )
