"""DeltaSink's settings: where the Delta table is, plus the table sinks' shared keys."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.config.definitions import ConfigType, Importance
from daemon.config.problems import Problem, error
from daemon.connectors.tables.location import check_path, table_location
from daemon.connectors.tables.settings import (
    TOPIC,
    Compaction,
    TableConfigDef,
    TableSettings,
    Target,
    check_topic,
    compaction_keys,
    schema_key,
    shared_keys,
    topic_table,
)

_TABLE = re.compile(r"^([A-Za-z0-9_\-]+\.)?[A-Za-z0-9_\-]+$")


def _check_table(value: Any) -> None:
    name = topic_table(str(value), "topic")
    if name and not _TABLE.match(name):
        raise ValueError(f"{value!r} is not [database.]name (letters, digits, _ and -)")


class DeltaConfigDef(TableConfigDef):
    """Also: exactly one of ``path`` and ``table``."""

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        problems = super().cross_check(values, config)
        given = [k for k in ("path", "table") if values[k].strip()]
        if len(given) != 1:
            problems.append(
                error(
                    "path",
                    "both path and table are set" if given else "neither path nor table is set",
                    "the table's directory (path) or a catalog table's name (table)",
                )
            )
        return problems


CONFIG_DEF = (
    DeltaConfigDef()
    .define(
        "path",
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "The Delta table's directory: an absolute local path, a file:/// URI or a Hadoop "
        f"filesystem URI (hdfs://, s3a:// ...). {TOPIC} in it is replaced by each record's "
        "topic: one table per topic. With a Spark cluster master, a local path only if "
        "executor.spark.local.paths.shared=true. Give path or table.",
        validator=check_path,
        location=True,
    )
    .define(
        "table",
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "A table of the executors' Spark catalog ([database.]name; created on the first "
        "commit in the catalog's warehouse) instead of path: needs a catalog every executor "
        f"shares, e.g. a Hive metastore. {TOPIC} in it is replaced by each record's topic, "
        "dots as _.",
        validator=_check_table,
    )
)
shared_keys(CONFIG_DEF)
schema_key(CONFIG_DEF, default=False)
compaction_keys(CONFIG_DEF)


@dataclass(frozen=True)
class DeltaSettings:
    """A DeltaSink configuration, parsed and checked."""

    path: str  # may hold ${topic}
    table: TableSettings
    compaction: Compaction
    catalog_table: str = ""  # ``table``; may hold ${topic}

    @property
    def template(self) -> str:
        return self.catalog_table or self.path

    def target(self, topic: str) -> Target:
        topic = self.table.routes.route(topic)
        check_topic(topic)
        if self.catalog_table:
            name = topic_table(self.catalog_table, topic.replace(".", "_"))
            return Target(f"table:{name}", {"path": "", "table": name})
        path = table_location(topic_table(self.path, topic))
        return Target(path, {"path": path})

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> DeltaSettings:
        """``InvalidConfig`` listing every problem if the configuration is not usable."""
        values = CONFIG_DEF.parse(config)
        return cls(
            path=values["path"].strip(),
            table=TableSettings.parse(values, config),
            compaction=Compaction.parse(values),
            catalog_table=values["table"].strip(),
        )
