"""Issue 13, item 8: ``consumer.*``, ``producer.*``, ``admin.*`` and ``consumer.override.*`` keys
are checked against the Kafka client settings connectd passes on (``daemon.config.clients``).

A bad value of a key passed on to aiokafka is an error naming the key and the expected type; an
unknown key a warning with a "did you mean"; a key Connect's Java client knows and connectd
ignores a warning saying why. The real-process half (check-config, ``connectd standalone``, a
REST create) is in tests/unit/cli/test_client_keys_cli.py and
tests/integration/rest/test_standalone_rest_defaults.py.
"""

from __future__ import annotations

import pytest

from daemon.config import parse_connector, parse_worker
from daemon.config.clients import CONSUMER_KEYS, KafkaClient, known_keys
from daemon.config.problems import Problem, Severity
from daemon.errors import InvalidConfig

CONNECTOR = {"name": "c", "connector.class": "EchoSink", "topics": "t"}


def _worker_problems(values: dict[str, object]) -> list[Problem]:
    try:
        return parse_worker(values, file="w.properties").warnings
    except InvalidConfig as exc:
        return list(exc.problems)


def _connector_problems(values: dict[str, str]) -> list[Problem]:
    try:
        return parse_connector({**CONNECTOR, **values}, file="c.properties").warnings
    except InvalidConfig as exc:
        return list(exc.problems)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("abc", "an integer ≥ 1"), ("0", "an integer ≥ 1"), ("1_000", "an integer ≥ 1")],
)
def test_a_bad_consumer_value_is_an_error_naming_key_and_type(value: str, expected: str) -> None:
    problems = _worker_problems({"consumer.max.poll.records": value})
    assert [(p.key, p.severity, p.expected) for p in problems] == [
        ("consumer.max.poll.records", Severity.ERROR, expected)
    ]
    assert str(problems[0]).startswith("w.properties: consumer.max.poll.records: ")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("auto.offset.reset", "oldest", "earliest, latest or none"),
        ("isolation.level", "READ_COMMITTED", "read_uncommitted or read_committed"),
        ("check.crcs", "yes", "true or false"),
        ("fetch.max.wait.ms", "-1", "an integer ≥ 0"),
        ("group.instance.id", " ", "a non-empty string"),
    ],
)
def test_every_kind_of_passed_on_value_is_checked(key: str, value: str, expected: str) -> None:
    problems = _worker_problems({f"consumer.{key}": value})
    assert [(p.key, p.is_error, p.expected) for p in problems] == [
        (f"consumer.{key}", True, expected)
    ]


def test_good_consumer_values_draw_nothing() -> None:
    config, warnings = parse_worker(
        {
            "consumer.max.poll.records": " 200 ",
            "consumer.auto.offset.reset": "latest",
            "consumer.isolation.level": "read_committed",
            "consumer.check.crcs": "FALSE",
        }
    )
    assert warnings == []
    assert config.consumer["max.poll.records"] == " 200 "


def test_an_unknown_consumer_key_is_a_warning_with_a_suggestion() -> None:
    config, warnings = parse_worker({"consumer.max.poll.recordz": "5"}, file="w.properties")
    assert [(w.key, w.severity) for w in warnings] == [
        ("consumer.max.poll.recordz", Severity.WARNING)
    ]
    assert "did you mean 'consumer.max.poll.records'?" in warnings[0].message
    assert config.consumer == {"max.poll.recordz": "5"}


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("consumer.partition.assignment.strategy", "the Python Kafka client has no such setting"),
        ("consumer.group.id", "connect-<connector name>"),
        ("producer.acks", "dead letter"),
        ("admin.retries", "admin"),
    ],
)
def test_known_java_keys_connectd_ignores_are_warnings_saying_why(key: str, why: str) -> None:
    _, warnings = parse_worker({key: "x"})
    assert [w.key for w in warnings] == [key]
    assert warnings[0].message.startswith("ignored: ") and why in warnings[0].message


