"""IcebergSink's catalog settings → Spark catalog conf, and the problems check-config reports."""

from __future__ import annotations

import pytest

from daemon.connectors.iceberg.catalog import declare, resolve
from daemon.errors import ConfigError


def test_hadoop_is_the_default_and_needs_a_warehouse() -> None:
    catalog, problems = resolve({"table": "db.t"})
    assert catalog is None
    assert [key for key, _ in problems] == ["catalog.warehouse"]


def test_rest_needs_a_uri_and_unknown_types_are_named() -> None:
    assert [k for k, _ in resolve({"catalog.type": "rest", "table": "db.t"})[1]] == ["catalog.uri"]
    problems = resolve({"catalog.type": "glue", "table": "db.t"})[1]
    assert problems[0][0] == "catalog.type" and "glue" in problems[0][1]


@pytest.mark.parametrize("table", ["", "t", "db.", "db.t t", ".t"])
def test_table_must_be_namespace_dot_name(table: str) -> None:
    problems = resolve({"catalog.warehouse": "/wh", "table": table})[1]
    assert [k for k, _ in problems] == ["table"]


def test_conf_carries_type_warehouse_and_passthrough_keys() -> None:
    catalog, problems = resolve(
        {"catalog.warehouse": "/wh", "catalog.io-impl": "x.Y", "table": "a.b.t", "other": "z"}
    )
    assert not problems and catalog is not None
    base = f"spark.sql.catalog.{catalog.name}"
    assert catalog.conf == {
        base: "org.apache.iceberg.spark.SparkCatalog",
        f"{base}.type": "hadoop",
        f"{base}.io-impl": "x.Y",
        f"{base}.warehouse": "/wh",
        f"{base}.cache-enabled": "false",
    }
    assert catalog.table == f"{catalog.name}.a.b.t" and catalog.in_catalog == "a.b.t"


def test_catalog_names_differ_by_settings_not_by_table() -> None:
    one = resolve({"catalog.warehouse": "/wh1", "table": "db.t"})[0]
    two = resolve({"catalog.warehouse": "/wh2", "table": "db.t"})[0]
    same = resolve({"catalog.warehouse": "/wh1", "table": "db.u"})[0]
    assert one is not None and two is not None and same is not None
    assert one.name != two.name and one.name == same.name


def test_cache_is_the_sinks_own_setting() -> None:
    problems = resolve(
        {"catalog.warehouse": "/wh", "catalog.cache-enabled": "true", "table": "d.t"}
    )
    assert [k for k, _ in problems[1]] == ["catalog.cache-enabled"]


class FakeConf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class FakeSpark:
    def __init__(self) -> None:
        self.conf = FakeConf()


def test_declare_sets_the_session_conf_or_raises_naming_the_key() -> None:
    spark = FakeSpark()
    catalog = declare(spark, {"catalog.warehouse": "/wh", "table": "db.t"})
    assert spark.conf.values == catalog.conf
    with pytest.raises(ConfigError, match=r"catalog\.warehouse"):
        declare(spark, {"table": "db.t"})
