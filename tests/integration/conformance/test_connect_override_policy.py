"""``connector.client.config.override.policy`` against Kafka Connect 4.1's own policy classes:
for each policy, the consumer overrides connectd refuses are the ones Connect refuses, with
Connect's message (``Policies.java`` runs Connect's classes; ``daemon.config.overrides``)."""

from __future__ import annotations

import pytest
from support.connect_jars import connect_libs, refused_overrides

from daemon.config.overrides import OverridePolicyName, override_problems

pytestmark = pytest.mark.integration

KEYS = [
    "max.poll.records",
    "sasl.jaas.config",
    "sasl.mechanism",
    "security.protocol",
    "sasl.client.callback.handler.class",
    "ssl.keystore.location",
    "group.instance.id",
]


def test_each_policy_refuses_what_connect_refuses() -> None:
    connect = refused_overrides(connect_libs(), [p.value for p in OverridePolicyName], KEYS)
    for policy in OverridePolicyName:
        config = {f"consumer.override.{k}": "x" for k in KEYS}
        ours = {
            p.key.removeprefix("consumer.override."): [p.message]
            for p in override_problems(policy, config)
            if p.key is not None
        }
        theirs = {k: v for k, v in connect[policy.value].items() if v}
        assert ours == theirs, policy
    assert connect["None"] and connect["Principal"]  # the comparison is not vacuous