def test_the_dead_letter_clients_security_keys_are_settings_checked_as_the_workers() -> None:
    config, warnings = parse_worker(
        {
            "producer.security.protocol": "SASL_PLAINTEXT",
            "producer.sasl.mechanism": "PLAIN",
            "admin.ssl.truststore.type": "PEM",
        }
    )
    assert warnings == []
    assert config.producer == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    assert config.admin == {"ssl.truststore.type": "PEM"}
    with pytest.raises(InvalidConfig) as bad:
        parse_worker({"admin.security.protocol": "TLS", "producer.sasl.mechanism": "NTLM"})
    keys = {p.key for p in bad.value.problems if p.is_error}
    assert keys == {"admin.security.protocol", "producer.sasl.mechanism"}
    problems = _connector_problems({"producer.override.security.protocol": "TLS"})
    assert [p.key for p in problems if p.is_error] == ["producer.override.security.protocol"]


@pytest.mark.parametrize(
    ("key", "meant"), [("producer.ackz", "producer.acks"), ("admin.retriez", "admin.retries")]
)
def test_unknown_producer_and_admin_keys_get_a_suggestion(key: str, meant: str) -> None:
    _, warnings = parse_worker({key: "1"})
    assert [w.key for w in warnings] == [key]
    assert f"did you mean '{meant}'?" in warnings[0].message


def test_connector_overrides_are_checked_the_same_way() -> None:
    problems = _connector_problems(
        {
            "consumer.override.max.poll.records": "abc",
            "consumer.override.fetch.min.byte": "1",
            "producer.override.lingr.ms": "5",
            "admin.override.retries": "1",
        }
    )
    by_key = {p.key: p for p in problems}
    bad = by_key["consumer.override.max.poll.records"]
    assert bad.is_error and bad.expected == "an integer ≥ 1" and "'abc'" in bad.message
    typo = by_key["consumer.override.fetch.min.byte"]
    assert not typo.is_error and "did you mean 'consumer.override.fetch.min.bytes'?" in str(typo)
    assert "did you mean 'producer.override.linger.ms'?" in str(
        by_key["producer.override.lingr.ms"]
    )
    assert by_key["admin.override.retries"].message.startswith("ignored: ")
    assert len(problems) == 4


def test_a_provider_reference_is_checked_once_resolved() -> None:
    config, warnings = parse_connector(
        {**CONNECTOR, "consumer.override.max.poll.records": "${env:POLL_RECORDS}"}
    )
    assert warnings == []
    assert config.consumer_override == {"max.poll.records": "${env:POLL_RECORDS}"}


def test_every_passed_on_key_is_known_and_maps_to_an_aiokafka_argument() -> None:
    import inspect

    from aiokafka import AIOKafkaConsumer

    arguments = inspect.signature(AIOKafkaConsumer).parameters
    consumer = known_keys(KafkaClient.CONSUMER.value)
    assert consumer is not None
    for key, spec in CONSUMER_KEYS.items():
        assert key in consumer
        assert spec.argument in arguments, key


def test_the_task_consumers_security_keys_are_read_as_the_workers_own() -> None:
    assert _worker_problems({"consumer.ssl.truststore.location": "/etc/ca.pem"}) == []
    assert _connector_problems({"consumer.override.sasl.mechanism": "SCRAM-SHA-512"}) == []
    [bad] = _worker_problems({"consumer.sasl.mechanism": "NOPE"})
    assert bad.is_error and bad.key == "consumer.sasl.mechanism" and "GSSAPI" in str(bad)
    [bad] = _connector_problems({"consumer.override.ssl.keystore.type": "BKS"})
    assert bad.is_error and bad.key == "consumer.override.ssl.keystore.type"
    [jvm] = _worker_problems({"consumer.ssl.provider": "SunJSSE"})
    assert not jvm.is_error and jvm.key == "consumer.ssl.provider"
    [refused] = _connector_problems({"consumer.override.ssl.engine.factory.class": "a.B"})
    assert refused.is_error and refused.key == "consumer.override.ssl.engine.factory.class"
    [unknown] = _connector_problems({"consumer.override.ssl.trustsore.location": "/x"})
    assert unknown.is_error and "did you mean 'ssl.truststore.location'" in unknown.message
