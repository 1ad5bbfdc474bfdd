"""``connector.client.config.override.policy``: Connect's names for its three policies, and what
each lets a connector override (the messages are checked against Connect's classes in
tests/integration/conformance/test_connect_override_policy.py)."""

from __future__ import annotations

import pytest

from daemon.config import Mode, parse_worker
from daemon.config.overrides import OverridePolicyName, override_problems
from daemon.config.worker_checks import WorkerChecks
from daemon.errors import InvalidConfig

BASE = {"bootstrap.servers": "127.0.0.1:9092"}
POLICY = "connector.client.config.override.policy"


@pytest.mark.parametrize(
    ("given", "policy"),
    [
        (None, OverridePolicyName.ALL),  # Connect's default
        ("None", OverridePolicyName.NONE),
        (" principal ", OverridePolicyName.PRINCIPAL),
        (
            "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy",
            OverridePolicyName.NONE,
        ),
    ],
)
def test_connects_policy_names(given: str | None, policy: OverridePolicyName) -> None:
    values = BASE if given is None else {**BASE, POLICY: given}
    worker = parse_worker(values, mode=Mode.STANDALONE).config
    assert worker.connector_client_config_override_policy is policy
    assert WorkerChecks.of(worker).override_policy is policy


def test_a_custom_policy_class_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_worker({**BASE, POLICY: "com.acme.MyPolicy"}, mode=Mode.STANDALONE)
    (problem,) = [p for p in caught.value.problems if p.is_error]
    assert problem.key == POLICY and "All, Principal or None" in str(problem)


def test_what_each_policy_refuses() -> None:
    config = {
        "consumer.override.max.poll.records": "5",
        "consumer.override.sasl.jaas.config": "x",
        "producer.override.acks": "all",
        "topics": "t",
    }
    assert override_problems(OverridePolicyName.ALL, config) == []
    principal = {p.key for p in override_problems(OverridePolicyName.PRINCIPAL, config)}
    assert principal == {"consumer.override.max.poll.records", "producer.override.acks"}
    none = {p.key for p in override_problems(OverridePolicyName.NONE, config)}
    assert none == {k for k in config if ".override." in k}
