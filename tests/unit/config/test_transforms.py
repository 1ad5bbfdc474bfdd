"""A connector's transforms and predicates as the config layer reads them: the chain connectd
applies, and every refusal filed under the key it concerns (daemon/config/transforms.py)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from daemon.config import parse_connector
from daemon.config import transforms as tf
from daemon.errors import InvalidConfig

BASE = {"name": "c", "connector.class": "EchoSink", "topics": "t"}
METADATA = "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"


def errors(config: Mapping[str, str]) -> dict[str | None, str]:
    with pytest.raises(InvalidConfig) as caught:
        parse_connector({**BASE, **config})
    return {p.key: str(p) for p in caught.value.problems if p.is_error}


def test_filter_with_a_predicate_is_the_chain() -> None:
    config, warnings = parse_connector(
        {
            **BASE,
            "transforms": "drop",
            "transforms.drop.type": "Filter",
            "transforms.drop.predicate": "p",
            "transforms.drop.negate": "TRUE",
            "predicates": "p",
            "predicates.p.type": "TopicNameMatches",
            "predicates.p.pattern": "orders-.*",
        }
    )
    assert warnings == []
    (spec,) = config.transform_chain.transforms
    assert (spec.alias, spec.cls, spec.negate) == ("drop", tf.FILTER, True)
    assert spec.predicate == tf.PredicateSpec("p", tf.TOPIC_NAME_MATCHES, {"pattern": "orders-.*"})
    assert not parse_connector(BASE)[0].transform_chain


def test_set_schema_metadata_needs_a_name_or_a_version() -> None:
    for key, value in (("schema.name", "person"), ("schema.version", "3")):
        config, _ = parse_connector(
            {**BASE, "transforms": "m", "transforms.m.type": METADATA, f"transforms.m.{key}": value}
        )
        assert config.transform_chain.transforms[0].config[key] == value
    short = errors({"transforms": "m", "transforms.m.type": "SetSchemaMetadata$Key"})
    assert "Neither schema name nor version configured" in short["transforms.m.schema.name"]
    bad = errors(
        {"transforms": "m", "transforms.m.type": METADATA, "transforms.m.schema.version": "v3"}
    )
    assert "'v3': is not a whole number" in bad["transforms.m.schema.version"]


@pytest.mark.parametrize(
    ("config", "key", "why"),
    [
        (
            {"transforms": "a,b", "transforms.a.type": "Filter"},
            "transforms.b.type",
            "type is not set",
        ),
        (
            {"transforms": "a", "transforms.a.type": "com.acme.Mine"},
            "transforms.a.type",
            "not a transform class connectd knows",
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "nope"},
            "transforms.a.predicate",
            "names 'nope', which predicates does not list",
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "maybe"},
            "transforms.a.negate",
            "'maybe' is not a boolean",
        ),
        (
            {"predicates": "p", "predicates.p.type": "TopicNameMatches"},
            "predicates.p.pattern",
            "is required",
        ),
        (
            {
                "predicates": "p",
                "predicates.p.type": "TopicNameMatches",
                "predicates.p.pattern": "(",
            },
            "predicates.p.pattern",
            "is not a valid regex",
        ),
        (
            {"predicates": "p", "predicates.p.type": "HasHeaderKey", "predicates.p.name": " "},
            "predicates.p.name",
            "is required",
        ),
        (
            {"predicates": "p", "predicates.p.type": "com.acme.P"},
            "predicates.p.type",
            "not a predicate class connectd knows",
        ),
        ({"predicates": "p"}, "predicates.p.type", "type is not set"),
        (
            {"transforms": "d", "transforms.d.type": "DropHeaders"},
            "transforms.d.headers",
            "is required",
        ),
        (
            {"transforms": "d", "transforms.d.type": "DropHeaders", "transforms.d.headers": " , "},
            "transforms.d.headers",
            "is required",
        ),
        (
            {"transforms": "i", "transforms.i.type": "InsertField$Value"},
            "transforms.i.topic.field",
            "no field insertion configured",
        ),
        (
            {
                "transforms": "i",
                "transforms.i.type": "InsertField$Key",
                "transforms.i.static.field": "s",
            },
            "transforms.i.static.value",
            "static.field is 's' but no value is given for it",
        ),
        (
            {
                "transforms": "r",
                "transforms.r.type": "ReplaceField$Value",
                "transforms.r.renames": "a:b,c",
            },
            "transforms.r.renames",
            "invalid rename mapping 'c'",
        ),
        (
            {"transforms": "m", "transforms.m.type": "MaskField$Value"},
            "transforms.m.fields",
            "is required",
        ),
        (
            {
                "transforms": "m",
                "transforms.m.type": "MaskField$Value",
                "transforms.m.fields": "a",
                "transforms.m.replacement": "",
            },
            "transforms.m.replacement",
            "must not be empty",
        ),
        (
            {"transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "a:date"},
            "transforms.c.spec",
            "'date' is not a type Cast casts to",
        ),
        (
            {
                "transforms": "c",
                "transforms.c.type": "Cast$Value",
                "transforms.c.spec": "int32,a:string",
            },
            "transforms.c.spec",
            "must be the only one in spec",
        ),
        (
            {"transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "a:b:int8"},
            "transforms.c.spec",
            "invalid cast 'a:b:int8'",
        ),
        (
            {
                "transforms": "c",
                "transforms.c.type": "Cast$Key",
                "transforms.c.replace.null.with.default": "yes",
            },
            "transforms.c.replace.null.with.default",
            "is not true or false",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "ExtractField$Value",
                "transforms.t.field": "`a.b",
                "transforms.t.field.syntax.version": "V2",
            },
            "transforms.t.field",
            "incomplete backtick pair",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "ExtractField$Key",
                "transforms.t.field": "a",
                "transforms.t.field.syntax.version": "V3",
            },
            "transforms.t.field.syntax.version",
            "is not V1 or V2",
        ),
        (
            {"transforms": "t", "transforms.t.type": "HoistField$Value"},
            "transforms.t.field",
            "is required",
        ),
        (
            {"transforms": "t", "transforms.t.type": "ValueToKey"},
            "transforms.t.fields",
            "is required",
        ),
        (
            {"transforms": "t", "transforms.t.type": "InsertHeader", "transforms.t.header": "h"},
            "transforms.t.value.literal",
            "is required",
        ),
        (
            {"transforms": "t", "transforms.t.type": "TimestampConverter$Value"},
            "transforms.t.target.type",
            "is required",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "TimestampConverter$Value",
                "transforms.t.target.type": "date",
            },
            "transforms.t.target.type",
            "is not one of string, unix, Date, Time, Timestamp",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "TimestampConverter$Key",
                "transforms.t.target.type": "string",
            },
            "transforms.t.format",
            "target.type is string but no format is given",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "TimestampConverter$Value",
                "transforms.t.target.type": "unix",
                "transforms.t.format": "yyyy-ww",
            },
            "transforms.t.format",
            "pattern letter 'w' in 'yyyy-ww' is not one connectd reads or writes",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "TimestampConverter$Value",
                "transforms.t.target.type": "unix",
                "transforms.t.format": "yyyy 'open",
            },
            "transforms.t.format",
            "unterminated quote",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "TimestampConverter$Value",
                "transforms.t.target.type": "unix",
                "transforms.t.unix.precision": "minutes",
            },
            "transforms.t.unix.precision",
            "is not one of seconds, milliseconds",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "HeaderFrom$Value",
                "transforms.t.fields": "a,b",
                "transforms.t.headers": "x",
                "transforms.t.operation": "copy",
            },
            "transforms.t.headers",
            "names 1 header(s) for 2 field(s)",
        ),
        (
            {
                "transforms": "t",
                "transforms.t.type": "HeaderFrom$Key",
                "transforms.t.fields": "a",
                "transforms.t.headers": "x",
                "transforms.t.operation": "Move",
            },
            "transforms.t.operation",
            "is not one of move, copy",
        ),
    ],
)
def test_each_refusal_names_its_key(config: dict[str, str], key: str, why: str) -> None:
    found = errors(config)
    assert key in found and why in found[key], found


def test_field_transforms_get_connects_defaults() -> None:
    config, warnings = parse_connector(
        {
            **BASE,
            "transforms": "m,c",
            "transforms.m.type": "MaskField$Value",
            "transforms.m.fields": "ssn",
            "transforms.c.type": "org.apache.kafka.connect.transforms.Cast$Key",
            "transforms.c.spec": "INT32",
        }
    )
    assert warnings == []
    mask, cast = config.transform_chain.transforms
    assert (mask.cls, dict(mask.config)) == (
        tf.MASK_FIELD + "$Value",
        {"fields": "ssn", "replace.null.with.default": "true"},
    )
    assert cast.cls == tf.CAST + "$Key" and tf.side(cast.cls) == "key"


def test_an_empty_header_literal_is_a_value_as_in_connect() -> None:
    config, _ = parse_connector(
        {
            **BASE,
            "transforms": "i",
            "transforms.i.type": "InsertHeader",
            "transforms.i.header": "h",
            "transforms.i.value.literal": "",
        }
    )
    (spec,) = config.transform_chain.transforms
    assert spec.config == {"header": "h", "value.literal": ""}


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("a.b", ("a", "b")),
        ("`a.b`.c", ("a.b", "c")),
        ("a.", ("a", "")),
        ("x", ("x",)),
        ("`x`", ("x",)),
    ],
)
def test_v2_field_paths_split_as_connect_splits_them(path: str, steps: tuple[str, ...]) -> None:
    assert tf.field_path(path, "V2") == steps
    assert tf.field_path(path, "V1") == (path,)


def test_unused_settings_and_a_lone_negate_are_warnings() -> None:
    _, warnings = parse_connector(
        {
            **BASE,
            "transforms": "f",
            "transforms.f.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.f.negate": "true",
            "transforms.f.extra": "1",
            "predicates": "p",
            "predicates.p.type": "RecordIsTombstone",
            "predicates.p.pattern": "x",
        }
    )
    assert {w.key for w in warnings} == {
        "transforms.f.negate",
        "transforms.f.extra",
        "predicates.p.pattern",
    }
