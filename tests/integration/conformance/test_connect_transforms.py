"""The transforms connectd applies, against Kafka Connect 4.1's own classes (issue 30).

The same records go through Connect's transform and predicate classes (``Harness.java``, run by
the JDK from Maven Central jars: ``support.connect_jars``) and through connectd's chain
(``daemon.connectors.transforms``, on the batch the String converters make of them), configured
by the same connector settings. What comes out must be the same, record for record: which
records the chain drops, and every field of those it keeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.connect_jars import chain_of, connect_libs, raw_batch, run_harness

from daemon.config import transforms as tf
from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.transforms import apply

pytestmark = pytest.mark.integration

#: Topics, keys, values (None: a tombstone; "": an empty value) and headers (one named twice,
#: one with a null value) that the predicates tell apart.
RECORDS: list[dict[str, Any]] = [
    {"topic": t, "partition": p, "offset": o, "key": k, "value": v, "headers": h}
    for o, (t, p, k, v, h) in enumerate(
        [
            ("orders", 0, "k1", "a", []),
            ("orders-eu", 1, None, None, [["trace", "1"]]),
            ("people", 0, "k3", "", [["trace", None]]),
            ("a.b", 2, "k4", "d", [["other", "x"], ["trace", "2"], ["trace", "3"]]),
            ("ORDERS", 0, None, None, []),
            ("x", 0, "k6", "f", [["Trace", "4"]]),
            ("orders", 1, "k7", None, [["other", None]]),
        ]
    )
]


def chains() -> Iterator[tuple[str, dict[str, str]]]:
    def filtered(
        predicate: str | None, ptype: str = "", negate: str = "", **own: str
    ) -> dict[str, str]:
        config = {
            "transforms": "f",
            "transforms.f.type": "org.apache.kafka.connect.transforms.Filter",
        }
        if predicate:
            config |= {"transforms.f.predicate": "p", "predicates": "p", "predicates.p.type": ptype}
            config |= {f"predicates.p.{k}": v for k, v in own.items()}
        if negate:
            config["transforms.f.negate"] = negate
        return config

    yield "filter-alone", filtered(None)
    for pattern in (
        "orders.*",
        "orders",
        "ORDERS",
        "(?i)orders",
        "[a-z]+\\.[a-z]+",
        "(?!orders).*",
        "o|x",
    ):
        yield f"topic-{pattern}", filtered("p", "TopicNameMatches", pattern=pattern)
    yield "topic-negated", filtered("p", "TopicNameMatches", "true", pattern="orders.*")
    yield "header", filtered("p", "HasHeaderKey", name="trace")
    yield "header-negated", filtered("p", "HasHeaderKey", "TRUE", name="trace")
    yield "header-absent", filtered("p", "HasHeaderKey", name="none")
    yield "tombstone", filtered("p", "RecordIsTombstone")
    yield "tombstone-negated", filtered("p", "RecordIsTombstone", "true")
    yield (
        "short-names",
        {
            "transforms": "f",
            "transforms.f.type": "Filter",
            "transforms.f.predicate": "t",
            "predicates": "t",
            "predicates.t.type": "RecordIsTombstone",
        },
    )
    drop = {"transforms": "d", "transforms.d.type": "DropHeaders"}
    yield "drop-one-header", drop | {"transforms.d.headers": "trace"}
    yield "drop-headers", drop | {"transforms.d.headers": " trace, other ,Trace"}
    yield "drop-absent-header", drop | {"transforms.d.headers": "none"}
    yield (
        "drop-headers-where",
        drop
        | {
            "transforms.d.type": "org.apache.kafka.connect.transforms.DropHeaders",
            "transforms.d.headers": "trace,other",
            "transforms.d.predicate": "o",
            "predicates": "o",
            "predicates.o.type": "TopicNameMatches",
            "predicates.o.pattern": "orders.*|a\\.b",
        },
    )
    for first, then in (("d", "f"), ("f", "d")):  # a predicate sees what the stage before left
        yield (
            f"drop-{first}-then-{then}",
            {
                "transforms": f"{first},{then}",
                "transforms.d.type": "DropHeaders",
                "transforms.d.headers": "trace",
                "transforms.f.type": "Filter",
                "transforms.f.predicate": "h",
                "transforms.f.negate": "true",
                "predicates": "h",
                "predicates.h.type": "HasHeaderKey",
                "predicates.h.name": "trace",
            },
        )
    yield (
        "two-filters",
        {
            "transforms": "dead, notpeople",
            "transforms.dead.type": "Filter",
            "transforms.dead.predicate": "tomb",
            "transforms.notpeople.type": "Filter",
            "transforms.notpeople.predicate": "people",
            "transforms.notpeople.negate": "true",
            "predicates": "tomb,people",
            "predicates.tomb.type": tf.RECORD_IS_TOMBSTONE,
            "predicates.people.type": "TopicNameMatches",
            "predicates.people.pattern": "people|orders",
        },
    )


def connectd_output(config: dict[str, str]) -> list[dict[str, Any] | None]:
    """The records as connectd's chain leaves them, in the harness's form."""
    chain = chain_of(config)
    raw = raw_batch(RECORDS)
    string = lambda is_key: make_converter("string", {}, is_key=is_key)  # noqa: E731
    batch = apply(chain, convert_poll(raw, string(True), string(False)).batch).batch
    kept = {r.offset: r for r in batch.records()}
    out: list[dict[str, Any] | None] = []
    for r in RECORDS:
        got = kept.get(r["offset"])
        out.append(
            None
            if got is None
            else {
                "topic": got.topic,
                "partition": got.partition,
                "offset": got.offset,
                "key": got.key,
                "value": got.value,
                "headers": [[k, None if v is None else v.decode()] for k, v in got.headers],
            }
        )
    return out


CHAINS = dict(chains())


@pytest.fixture(scope="module")
def connect() -> dict[str, list[dict[str, Any] | None]]:
    """Every chain's output from Connect's own classes (one harness run)."""
    results = run_harness(connect_libs(), [(c, RECORDS) for c in CHAINS.values()])
    return dict(zip(CHAINS, results, strict=True))


@pytest.mark.parametrize("case", list(CHAINS))
def test_the_chain_keeps_and_drops_what_connect_does(
    connect: dict[str, list[dict[str, Any] | None]], case: str
) -> None:
    expected = connect[case]
    assert not [e for e in expected if e is not None and "error" in e], expected
    assert connectd_output(CHAINS[case]) == expected
