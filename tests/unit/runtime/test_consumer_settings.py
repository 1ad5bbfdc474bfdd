"""A task consumer's aiokafka settings from the worker's and the connector's keys."""

from __future__ import annotations

import pytest

from daemon.config import parse_connector, parse_worker
from daemon.errors import ConfigError, InvalidConfig
from daemon.runtime.clients import security_settings
from daemon.runtime.deadletter.policy import dead_letter_clients
from daemon.runtime.incarnation.consumer import (
    MAX_POLL_RECORDS,
    consumer_security,
    consumer_settings,
    group_id,
    poll_bound_ms,
)
from daemon.runtime.offsets import _leave_timeout


def _worker(**extra: str):  # type: ignore[no-untyped-def]
    return parse_worker({"bootstrap.servers": "127.0.0.1:9999", **extra}).config


def _connector(**extra: str):  # type: ignore[no-untyped-def]
    return parse_connector(
        {"name": "sink", "connector.class": "x:Y", "topics": "t", **extra}
    ).config


def test_defaults_are_connects_for_sinks() -> None:
    s = consumer_settings(_worker(), _connector(), task=2, put_timeout=150.0, warn=print)
    assert s["group_id"] == group_id("sink") == "connect-sink"
    assert s["enable_auto_commit"] is False
    assert s["auto_offset_reset"] == "earliest"
    assert s["bootstrap_servers"] == ["127.0.0.1:9999"]
    assert s["client_id"] == "connectd-sink-2"
    assert s["max_poll_interval_ms"] == poll_bound_ms(150.0) == 210_000
    assert s["rebalance_timeout_ms"] == s["max_poll_interval_ms"]
    assert s["security_protocol"] == "PLAINTEXT"


def test_overrides_map_and_the_connectors_win() -> None:
    warnings: list[str] = []
    worker = _worker(**{"consumer.max.poll.records": "100", "consumer.fetch.max.wait.ms": "50"})
    connector = _connector(
        **{
            "consumer.override.max.poll.records": "7",
            "consumer.override.isolation.level": "read_committed",
            "consumer.override.max.poll.interval.ms": "900000",
        }
    )
    s = consumer_settings(worker, connector, task=0, put_timeout=150.0, warn=warnings.append)
    assert s["max_poll_records"] == 7
    assert s["fetch_max_wait_ms"] == 50
    assert s["isolation_level"] == "read_committed"
    assert s["max_poll_interval_ms"] == 900_000
    assert warnings == []


def test_records_per_poll_default_to_ten_thousand_or_what_the_sink_asks() -> None:
    def polls(worker: object, connector: object, asked: int | None) -> int:
        s = consumer_settings(worker, connector, task=0, put_timeout=150.0, poll_records=asked)
        return int(s["max_poll_records"])

    assert polls(_worker(), _connector(), None) == MAX_POLL_RECORDS == 10_000
    assert polls(_worker(), _connector(), 1_500) == 1_500  # the sink's buffer bound
    assert polls(_worker(), _connector(), 250_000) == 10_000
    # Set by the worker or the connector, max.poll.records wins over both.
    assert polls(_worker(**{"consumer.max.poll.records": "500"}), _connector(), 1_500) == 500
    explicit = _connector(**{"consumer.override.max.poll.records": "20000"})
    assert polls(_worker(), explicit, 1_500) == 20_000


def test_fixed_unknown_and_too_small_settings_are_ignored_with_a_warning() -> None:
    warnings: list[str] = []
    connector = _connector(
        **{
            "consumer.override.group.id": "mine",
            "consumer.override.enable.auto.commit": "true",
            "consumer.override.send.buffer.bytes": "1",
            "consumer.override.max.poll.interval.ms": "1000",
        }
    )
    s = consumer_settings(_worker(), connector, task=0, put_timeout=10.0, warn=warnings.append)
    assert s["group_id"] == "connect-sink" and s["enable_auto_commit"] is False
    assert s["max_poll_interval_ms"] == poll_bound_ms(10.0)
    text = "\n".join(warnings)
    for key in ("group.id", "enable.auto.commit", "send.buffer.bytes", "max.poll.interval.ms"):
        assert key in text


def test_a_bad_value_is_refused_when_the_config_is_loaded() -> None:
    # daemon.config.clients checks the values this module passes on (issue 13, item 8).
    with pytest.raises(InvalidConfig, match=r"consumer.override.max.poll.records: 'lots'"):
        _connector(**{"consumer.override.max.poll.records": "lots"})


def test_sasl_credentials_come_from_the_jaas_line() -> None:
    worker = _worker(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": 'x required username="u" password="p";',
        }
    )
    s = consumer_settings(worker, _connector(), task=0, put_timeout=1.0, warn=print)
    assert s["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (s["sasl_plain_username"], s["sasl_plain_password"]) == ("u", "p")


PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="p";'
)


