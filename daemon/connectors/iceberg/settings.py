"""IcebergSink's settings: the table, its catalog, plus the table sinks' shared keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.config.definitions import REQUIRED, ConfigType, Importance, one_of
from daemon.config.problems import Problem, error
from daemon.connectors.iceberg.catalog import PREFIX, TYPES, resolve
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


def table_name(template: str, topic: str) -> str:
    """``template`` with ``${topic}`` replaced by ``topic``, its dots as ``_`` (a dot
    separates namespaces in an Iceberg identifier)."""
    return topic_table(template, topic.replace(".", "_"))


def catalog_settings(config: Mapping[str, str]) -> dict[str, str]:
    """The connector's ``catalog.*`` keys, as the jobs take them."""
    return {k: v for k, v in config.items() if k.startswith(PREFIX)}


class IcebergConfigDef(TableConfigDef):
    """Also the catalog's settings against each other (``catalog.resolve``): a hadoop catalog
    without ``catalog.warehouse``, a rest one without ``catalog.uri`` ..."""

    def cross_check(self, values: dict[str, Any], config: Mapping[str, str]) -> list[Problem]:
        problems = super().cross_check(values, config)
        settings = {**catalog_settings(config), "table": table_name(values["table"], "topic")}
        _, found = resolve(settings)
        return problems + [error(key, message) for key, message in found]


CONFIG_DEF = (
    IcebergConfigDef()
    .define(
        "table",
        ConfigType.STRING,
        REQUIRED,
        Importance.HIGH,
        f"The Iceberg table as namespace.name (created on the first commit). {TOPIC} in it is "
        "replaced by each record's topic (dots as _): one table per topic.",
    )
    .define(
        "catalog.type",
        ConfigType.STRING,
        "hadoop",
        Importance.HIGH,
        "hadoop: tables in a directory (catalog.warehouse) on a filesystem with atomic "
        "rename (local, HDFS; not S3). rest: a REST catalog (catalog.uri). hive: a Hive "
        "metastore (catalog.uri, thrift://...).",
        validator=one_of(*TYPES),
    )
    .define(
        "catalog.warehouse",
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "The warehouse: a directory (hadoop catalog; required there) or what the catalog "
        "takes as its warehouse. Any other catalog.<key> is handed to the Iceberg catalog.",
        location=True,
    )
    .define(
        "catalog.uri",
        ConfigType.STRING,
        "",
        Importance.MEDIUM,
        "The catalog server: the REST catalog's URL (rest; required there) or the metastore's "
        "thrift:// address (hive).",
    )
)
shared_keys(CONFIG_DEF)
schema_key(CONFIG_DEF, default=False)
compaction_keys(CONFIG_DEF)


@dataclass(frozen=True)
class IcebergSettings:
    """An IcebergSink configuration, parsed and checked."""

    table_template: str
    table: TableSettings
    compaction: Compaction
    catalog: Mapping[str, str] = field(default_factory=dict)

    @property
    def template(self) -> str:
        return self.table_template

    def target(self, topic: str) -> Target:
        topic = self.table.routes.route(topic)
        check_topic(topic)
        name = table_name(self.table_template, topic)
        return Target(f"iceberg:{name}", {"catalog": dict(self.catalog), "table": name})

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> IcebergSettings:
        """``InvalidConfig`` listing every problem if the configuration is not usable."""
        values = CONFIG_DEF.parse(config)
        return cls(
            table_template=values["table"].strip(),
            table=TableSettings.parse(values, config).hidden_transforms(),
            compaction=Compaction.parse(values),
            catalog=catalog_settings(config),
        )
