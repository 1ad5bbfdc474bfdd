"""DeltaSink's settings: checked like every connector's (REST validation, check-config)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import BARE_ENV
from support.cli import connectd as run_connectd

from daemon.connectors.api import resolve_connector_class
from daemon.connectors.delta import DeltaSinkConnector
from daemon.connectors.delta.settings import DeltaSettings
from daemon.errors import ConfigError, InvalidConfig


def problems(config: dict[str, str]) -> dict[str, str]:
    return {p.key: p.message for p in DeltaSinkConnector().validate(config)}


def test_the_alias_resolves() -> None:
    assert resolve_connector_class("DeltaSink") is DeltaSinkConnector


def test_a_path_or_a_catalog_table_and_only_one() -> None:
    assert "neither path nor table" in problems({"topics": "t"})["path"]
    assert "both path and table" in problems({"path": "/d", "table": "db.t"})["path"]
    assert "relative" in problems({"topics": "t", "path": "tables/x"})["path"]
    assert problems({"topics": "t", "path": "/data/${topic}"}) == {}
    assert problems({"topics": "t", "table": "lake.${topic}"}) == {}
    assert "table" in problems({"table": "a.b.c"})
    s = DeltaSettings.from_config({"table": "lake.${topic}"})
    assert s.target("orders.eu").kwargs == {"path": "", "table": "lake.orders_eu"}


def test_settings_take_parquet_sinks_flush_keys_and_their_own() -> None:
    s = DeltaSettings.from_config(
        {
            "path": "/data/${topic}/events",
            "flush.max.records": "7",
            "schema.evolution": "true",
            "compaction.min.files": "0",
            "partition.by": "kafka_partition",
        }
    )
    assert s.table.flush_policy.max_records == 7
    assert s.table.merge_schema and s.compaction.min_files == 0
    assert s.table.partition_by == ("kafka_partition",)
    assert s.target("orders").kwargs == {"path": "/data/orders/events"}
    with pytest.raises(ValueError, match="not a Kafka topic name"):
        s.target("../x")
    with pytest.raises(InvalidConfig, match=r"compaction\.min\.files"):
        DeltaSettings.from_config({"path": "/d", "compaction.min.files": "-1"})


async def test_the_offsets_api_needs_topics_for_a_table_per_topic() -> None:
    connector = DeltaSinkConnector()
    config = {"name": "c", "topics.regex": "a.*", "path": "/data/${topic}"}
    with pytest.raises(ConfigError, match="needs the topics listed"):
        await connector.read_offsets(config, run_in_executor=None)


def test_check_config_names_a_missing_path(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(f"bootstrap.servers=127.0.0.1:1\nstate.dir={tmp_path / 'state'}\n")
    sink = tmp_path / "delta.properties"
    sink.write_text("name=d\nconnector.class=DeltaSink\ntopics=t\n")
    result = run_connectd("check-config", str(worker), str(sink), cwd=tmp_path, env=BARE_ENV)
    assert result.returncode == 78, result.stdout
    assert "path" in result.stdout and "neither path nor table is set" in result.stdout
