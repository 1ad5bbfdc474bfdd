"""Transforms and predicates in Python (``transforms.<alias>.type=module:Class``): checked when
the connector is configured, made once per task, applied to the batch like the built-in ones
(daemon/connectors/transforms/custom.py)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from daemon.config import parse_connector
from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.records import OffsetRange, RawBatch
from daemon.connectors.transforms import apply, load_plugins
from daemon.connectors.transforms.custom import TransformFailed
from daemon.errors import InvalidConfig

BASE = {"name": "c", "connector.class": "EchoSink", "topics": "t"}
HERE = "support.custom_transforms"


def chain_of(extra: Mapping[str, str]):  # type: ignore[no-untyped-def]
    config, _ = parse_connector({**BASE, **extra})
    return config.transform_chain


def errors(extra: Mapping[str, str]) -> dict[str | None, str]:
    with pytest.raises(InvalidConfig) as caught:
        parse_connector({**BASE, **extra})
    return {p.key: str(p) for p in caught.value.problems if p.is_error}


def batch():  # type: ignore[no-untyped-def]
    values = [b'{"name": "ann"}', b'{"name": "bob"}', b'{"name": "refuse"}', b'{"name": "dee"}']
    raw = RawBatch(
        topics=["t"] * 4,
        partitions=[0] * 4,
        offsets=[10, 11, 12, 13],
        timestamps=[0] * 4,
        keys=[None] * 4,
        values=values,
        headers=[()] * 4,
        timestamp_types=[0] * 4,
    )
    value = make_converter("json", {"schemas.enable": "false", "mode": "infer"}, is_key=False)
    ranges = [OffsetRange("t", 0, 10, 14)]
    return convert_poll(raw, make_converter("string", {}, is_key=True), value, ranges).batch


def test_a_python_transform_with_a_python_predicate_changes_the_rows_it_selects() -> None:
    chain = chain_of(
        {
            "transforms": "up",
            "transforms.up.type": f"{HERE}:Upper",
            "transforms.up.field": "name",
            "transforms.up.predicate": "even",
            "predicates": "even",
            "predicates.even.type": f"{HERE}:EvenOffsets",
        }
    )
    plugins = load_plugins(chain)
    assert set(plugins) == {"transforms.up", "predicates.even"}
    done = apply(chain, batch(), plugins)
    assert [r.value["name"] for r in done.batch.records()] == ["ANN", "bob", "dee"]
    assert done.batch.ranges == (OffsetRange("t", 0, 10, 14),)  # the commit moves past 12
    assert [(f.offset, f.alias, f.message) for f in done.failures] == [
        (12, "up", "name says refuse")
    ]


def test_a_python_filter_predicate_drops_rows_as_filter_does() -> None:
    chain = chain_of(
        {
            "transforms": "odd",
            "transforms.odd.type": "Filter",
            "transforms.odd.predicate": "even",
            "predicates": "even",
            "predicates.even.type": f"{HERE}:EvenOffsets",
        }
    )
    done = apply(chain, batch())
    assert [r.offset for r in done.batch.records()] == [11, 13]


@pytest.mark.parametrize(
    ("extra", "key", "why"),
    [
        (
            {"transforms": "x", "transforms.x.type": "no_such_module:Thing"},
            "transforms.x.type",
            "no_such_module:Thing cannot be loaded: No module named 'no_such_module'",
        ),
        (
            {"transforms": "x", "transforms.x.type": f"{HERE}:Missing"},
            "transforms.x.type",
            "cannot be loaded",
        ),
        (
            {"transforms": "x", "transforms.x.type": f"{HERE}:NotATransform"},
            "transforms.x.type",
            "is not a transform class (it has no apply())",
        ),
        (
            {"transforms": "x", "transforms.x.type": f"{HERE}:NeedsMode", "transforms.x.mode": "c"},
            "transforms.x.type",
            "refused its settings: ValueError: mode must be a or b, not 'c'",
        ),
        (
            {
                "transforms": "x",
                "transforms.x.type": "Filter",
                "transforms.x.predicate": "p",
                "predicates": "p",
                "predicates.p.type": f"{HERE}:Upper",
            },
            "predicates.p.type",
            "is not a predicate class (it has no test())",
        ),
    ],
)
def test_a_python_class_that_cannot_serve_is_refused_naming_its_key(
    extra: dict[str, str], key: str, why: str
) -> None:
    found = errors(extra)
    assert key in found and why in found[key], found


@pytest.mark.parametrize(
    ("cls", "why"),
    [
        ("Raises", "transform 'x' (Raises) raised RuntimeError: boom"),
        ("LosesRanges", "transform 'x' (LosesRanges) changed the batch's offset ranges"),
    ],
)
def test_a_python_transform_that_misbehaves_fails_naming_it(cls: str, why: str) -> None:
    chain = chain_of({"transforms": "x", "transforms.x.type": f"{HERE}:{cls}"})
    with pytest.raises(TransformFailed, match=why.replace("(", r"\(").replace(")", r"\)")):
        apply(chain, batch())
