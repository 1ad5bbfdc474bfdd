"""WorkerConfig: Connect's stock files load, values are normalised, mistakes are all named."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from daemon.config import (
    Converter,
    Listener,
    LogLevel,
    Mode,
    WorkerConfig,
    load_worker,
    parse_worker,
    settings_of,
)
from daemon.config.ignored import WORKER_KEYS
from daemon.config.problems import Severity
from daemon.errors import ConfigError, InvalidConfig
from daemon.runtime.settings import TaskSettings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _errors(values: dict[str, object], **kwargs: object) -> list[str]:
    with pytest.raises(InvalidConfig) as caught:
        parse_worker(values, file="w.properties", **kwargs)  # type: ignore[arg-type]
    return [str(p) for p in caught.value.problems if p.is_error]


def test_defaults() -> None:
    config, warnings = parse_worker({})
    assert warnings == []
    assert config.bootstrap_servers == ("127.0.0.1:9092",)
    assert config.listeners == (Listener(scheme="http", host="127.0.0.1", port=8083),)
    assert config.offset_flush_interval == timedelta(seconds=10)
    assert config.offset_flush_timeout == timedelta(seconds=5)  # Connect's default
    assert config.task_shutdown_graceful_timeout == timedelta(seconds=5)
    assert config.task_write_timeout == timedelta(seconds=60)
    assert config.executor_start_timeout == timedelta(seconds=120)
    assert (config.executor_pool_size, config.executor_pool_spares) == (1, 1)
    assert config.executor_spark_master == "local[*]"
    assert config.state_dir == Path("/var/lib/connectd")
    assert config.offsets_file() == Path("/var/lib/connectd/connect.offsets")
    assert (config.key_converter, config.value_converter) == (Converter.JSON, Converter.JSON)
    assert config.log_level is LogLevel.INFO


def test_stock_standalone_file_loads_with_one_warning_per_jvm_key() -> None:
    config, warnings = load_worker(FIXTURES / "connect-standalone.properties", Mode.STANDALONE)
    assert config.bootstrap_servers == ("localhost:9092",)
    assert config.key_converter is Converter.JSON
    assert config.offset_storage_file_filename == Path("/tmp/connect.offsets")
    # rest.port alone: loopback, as connectd's default listener (Connect: every interface)
    assert config.listeners == (Listener(scheme="http", host="127.0.0.1", port=8083),)
    assert all(w.severity is Severity.WARNING for w in warnings)
    keys = [w.key for w in warnings]
    assert sorted(keys) == sorted(
        [
            "internal.key.converter",
            "internal.value.converter",
            "internal.key.converter.schemas.enable",
            "internal.value.converter.schemas.enable",
            "rest.port",
            "plugin.path",
        ]
    )
    for warning in warnings:
        assert warning.file is not None and warning.file.endswith("connect-standalone.properties")
        assert warning.line is not None
        assert str(warning).count(str(warning.key)) >= 1


def test_stock_distributed_file_loads_in_distributed_mode() -> None:
    config, warnings = load_worker(FIXTURES / "connect-distributed.properties", Mode.DISTRIBUTED)
    assert config.group_id == "connect-cluster"
    assert (config.config_storage_topic, config.offset_storage_topic) == (
        "connect-configs",
        "connect-offsets",
    )
    assert config.status_storage_topic == "connect-status"
    assert config.offset_storage_replication_factor == 1
    assert config.offset_storage_partitions == 25
    assert config.listeners == (Listener(scheme="http", host="", port=8083),)
    assert len(warnings) == 5
    assert len({w.key for w in warnings}) == 5


def test_example_worker_file_loads_clean() -> None:
    config, warnings = load_worker(EXAMPLES / "worker.properties", Mode.STANDALONE)
    assert warnings == []
    assert config.state_dir == Path("/tmp/connectd-demo/state")  # absolute: any working dir
    assert config.key_converter is Converter.STRING
    assert config.value_converter_schemas_enable is False
    assert config.executor_spark_conf == {"spark.ui.enabled": "false"}


def test_distributed_mode_requires_group_and_topics() -> None:
    errors = _errors({}, mode=Mode.DISTRIBUTED)
    for key in ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"):
        assert any(f": {key}: required key is missing in distributed mode" in e for e in errors)


def test_group_id_in_standalone_is_a_warning() -> None:
    _, warnings = parse_worker({"group.id": "g"}, mode=Mode.STANDALONE)
    assert [(w.key, w.severity) for w in warnings] == [("group.id", Severity.WARNING)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("org.apache.kafka.connect.storage.StringConverter", Converter.STRING),
        ("org.apache.kafka.connect.json.JsonConverter", Converter.JSON),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", Converter.BYTEARRAY),
        ("string", Converter.STRING),
        (" JSON ", Converter.JSON),
        ("bytearray", Converter.BYTEARRAY),
        ("ByteArrayConverter", Converter.BYTEARRAY),
    ],
)
def test_converter_names(text: str, expected: Converter) -> None:
    assert parse_worker({"value.converter": text}).config.value_converter is expected


def test_converter_sub_keys_are_kept() -> None:
    config, _ = parse_worker(
        {
            "value.converter.schemas.enable": "FALSE",
            "value.converter.replace.null.with.default": "true",
            "key.converter.encoding": "latin1",
        }
    )
    assert config.value_converter_schemas_enable is False
    assert config.value_converter_config == {"replace.null.with.default": "true"}
    assert config.converter_config("value") == {
        "replace.null.with.default": "true",
        "schemas.enable": "false",
    }
    assert config.converter_config("key") == {"encoding": "latin1", "schemas.enable": "true"}


def test_unknown_converter_names_key_value_and_choices() -> None:
    [error] = _errors({"key.converter": "io.confluent.connect.thrift.ThriftConverter"})
    assert error.startswith(
        "w.properties: key.converter: 'io.confluent.connect.thrift.ThriftConverter'"
    )
    assert (
        "expected string, json, bytearray, long, integer, short, float, double, boolean," in error
    )


def test_durations_are_normalised_from_ms() -> None:
    config, _ = parse_worker(
        {
            "offset.flush.interval.ms": " 2500 ",
            "offset.flush.timeout.ms": "1500",
            "task.shutdown.graceful.timeout.ms": 0,
            "executor.start.timeout.ms": "60000",
        }
    )
    assert config.offset_flush_interval == timedelta(milliseconds=2500)
    assert TaskSettings.from_worker(config).group_commit_timeout == 1.5
    assert config.task_shutdown_graceful_timeout == timedelta(0)
    assert config.executor_start_timeout == timedelta(minutes=1)


@pytest.mark.parametrize("bad", ["abc", "-1", "1.5", "", True])
def test_bad_durations_name_key_value_and_expectation(bad: object) -> None:
    [error] = _errors({"offset.flush.interval.ms": bad})
    assert error.startswith(f"w.properties: offset.flush.interval.ms: {bad!r} ")
    assert error.endswith("; expected milliseconds as an integer ≥ 0")


def test_bad_duration_message_matches_the_documented_form() -> None:
    [error] = _errors({"offset.flush.interval.ms": "abc"})
    assert error == (
        "w.properties: offset.flush.interval.ms: 'abc' is not a number; "
        "expected milliseconds as an integer ≥ 0"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8083", [Listener(scheme="http", host="127.0.0.1", port=8083)]),
        ("HTTP://:8083", [Listener(scheme="http", host="", port=8083)]),
        (
            "http://0.0.0.0:8083, https://connect.example.com:8443",
            [
                Listener(scheme="http", host="0.0.0.0", port=8083),
                Listener(scheme="https", host="connect.example.com", port=8443),
            ],
        ),
        ("http://[::1]:0", [Listener(scheme="http", host="::1", port=0)]),
    ],
)
def test_listeners(text: str, expected: list[Listener]) -> None:
    assert list(parse_worker({"listeners": text}).config.listeners) == expected


def test_listener_prints_as_its_url() -> None:
    assert str(Listener(scheme="http", host="::1", port=80)) == "http://[::1]:80"
    assert str(Listener(scheme="https", host="", port=8443)) == "https://:8443"


@pytest.mark.parametrize(
    "bad",
    ["ftp://x:1", "http://x", "http://x:99999", "http://x:8083/path", "localhost:8083", ""],
)
def test_bad_listeners(bad: str) -> None:
    [error] = _errors({"listeners": bad})
    assert error.startswith("w.properties: listeners: ")
    assert "expected a comma-separated list of http://HOST:PORT or https://HOST:PORT" in error


def test_rest_port_and_host_map_into_listeners_with_a_warning() -> None:
    config, warnings = parse_worker({"rest.port": "9000", "rest.host.name": "127.0.0.1"})
    assert config.listeners == (Listener(scheme="http", host="127.0.0.1", port=9000),)
    assert sorted(w.key for w in warnings if w.key) == ["rest.host.name", "rest.port"]
    assert all("deprecated" in w.message for w in warnings)


def test_listeners_win_over_rest_port() -> None:
    config, warnings = parse_worker({"rest.port": "9000", "listeners": "http://:7000"})
    assert config.listeners[0].port == 7000
    [warning] = warnings
    assert warning.key == "rest.port" and "ignored" in warning.message


def test_bootstrap_servers_list() -> None:
    config, _ = parse_worker({"bootstrap.servers": "a:9092, [::1]:9093,b.example.com:1"})
    assert config.bootstrap_servers == ("a:9092", "[::1]:9093", "b.example.com:1")
    config, _ = parse_worker({"bootstrap.servers": ["x:1", "y:2"]})
    assert config.bootstrap_servers == ("x:1", "y:2")
    [error] = _errors({"bootstrap.servers": "a:9092,nohost"})
    assert "'nohost' is not HOST:PORT" in error


def test_prefix_settings_are_kept_as_dicts() -> None:
    config, _ = parse_worker(
        {
            "consumer.max.poll.records": "500",
            "consumer.auto.offset.reset": "earliest",
            "executor.spark.conf.spark.sql.shuffle.partitions": "4",
            "executor.spark.conf.spark.ui.enabled": False,
        }
    )
    assert config.consumer == {"max.poll.records": "500", "auto.offset.reset": "earliest"}
    assert config.executor_spark_conf == {
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
    }


@pytest.mark.parametrize("key", sorted(WORKER_KEYS))
def test_every_jvm_only_key_draws_exactly_one_warning(key: str) -> None:
    _, warnings = parse_worker({key: "x"})
    assert [w.key for w in warnings] == [key]
    assert warnings[0].severity is Severity.WARNING


@pytest.mark.parametrize(
    "key",
    ["producer.acks", "admin.retries", "metrics.context.x", "sasl.kerberos.service.name"],
)
def test_jvm_only_prefixes_draw_one_warning(key: str) -> None:
    _, warnings = parse_worker({key: "x"})
    assert [w.key for w in warnings] == [key]


def test_unknown_keys_are_errors_with_suggestions() -> None:
    errors = _errors({"bootstrap.server": "x:1", "offset.flush.intervall.ms": "1", "zzz": "1"})
    assert (
        "w.properties: bootstrap.server: unknown key 'bootstrap.server', did you mean " in errors[0]
    )
    assert "'bootstrap.servers'?" in errors[0]
    assert any("did you mean 'offset.flush.interval.ms'?" in e for e in errors)
    assert any(e == "w.properties: zzz: unknown key 'zzz'" for e in errors)


def test_every_problem_is_reported_at_once() -> None:
    errors = _errors(
        {
            "offset.flush.interval.ms": "abc",
            "executor.pool.size": "0",
            "log.level": "LOUD",
            "log.format": "xml",
            "executor.spark.master": "mesos://x",
            "bootstrapservers": "x",
        }
    )
    assert len(errors) == 6
    assert isinstance(InvalidConfig([]), ConfigError)


def test_log_levels_accept_log4j_names() -> None:
    assert parse_worker({"log.level": "warn"}).config.log_level is LogLevel.WARNING
    assert parse_worker({"log.level": "TRACE"}).config.log_level is LogLevel.DEBUG


def test_booleans_are_connect_booleans() -> None:
    assert (
        parse_worker(
            {"key.converter.schemas.enable": " False "}
        ).config.key_converter_schemas_enable
        is False
    )
    [error] = _errors({"key.converter.schemas.enable": "yes"})
    assert error.endswith("'yes' is not a boolean; expected true or false")


def test_sasl_needs_credentials() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="connect" password="s3cr\\"et";'
    )
    config, _ = parse_worker({"security.protocol": "sasl_ssl", "sasl.jaas.config": jaas})
    assert config.sasl_credentials() == ("connect", 's3cr"et')
    assert "s3cr" not in repr(config)
    [error] = _errors({"security.protocol": "SASL_PLAINTEXT"})
    assert "sasl.jaas.config: PLAIN needs a username and password" in error


@pytest.mark.parametrize(("mechanism", "why"), [("gssapi", "Kerberos")])
def test_sasl_mechanisms_the_clients_cannot_use_are_refused(mechanism: str, why: str) -> None:
    [error] = _errors({"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism})
    assert f"sasl.mechanism: {mechanism.upper()} is not supported" in error and why in error
    assert "expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512" in error
    parse_worker({"sasl.mechanism": mechanism})  # without SASL it is not used: no error


def test_key_store_types_are_kafkas_and_others_are_refused() -> None:
    for kind in ("JKS", "PKCS12", "PEM", "pkcs12"):
        config, warnings = parse_worker({"ssl.truststore.type": kind, "ssl.keystore.type": kind})
        assert config.ssl_truststore_type == config.ssl_keystore_type == kind.upper()
        assert warnings == []
    [error] = _errors({"ssl.keystore.type": "BKS"})
    assert "ssl.keystore.type: 'BKS' is not a key store type connectd reads" in error
    assert "PEM, PKCS12 or JKS" in error


def test_model_can_be_built_directly_by_python_name() -> None:
    config = WorkerConfig(offset_flush_interval=timedelta(seconds=1), state_dir=Path("/tmp/x"))
    assert config.offset_flush_interval == timedelta(seconds=1)
    with pytest.raises(ValueError, match=r"executor\.pool\.size"):
        WorkerConfig.model_validate({"executor.pool.size": 0})


def test_every_setting_has_a_description_and_an_expectation() -> None:
    for info in settings_of(WorkerConfig):
        assert info.description, info.key
        assert info.expected != "a value", info.key
        assert info.group, info.key


@pytest.mark.parametrize(("value", "ok"), [("-1", True), ("1", True), ("0", False), ("-2", False)])
def test_topic_settings_take_minus_one_or_positive(value: str, ok: bool) -> None:
    values = {"offset.storage.partitions": value}
    if ok:
        assert parse_worker(values).config.offset_storage_partitions == int(value)
    else:
        [error] = _errors(values)
        assert error.endswith(
            "is out of range; expected an integer ≥ 1, or -1 for the broker's default"
        )


def test_the_pools_most_executors_are_at_least_its_size_and_spares() -> None:
    config = parse_worker({}).config
    assert (config.executor_pool_max_size, config.executor_write_overdue) == (
        None,
        timedelta(seconds=2),
    )
    values = {"executor.pool.size": "2", "executor.pool.spares": "1", "executor.pool.max.size": "3"}
    assert parse_worker(values).config.executor_pool_max_size == 3
    assert _errors({**values, "executor.pool.max.size": "2"}) == [
        "w.properties: executor.pool.max.size: 2 is less than executor.pool.size +"
        " executor.pool.spares (3); expected an integer ≥ 3, or -1 for the default"
    ]
    assert _errors({"executor.write.overdue.ms": "0"}) == [
        "w.properties: executor.write.overdue.ms: '0' is not positive; expected milliseconds as"
        " an integer > 0"
    ]


@pytest.mark.parametrize("value", ["1_000", "1e3", "0x10", " 12 "])
def test_integers_are_parsed_as_java_does(value: str) -> None:
    values = {"executor.pool.size": value}
    if value.strip().isdigit():
        assert parse_worker(values).config.executor_pool_size == 12
    else:
        assert _errors(values) == [
            f"w.properties: executor.pool.size: {value!r} is not a number; expected an integer ≥ 1"
        ]


def test_startup_kafka_timeout_defaults_to_a_minute_and_zero_turns_it_off() -> None:
    assert parse_worker({}).config.startup_kafka_timeout == timedelta(seconds=60)
    config = parse_worker({"startup.kafka.timeout.ms": "2500"}).config
    assert config.startup_kafka_timeout == timedelta(milliseconds=2500)
    assert parse_worker({"startup.kafka.timeout.ms": "0"}).config.startup_kafka_timeout == (
        timedelta(0)
    )
    (problem,) = _errors({"startup.kafka.timeout.ms": "soon"})
    assert problem.startswith("w.properties: startup.kafka.timeout.ms: ")


def test_task_deadlines_must_be_positive() -> None:
    for key in ("task.consumer.start.timeout.ms", "config.resolve.timeout.ms"):
        found = _errors({"bootstrap.servers": "b:9092", key: "0"})
        assert len(found) == 1 and key in found[0] and "> 0" in found[0], found


def test_request_signing_keys_are_refused_naming_why() -> None:
    """Connect's inter.worker.key.* settings ask for signed requests between workers, which
    connectd does not do: an error naming the key and why, not a warning."""
    with pytest.raises(InvalidConfig) as info:
        parse_worker({"inter.worker.key.generation.algorithm": "HmacSHA256"})
    message = str(info.value)
    assert "inter.worker.key.generation.algorithm" in message
    assert "neither signs nor verifies" in message and "remove it" in message
