"""``connector.client.config.override.policy``: which Kafka client settings a connector may
override with ``consumer.override.*`` (and ``producer.override.*``, ``admin.override.*``), as
Kafka Connect's three policies decide it (checked against Connect 4.1's own
``ConnectorClientConfigOverridePolicy`` classes: same keys allowed, same message).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated

from pydantic import BeforeValidator

from daemon.config.fields import Expect, choice
from daemon.config.problems import Problem, error

_POLICY = "org.apache.kafka.connect.connector.policy."


class OverridePolicyName(enum.StrEnum):
    ALL = "All"
    PRINCIPAL = "Principal"
    NONE = "None"


OverridePolicy = Annotated[
    OverridePolicyName,
    BeforeValidator(
        choice(
            OverridePolicyName,
            {
                f"{_POLICY}{n}ConnectorClientConfigOverridePolicy": n
                for n in ("All", "Principal", "None")
            },
        )
    ),
    Expect(
        "All, Principal or None (Connect's policies; a custom policy class runs only on the JVM)"
    ),
]

#: What the Principal policy lets a connector override (Connect's
#: ``PrincipalConnectorClientConfigOverridePolicy``).
PRINCIPAL_KEYS = frozenset(("sasl.jaas.config", "sasl.mechanism", "security.protocol"))
OVERRIDE_PREFIXES = ("consumer.override.", "producer.override.", "admin.override.")


def override_problems(policy: OverridePolicyName, config: Mapping[str, str]) -> list[Problem]:
    """An error for each client override of ``config`` that ``policy`` does not allow."""
    if policy is OverridePolicyName.ALL:
        return []
    problems = []
    for key in config:
        prefix = next((p for p in OVERRIDE_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            continue
        name = key.removeprefix(prefix)
        if policy is OverridePolicyName.PRINCIPAL and name in PRINCIPAL_KEYS:
            continue
        problems.append(
            error(
                key,
                f"The '{policy.value}' policy does not allow '{name}' to be overridden in the"
                " connector configuration.",
                "no such override"
                if policy is OverridePolicyName.NONE
                else f"only {', '.join(sorted(PRINCIPAL_KEYS))} under the Principal policy",
            )
        )
    return problems
