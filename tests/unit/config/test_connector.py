"""ConnectorConfig: framework keys typed, connector keys kept, typos of framework keys caught."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

import pytest

from daemon.config import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConnectorConfig,
    ConnectorConfigDef,
    Converter,
    ErrorTolerance,
    effective_converter,
    load_connector,
    parse_connector,
    parse_worker,
)
from daemon.errors import InvalidConfig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BASE = {"name": "c", "connector.class": "HangSink", "topics": "t"}


def _problems(values: Mapping[str, str], **kwargs: object) -> list[str]:
    with pytest.raises(InvalidConfig) as caught:
        parse_connector(values, file="c.properties", **kwargs)  # type: ignore[arg-type]
    return [str(p) for p in caught.value.problems if p.is_error]


def test_seed_demo_connector_loads() -> None:
    config, warnings = load_connector(EXAMPLES / "hang-sink.properties")
    assert warnings == []
    assert (config.name, config.connector_class, config.tasks_max) == (
        "sink-hang-connector",
        "HangSink",
        1,
    )
    assert config.topics == ("some_demo_topic",)
    assert config.properties == {
        "name": "sink-hang-connector",
        "connector.class": "HangSink",
        "tasks.max": "1",
        "topics": "some_demo_topic",
    }


def test_parquet_example_keeps_its_own_keys() -> None:
    config, warnings = load_connector(EXAMPLES / "parquet-sink.properties")
    assert warnings == []
    assert config.connector_settings == {"path": "/tmp/connectd-demo/table"}
    assert config.errors_restart_max == 7


def test_bad_connector_file_names_all_three_problems() -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_connector(FIXTURES / "bad-connector.properties")
    problems = caught.value.problems
    assert [p.key for p in problems] == ["tasks.mx", "errors.retry.delay.max.ms", "connector.class"]
    text = [str(p) for p in problems]
    assert text[0].endswith(
        "bad-connector.properties:3: tasks.mx: unknown key 'tasks.mx', did you mean 'tasks.max'?"
    )
    assert text[1].endswith(
        "bad-connector.properties:5: errors.retry.delay.max.ms: 'soon' is not a number; "
        "expected milliseconds as an integer ≥ 0"
    )
    assert "connector.class: required key is missing" in text[2]


def test_defaults() -> None:
    config, _ = parse_connector(BASE)
    assert config.tasks_max == 1
    assert config.errors_tolerance is ErrorTolerance.NONE
    assert config.errors_retry_timeout == timedelta(0)
    assert config.errors_retry_delay_max == timedelta(minutes=1)
    assert config.errors_restart_enabled is True
    assert config.errors_restart_max == 7
    assert config.errors_restart_backoff_max == timedelta(hours=1)
    assert config.errors_deadletterqueue_topic_name is None
    assert (config.key_converter, config.value_converter) == (None, None)


def test_executor_writes_max_bounds_a_connectors_executors() -> None:
    assert parse_connector(BASE).config.executor_writes_max is None  # the pool's size
    assert parse_connector({**BASE, "executor.writes.max": "-1"}).config.executor_writes_max is None
    assert parse_connector({**BASE, "executor.writes.max": "2"}).config.executor_writes_max == 2
    with pytest.raises(InvalidConfig, match=r"executor\.writes\.max: '0' is out of range"):
        parse_connector({**BASE, "executor.writes.max": "0"})


def test_minus_one_means_no_limit() -> None:
    config, _ = parse_connector({**BASE, "errors.retry.timeout": "-1", "errors.restart.max": "-1"})
    assert config.errors_retry_timeout is None
    assert config.errors_restart_max is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the name is empty"),
        ("   ", "the name is empty"),
        ("a/b", "contains '/'"),
        ("a\nb", "control character"),
        ("a\x00b", "control character"),
        ("é" * 125, "250 bytes long"),
    ],
)
def test_bad_names(name: str, reason: str) -> None:
    [error] = _problems({**BASE, "name": name})
    assert "c.properties: name: " in error and reason in error
    assert "at most 249 bytes" in error


def test_name_is_trimmed_and_may_be_249_bytes() -> None:
    assert parse_connector({**BASE, "name": "  spaced  "}).config.name == "spaced"
    assert parse_connector({**BASE, "name": "x" * 249}).config.name == "x" * 249


def test_topics_xor_regex() -> None:
    [error] = _problems({"name": "c", "connector.class": "X"})
    assert "neither topics nor topics.regex is set" in error
    with pytest.raises(InvalidConfig) as caught:
        load_connector(FIXTURES / "both-topics.properties")
    [problem] = caught.value.problems
    assert "both topics and topics.regex are set" in str(problem)
    assert problem.line == 4


def test_topics_regex_compiles() -> None:
    config, _ = parse_connector({"name": "c", "connector.class": "X", "topics.regex": "ev-.*"})
    assert config.topics_regex == re.compile("ev-.*")
    [error] = _problems({"name": "c", "connector.class": "X", "topics.regex": "ev-(["})
    assert "topics.regex: 'ev-([' is not a valid regular expression" in error


def test_topics_list_and_names() -> None:
    assert parse_connector({**BASE, "topics": " a, b.c ,d_e-f,"}).config.topics == (
        "a",
        "b.c",
        "d_e-f",
    )
    [error] = _problems({**BASE, "topics": "ok,not ok"})
    assert "'not ok' is not a valid topic name" in error


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("tasks.mx", "tasks.max"),
        ("topic", "topics"),
        ("error.tolerance", "errors.tolerance"),
        ("Tasks.Max", "tasks.max"),
        ("connector.clas", "connector.class"),
    ],
)
def test_close_typos_of_framework_keys_are_errors(typo: str, meant: str) -> None:
    values = {**BASE, typo: "1"}
    errors = _problems(values)
    assert f"c.properties: {typo}: unknown key '{typo}', did you mean '{meant}'?" in errors


def test_connector_keys_are_kept_without_a_resolver() -> None:
    config, warnings = parse_connector({**BASE, "path": "/data", "flush.size": "10"})
    assert config.connector_settings == {"path": "/data", "flush.size": "10"}
    assert warnings == []


def test_converter_overrides_and_sub_keys() -> None:
    config, _ = parse_connector(
        {
            **BASE,
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter.encoding": "utf-8",
            "key.converter.schemas.enable": "false",
        }
    )
    worker = parse_worker({"key.converter": "json", "key.converter.schemas.enable": "true"}).config
    assert effective_converter(worker, config, "value") == (Converter.STRING, {"encoding": "utf-8"})
    assert effective_converter(worker, config, "key") == (
        Converter.JSON,
        {"schemas.enable": "false"},
    )


def test_header_converter_names_what_the_headers_column_holds() -> None:
    from daemon.config.connector import effective_header_converter
    from daemon.config.values import HeaderConverter

    config, warnings = parse_connector(
        {
            **BASE,
            "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
            "header.converter.converter.type": "header",
        }
    )
    assert warnings == []
    worker = parse_worker(
        {
            "header.converter": "StringConverter",
            "header.converter.converter.encoding": "latin-1",
        }
    ).config
    assert effective_header_converter(worker, config) == (
        HeaderConverter.SIMPLE,
        {"converter.type": "header"},
    )
    plain, _ = parse_connector(BASE)
    assert effective_header_converter(worker, plain) == (
        HeaderConverter.STRING,
        {"converter.encoding": "latin-1"},
    )
    with pytest.raises(InvalidConfig) as caught:
        parse_connector(
            {**BASE, "header.converter": "org.apache.kafka.connect.converters.LongConverter"}
        )
    [problem] = caught.value.problems
    assert problem.key == "header.converter" and "SimpleHeaderConverter" in str(problem)
    json_headers = parse_connector(
        {**BASE, "header.converter": "org.apache.kafka.connect.json.JsonConverter"}
    )
    assert json_headers.config.header_converter is HeaderConverter.JSON


def test_prefix_settings() -> None:
    config, _ = parse_connector(
        {
            **BASE,
            "consumer.override.max.poll.records": "10",
            # Settings of a transform that 'transforms' does not list: unused, as in Connect.
            "transforms.a.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.a.static.field": "x",
        }
    )
    assert config.consumer_override == {"max.poll.records": "10"}
    assert config.transforms == ()
    assert config.transforms_config == {
        "a.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "a.static.field": "x",
    }


def test_dead_letter_queue_checks() -> None:
    [error] = _problems(
        {**BASE, "errors.deadletterqueue.topic.name": "t", "errors.tolerance": "all"}
    )
    assert "'t' is also in topics" in error
    _, warnings = parse_connector({**BASE, "errors.deadletterqueue.topic.name": "dlq"})
    assert [w.key for w in warnings] == ["errors.deadletterqueue.topic.name"]


def test_provider_references_are_checked_at_task_start() -> None:
    config, warnings = parse_connector({**BASE, "tasks.max": "${env:TASKS}", "path": "${env:P}"})
    assert config.tasks_max == 1
    assert config.properties["tasks.max"] == "${env:TASKS}"
    assert config.connector_settings == {"path": "${env:P}"}
    [warning] = warnings
    assert warning.key == "tasks.max" and "checked at task start" in warning.message
    [error] = _problems({**BASE, "name": "${env:NAME}"})
    assert "the name cannot come from a config provider" in error


class _Def:
    keys: Mapping[str, ConfigKey] = {
        "path": ConfigKey("path", ConfigType.STRING, documentation="Where to write")
    }

    def validate(self, config: Mapping[str, str]) -> list:  # type: ignore[type-arg]
        return ConfigDef(dict(self.keys)).validate(config)


def test_resolver_checks_connector_keys() -> None:
    definition: ConnectorConfigDef = (
        ConfigDef()
        .define("path", ConfigType.STRING, documentation="Where to write")
        .define("flush.size", ConfigType.LONG, 1000, documentation="Records per file")
    )
    resolver = {"ParquetSink": definition}.get
    base = {**BASE, "connector.class": "ParquetSink"}
    config, warnings = parse_connector({**base, "path": "/p", "pth": "x"}, resolver=resolver)
    assert config.connector_settings == {"path": "/p", "pth": "x"}
    [warning] = warnings
    assert str(warning) == "pth: unknown key 'pth', did you mean 'path'?"
    errors = _problems({**base, "flush.size": "many"}, resolver=resolver)
    assert "c.properties: path: required setting is missing: Where to write" in errors
    assert "c.properties: flush.size: 'many' is not an integer; expected an integer" in errors
    [error] = _problems({**BASE, "connector.class": "Nope"}, resolver=resolver)
    assert "connector.class: no connector class 'Nope' is installed" in error


def test_protocol_accepts_a_plain_class() -> None:
    resolver = {"X": _Def()}.get
    [error] = _problems({**BASE, "connector.class": "X"}, resolver=resolver)
    assert "path: required setting is missing" in error


def test_direct_construction() -> None:
    config = ConnectorConfig(name="n", connector_class="X", topics=("t",))
    assert config.topics == ("t",)
    with pytest.raises(ValueError, match=r"neither topics nor topics\.regex"):
        ConnectorConfig(name="n", connector_class="X")
