"""The TOML config of `connectd run`, and config.example.toml generated from the settings."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from daemon.config import (
    ConnectorConfig,
    DaemonConfig,
    Mode,
    WorkerConfig,
    dump_daemon_toml,
    load_daemon_toml,
    parse_daemon_toml,
    settings_of,
)
from daemon.config.example import render_example
from daemon.errors import InvalidConfig

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "config.example.toml"
FIXTURES = REPO / "tests" / "fixtures" / "config"

SAMPLE = """
mode = "standalone"

[worker]
"bootstrap.servers" = ["127.0.0.1:9092", "127.0.0.1:9093"]
"offset.flush.interval.ms" = 2500
"key.converter" = "org.apache.kafka.connect.storage.StringConverter"
"key.converter.schemas.enable" = false
"state.dir" = "/tmp/connectd-state"
"consumer.max.poll.records" = 500
"executor.spark.conf.spark.ui.enabled" = false
"config.providers" = ["env"]
"listeners" = "http://127.0.0.1:0"

[[connectors]]
name = "sink-hang-connector"
[connectors.config]
"connector.class" = "HangSink"
"tasks.max" = 2
topics = "some_demo_topic"
"errors.log.enable" = true
"password" = "${env:SECRET}"
"""


def test_sample_loads() -> None:
    config, warnings = parse_daemon_toml(SAMPLE)
    assert warnings == []
    worker = config.worker
    assert config.mode is Mode.STANDALONE
    assert worker.bootstrap_servers == ("127.0.0.1:9092", "127.0.0.1:9093")
    assert worker.offset_flush_interval == timedelta(milliseconds=2500)
    assert worker.key_converter_schemas_enable is False
    assert worker.consumer == {"max.poll.records": "500"}
    assert worker.executor_spark_conf == {"spark.ui.enabled": "false"}
    assert worker.listeners[0].port == 0
    [connector] = config.connectors
    assert connector.tasks_max == 2
    assert connector.properties["tasks.max"] == "2"
    assert connector.properties["errors.log.enable"] == "true"
    assert connector.properties["password"] == "${env:SECRET}"


def test_round_trip() -> None:
    config, _ = parse_daemon_toml(SAMPLE)
    text = dump_daemon_toml(config)
    again, _ = parse_daemon_toml(text)
    assert again == config
    assert dump_daemon_toml(again) == text


def test_round_trip_of_every_kind_of_value() -> None:
    worker = WorkerConfig.model_validate(
        {
            "listeners": "http://:8083,https://h:8443",
            "sasl.jaas.config": 'x required username="u" password="p\\"q";',
            "security.protocol": "SASL_SSL",
            "executor.start.timeout.ms": 1,
            "log.level": "DEBUG",
            "rest.advertised.listener": "https",
        }
    )
    connector = ConnectorConfig.model_validate(
        {
            "name": "c",
            "connector.class": "X",
            "topics.regex": "a.*\\d",
            "properties": {
                "name": "c",
                "connector.class": "X",
                "topics.regex": "a.*\\d",
                "q": 'he said "\x7f"',
            },
        }
    )
    config = DaemonConfig(worker=worker, connectors=(connector,))
    again, _ = parse_daemon_toml(dump_daemon_toml(config))
    assert again.worker == worker
    assert again.connectors[0].properties == connector.properties


def test_unquoted_dotted_keys_and_nested_tables_are_joined() -> None:
    text = """
