"""Routers and table locations (daemon/connectors/tables/settings.py ``Routes``): under a
``${topic}`` location a partition's records must land in one table, so only routing decided
by the topic alone is taken, and the table a topic's records go to is its routed topic's."""

from __future__ import annotations

import pytest

import daemon.connectors.builtin  # noqa: F401 (registers ParquetSink)
from daemon.connectors.api import validate_connector
from daemon.connectors.parquet.settings import ParquetSettings
from daemon.errors import InvalidConfig


def sink(path: str, **transforms: str) -> dict[str, str]:
    return {"connector.class": "ParquetSink", "topics": "prod.orders,dev.orders", "path": path} | {
        k.replace("_", "."): v for k, v in transforms.items()
    }


REGEX = {
    "transforms": "r",
    "transforms_r_type": "RegexRouter",
    "transforms_r_regex": "prod\\.(.*)",
    "transforms_r_replacement": "$1",
}


def test_a_regex_router_names_the_topic_table(tmp_path: object) -> None:
    settings = ParquetSettings.from_config(sink("/t/${topic}", **REGEX))
    assert settings.target("prod.orders").name == "/t/orders"
    assert settings.target("dev.orders").name == "/t/dev.orders"  # no match: not routed
    fixed = ParquetSettings.from_config(sink("/t/one", **REGEX))
    assert fixed.target("prod.orders").name == "/t/one"


def test_a_topic_predicate_decides_where_the_router_applies() -> None:
    config = sink(
        "/t/${topic}",
        **REGEX,
        transforms_r_predicate="dev",
        transforms_r_negate="true",
        predicates="dev",
        predicates_dev_type="TopicNameMatches",
        predicates_dev_pattern="dev\\..*",
    )
    assert ParquetSettings.from_config(config).target("prod.orders").name == "/t/orders"
    validate_connector("c", config)  # a TopicNameMatches predicate is decided by the topic


@pytest.mark.parametrize(
    ("transforms", "why"),
    [
        (
            {"transforms": "d", "transforms_d_type": "TimestampRouter"},
            "TimestampRouter routes each record by its time",
        ),
        (
            REGEX
            | {
                "transforms_r_predicate": "h",
                "predicates": "h",
                "predicates_h_type": "HasHeaderKey",
                "predicates_h_name": "x",
            },
            "RegexRouter applies where predicate 'h' holds, record by record",
        ),
    ],
)
def test_routing_a_topic_table_cannot_follow_is_refused_naming_the_router(
    transforms: dict[str, str], why: str
) -> None:
    with pytest.raises(InvalidConfig) as caught:
        validate_connector("c", sink("/t/${topic}", **transforms))
    found = {p.key: str(p) for p in caught.value.problems if p.is_error}
    (key,) = [k for k in found if k and k.endswith(".type")]
    assert why in found[key], found
    validate_connector("c", sink("/t/fixed", **transforms))  # one table: any routing is fine