def test_a_connectors_own_credentials_reach_its_consumers_only() -> None:
    """Connect's use of ``consumer.override.sasl.jaas.config`` (allowed by the Principal
    policy): each connector reads with its own principal; the worker keeps its own."""
    worker = _worker(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": PLAIN % "worker",
            "consumer.sasl.mechanism": "SCRAM-SHA-512",
        }
    )
    connector = _connector(**{"consumer.override.sasl.jaas.config": PLAIN % "tenant-a"})
    s = consumer_settings(worker, connector, task=0, put_timeout=10.0, warn=pytest.fail)
    assert (s["sasl_mechanism"], s["sasl_plain_username"]) == ("SCRAM-SHA-512", "tenant-a")
    own = security_settings(worker)
    assert (own["sasl_mechanism"], own["sasl_plain_username"]) == ("PLAIN", "worker")
    plain = consumer_settings(worker, _connector(), task=0, put_timeout=10.0, warn=pytest.fail)
    assert (plain["sasl_mechanism"], plain["sasl_plain_username"]) == ("SCRAM-SHA-512", "worker")


def test_the_dead_letter_clients_take_their_own_clients_security_settings() -> None:
    """Connect builds a dead-letter queue's producer from producer.* and
    producer.override.*, its admin client from admin.* and admin.override.*."""
    worker = _worker(
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": PLAIN % "worker",
            "producer.sasl.jaas.config": PLAIN % "producer",
            "admin.sasl.mechanism": "SCRAM-SHA-256",
        }
    )
    clients = dead_letter_clients(worker, _connector(), 3)
    assert clients.producer["client_id"] == clients.admin["client_id"] == "connectd-sink-3-dlq"
    producer, admin = clients.producer, clients.admin
    assert (producer["sasl_mechanism"], producer["sasl_plain_username"]) == ("PLAIN", "producer")
    assert (admin["sasl_mechanism"], admin["sasl_plain_username"]) == ("SCRAM-SHA-256", "worker")
    tenant = _connector(
        **{
            "producer.override.sasl.jaas.config": PLAIN % "tenant",
            "admin.override.sasl.jaas.config": PLAIN % "tenant-admin",
        }
    )
    clients = dead_letter_clients(worker, tenant, 0)
    assert clients.producer["sasl_plain_username"] == "tenant"
    assert clients.admin["sasl_plain_username"] == "tenant-admin"
    assert clients.reader["sasl_plain_username"] == "worker"  # connectd's own: the worker's
    consumer = consumer_settings(worker, tenant, task=0, put_timeout=10.0, warn=pytest.fail)
    assert consumer["sasl_plain_username"] == "worker"  # each client its own
    wrong = _connector(**{"producer.override.sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="the dead-letter producer's security settings"):
        dead_letter_clients(worker, wrong, 0)


def test_overrides_that_do_not_fit_the_workers_settings_fail_the_task_naming_them() -> None:
    worker = _worker(**{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": PLAIN % "w"})
    connector = _connector(**{"consumer.override.sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ConfigError) as caught:
        consumer_settings(worker, connector, task=0, put_timeout=10.0)
    assert "the task consumer's security settings: sasl.jaas.config: OAUTHBEARER needs" in str(
        caught.value
    )
    # A ${provider:...} value is checked once resolved: at task start.
    resolved_later = _connector().model_copy(
        update={"consumer_override": {"sasl.mechanism": "MD5"}}
    )
    with pytest.raises(ConfigError, match=r"consumer\.override\.sasl\.mechanism"):
        consumer_settings(worker, resolved_later, task=0, put_timeout=10.0)


def test_a_connectors_own_key_store_takes_nothing_of_the_workers_store() -> None:
    worker = _worker(
        **{
            "security.protocol": "SSL",
            "ssl.keystore.location": "/etc/hosts",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": "worker",
            "ssl.key.password": "worker-key",
        }
    )
    connector = _connector(
        **{
            "consumer.override.ssl.keystore.location": "/etc/passwd",
            "consumer.override.ssl.keystore.password": "own",
        }
    )
    store = consumer_security(worker, connector).tls_stores()[0]
    assert store is not None
    assert (str(store.location), store.password, store.key_password) == ("/etc/passwd", "own", None)
    assert store.type == "JKS"  # Kafka's default for a store given without its type
    assert worker.tls_stores()[0].type == "PKCS12"  # the worker's own is unchanged


def test_the_offsets_wait_follows_the_task_consumers_session_timeout() -> None:
    worker = _worker(**{"consumer.session.timeout.ms": "20000"})
    assert _leave_timeout(worker, {}) == 25.0
    assert _leave_timeout(worker, {"consumer.override.session.timeout.ms": "60000"}) == 65.0
    assert _leave_timeout(_worker(), {}) == _worker().session_timeout.total_seconds() + 5