[worker]
bootstrap.servers = "b:1"
offset.flush.interval.ms = 5
[worker."executor.spark.conf"]
"spark.sql.shuffle.partitions" = 4
"""
    worker = parse_daemon_toml(text).config.worker
    assert worker.bootstrap_servers == ("b:1",)
    assert worker.offset_flush_interval == timedelta(milliseconds=5)
    assert worker.executor_spark_conf == {"spark.sql.shuffle.partitions": "4"}


def test_connector_from_a_file_relative_to_the_toml(tmp_path: Path) -> None:
    (tmp_path / "c.properties").write_text("name=from-file\nconnector.class=X\ntopics=t\n")
    path = tmp_path / "connectd.toml"
    path.write_text('[worker]\n\n[[connectors]]\nfile = "c.properties"\n')
    config, warnings = load_daemon_toml(path)
    assert warnings == []
    assert [c.name for c in config.connectors] == ["from-file"]


def test_examples_standalone_toml_loads() -> None:
    config, warnings = load_daemon_toml(REPO / "examples" / "standalone.toml")
    assert warnings == []
    assert [c.name for c in config.connectors] == ["sink-hang-connector", "parquet-sink"]


def test_every_problem_of_the_bad_file_is_reported() -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_daemon_toml(FIXTURES / "bad-daemon.toml")
    text = [str(p) for p in caught.value.problems]
    assert any(
        t.endswith(
            "bad-daemon.toml:4: offset.flush.interval.ms: 'abc' is not a number; "
            "expected milliseconds as an integer ≥ 0"
        )
        for t in text
    )
    assert any(
        t.endswith(
            "bad-daemon.toml:5: executor.pool.size: 0 is out of range; expected an integer ≥ 1"
        )
        for t in text
    )
    assert any(
        t.endswith(
            "bad-daemon.toml:11: connectors[0].config.topic: "
            "unknown key 'topic', did you mean 'topics'?"
        )
        for t in text
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mode = 'sideways'", "mode: 'sideways' is not a mode; expected standalone or distributed"),
        ("modes = 'standalone'", "unknown key 'modes', did you mean 'mode'?"),
        ("[worker", "not valid TOML"),
        (
            "mode = 'distributed'\n[worker]\n'group.id'='g'\n'config.storage.topic'='c'\n"
            "'offset.storage.topic'='o'\n'status.storage.topic'='s'\n"
            "[[connectors]]\nname='x'\nconfig={'connector.class'='X', topics='t'}",
            "connectors: set in distributed mode",
        ),
        (
            "[[connectors]]\nname='x'\nconfig={'connector.class'='X', topics='t'}\n"
            "[[connectors]]\nname='x'\nconfig={'connector.class'='X', topics='t'}",
            "'x' is configured twice",
        ),
        (
            "[[connectors]]\nname='x'\nconfig={'name'='y', 'connector.class'='X', topics='t'}",
            "connectors[0].name: 'x' differs from the config's name 'y'",
        ),
        ("[[connectors]]\nname='x'", "connectors[0].config: missing or not a table"),
        ("[worker]\n'bootstrap.servers' = [{a=1}]", "is not a setting value"),
    ],
)
def test_bad_toml(text: str, message: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_daemon_toml(text, "x.toml")
    assert any(message in str(p) for p in caught.value.problems), [
        str(p) for p in caught.value.problems
    ]


def test_config_example_is_generated_from_the_settings() -> None:
    assert EXAMPLE.read_text(encoding="utf-8") == render_example(), (
        "config.example.toml is out of date: python -m daemon.config.example > config.example.toml"
    )


def test_config_example_lists_every_worker_setting() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    for info in settings_of(WorkerConfig):
        shown = f'"{info.prefix}' if info.prefix else f'"{info.key}" = '
        assert f"#{shown}" in text, f"config.example.toml lacks {info.key}"
        assert f"# {info.key}: {info.description[:40]}" in text.replace("\n#   ", " "), info.key


def test_config_example_loads_and_every_commented_setting_is_valid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, warnings = load_daemon_toml(EXAMPLE)
    assert warnings == [] and config.connectors == ()
    worker_part = EXAMPLE.read_text(encoding="utf-8").split("# Connectors (standalone mode)")[0]
    uncommented = "\n".join(
        line[1:] if line.startswith('#"') else line for line in worker_part.splitlines()
    )
    values = tomllib.loads(uncommented)["worker"]
    assert len(values) >= len(settings_of(WorkerConfig))
    # Every example value is valid: uncommenting them all only draws warnings.
    monkeypatch.setenv("KAFKA_PASSWORD", "p")
    monkeypatch.setenv("CONNECTD_KEY_PASSWORD", "k")
    monkeypatch.setenv("CONNECTD_KEYSTORE_PASSWORD", "s")
    monkeypatch.setenv("CONNECTD_TRUSTSTORE_PASSWORD", "t")
    config, warnings = parse_daemon_toml(uncommented)
    assert config.worker.executor_spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert {w.key for w in warnings} == {
        "sasl.jaas.config",  # ignored with PLAINTEXT
        "rest.host.name",  # deprecated, listeners win
        "rest.port",
        "group.id",  # distributed-only keys in standalone mode
        "config.storage.topic",
        "offset.storage.topic",
        "status.storage.topic",
    }
