"""IcebergSink's settings: the table and its catalog, checked like every connector's."""

from __future__ import annotations

from pathlib import Path

from support.cli import BARE_ENV
from support.cli import connectd as run_connectd

from daemon.connectors.api import resolve_connector_class
from daemon.connectors.iceberg import IcebergSinkConnector
from daemon.connectors.iceberg.settings import IcebergSettings


def problems(config: dict[str, str]) -> dict[str, str]:
    return {p.key: p.message for p in IcebergSinkConnector().validate(config)}


def test_the_alias_resolves() -> None:
    assert resolve_connector_class("IcebergSink") is IcebergSinkConnector


def test_a_catalog_needs_its_location() -> None:
    assert "table" in problems({"catalog.warehouse": "/wh"})
    assert "catalog.warehouse" in problems({"table": "db.t"})  # hadoop, the default
    assert "catalog.uri" in problems({"table": "db.t", "catalog.type": "rest"})
    assert "catalog.type" in problems({"table": "db.t", "catalog.type": "glue"})
    assert "table" in problems({"table": "t", "catalog.warehouse": "/wh"})  # no namespace
    assert problems({"table": "db.${topic}", "catalog.warehouse": "/wh"}) == {}


def test_a_table_per_topic_and_the_catalog_settings() -> None:
    s = IcebergSettings.from_config(
        {
            "table": "raw.${topic}",
            "catalog.warehouse": "/wh",
            "catalog.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
            "flush.max.records": "9",
        }
    )
    target = s.target("orders.eu")
    assert target.kwargs == {
        "catalog": {
            "catalog.warehouse": "/wh",
            "catalog.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        },
        "table": "raw.orders_eu",
    }
    assert s.table.flush_policy.max_records == 9


def test_check_config_names_a_missing_warehouse(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(f"bootstrap.servers=127.0.0.1:1\nstate.dir={tmp_path / 'state'}\n")
    sink = tmp_path / "iceberg.properties"
    sink.write_text("name=i\nconnector.class=IcebergSink\ntopics=t\ntable=db.events\n")
    result = run_connectd("check-config", str(worker), str(sink), cwd=tmp_path, env=BARE_ENV)
    assert result.returncode == 78, result.stdout
    assert "catalog.warehouse" in result.stdout


def test_names_spark_cannot_parse_bare_are_quoted() -> None:
    from daemon.connectors.tables.names import quote

    assert quote("db.orders_eu") == "db.orders_eu"
    assert quote("db.t-orders") == "db.`t-orders`"
    assert quote("1db.t") == "`1db`.t"
