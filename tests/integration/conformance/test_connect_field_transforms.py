"""InsertField, ReplaceField, MaskField and Cast against Kafka Connect 4.1's own classes (issue 30).

The same JSON records go through Connect's transforms (``Harness.java``, each key and value read
by Connect's ``JsonConverter`` with ``schemas.enable=false``, as a sink worker reads them) and
through connectd's chain, in both forms connectd holds a JSON value in:

- ``text``: ``JsonConverter``'s default ``mode=text`` (the value as JSON text), every record;
- ``columns``: ``mode=infer`` (each top-level field a column), for the records whose values are
  objects of one shape (the converter refuses the others before any transform sees them). A
  null field and an absent one are one thing in this form, so null fields are left out of both
  sides before comparing.

What comes out must be the same record for record: dropped, refused (Connect's
``DataException``, with its message), or kept with every field equal (a float32 compares as
Connect prints it).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from support.connect_jars import chain_of, connect_libs, harness_records, raw_batch, run_harness
from support.connect_jars import one_transform as one

from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.transforms import apply
from daemon.connectors.transforms.java import float32

pytestmark = pytest.mark.integration

_SHAPE = (
    '{"id":%d,"name":"%s","price":%s,"ok":%s,"count":"%s","tags":["a"],'
    '"addr":{"city":"x","geo":{"lat":1.5,"n":null,"up":{"z":[1]}}},"gone":null,'
    '"at":%d,"when":"%s"}'
)
#: Objects of one shape: every form takes them.
SHAPED = [
    (
        '{"k":1}',
        _SHAPE % (1, "ann", "2.5", "true", "12", 1_700_000_000_123, "2024-03-05 14:07:09.123"),
    ),
    ('"plain"', _SHAPE % (-7, "", "-0.5", "false", "-3", -86_400_001, "1969-12-31 23:59:59.999")),
    (None, None),
    ('{"k":2}', _SHAPE % (300, "bob", "1e10", "true", "x1", 0, "2024-13-40 25:61:61.1")),
    (
        '{"k":3}',
        _SHAPE % (2**40 + 5, "c\u00e9", "0.001", "false", "99999", 951_782_400_000, "not a date"),
    ),
    (
        '{"k":4}',
        _SHAPE
        % (
            0,
            "d",
            "123456789.125",
            "true",
            " 7",
            4_102_444_799_999,
            "2000-02-29 00:00:00.000 tail",
        ),
    ),
    ('{"k":5}', _SHAPE % (-129, "e", "1.5e-7", "false", "true", 1_234, "2024-1-2 3:4:5.6")),
]
#: Values no columns form holds: scalars, arrays, a string, a number.
LOOSE = [
    ('"k"', "42"),
    ('"k"', '"12"'),
    ('"k"', '"abc"'),
    ("7", "[1,2]"),
    ('"k"', "true"),
    ('"k"', "1.75"),
    ('"k"', '{"only":"x"}'),
]


def chains() -> Iterator[tuple[str, dict[str, str]]]:
    for side in ("Value", "Key"):
        insert = f"InsertField${side}"
        yield (
            f"insert-all-{side}",
            one(
                insert,
                topic_field="t",
                partition_field="p!",
                offset_field="o?",
                timestamp_field="ts",
                static_field="s",
                static_value="v",
            ),
        )
        yield f"insert-over-{side}", one(insert, topic_field="name")
        yield f"replace-exclude-{side}", one(f"ReplaceField${side}", exclude="name,ok,nope")
        yield f"mask-{side}", one(f"MaskField${side}", fields="name,id,price,ok,tags,addr,nope")
        yield f"cast-{side}", one(f"Cast${side}", spec="id:int8,price:int32,ok:string,name:boolean")
    replace = "org.apache.kafka.connect.transforms.ReplaceField$Value"
    yield "replace-include", one(replace, include="id,name,price,nope")
    yield "replace-renames", one(replace, renames="id:ident,name:who")
    yield "replace-all", one(replace, exclude="ok", include="id,ok,name", renames="name:n,id:i")
    yield "replace-onto-kept", one(replace, exclude="price", renames="id:price")
    mask = "MaskField$Value"
    yield "mask-text", one(mask, fields="name", replacement="***")
    yield "mask-number", one(mask, fields="id,price", replacement="42")
    yield "mask-number-decimal", one(mask, fields="id,price", replacement="1.9")
    yield "mask-number-bad", one(mask, fields="id", replacement="abc")
    yield "mask-bool-replaced", one(mask, fields="ok", replacement="x")
    yield "mask-nested-replaced", one(mask, fields="addr", replacement="x")
    cast = "Cast$Value"
    for target in ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string"):
        yield f"cast-all-{target}", one(cast, spec=f"id:{target},price:{target},ok:{target}")
        yield f"cast-count-{target}", one(cast, spec=f"count:{target}")
    yield "cast-nested", one(cast, spec="addr:string")
    for side in ("Value", "Key"):
        yield f"extract-{side}", one(f"ExtractField${side}", field="k" if side == "Key" else "id")
        yield f"hoist-{side}", one(f"HoistField${side}", field="wrapped")
        yield f"flatten-{side}", one(f"Flatten${side}")
    extract = "ExtractField$Value"
    yield "extract-nested-map", one(extract, field="addr")
    yield "extract-absent", one(extract, field="nope")
    yield "extract-v1-dotted", one(extract, field="addr.city")
    yield "extract-v2-path", one(extract, field="addr.geo.lat", field_syntax_version="V2")
    yield "extract-v2-through-scalar", one(extract, field="name.x", field_syntax_version="v2")
    yield "extract-v2-top", one(extract, field="price", field_syntax_version="V2")
    yield "flatten-delimiter", one("Flatten$Value", delimiter="_")
    stamp = "TimestampConverter$Value"
    iso = "yyyy-MM-dd HH:mm:ss.SSS"
    for target in ("string", "unix", "Date", "Time", "Timestamp"):
        yield f"ts-unix-to-{target}", one(stamp, field="at", target_type=target, format=iso)
        yield f"ts-string-to-{target}", one(stamp, field="when", target_type=target, format=iso)
    for precision in ("seconds", "microseconds", "nanoseconds"):
        yield (
            f"ts-unix-{precision}",
            one(stamp, field="at", target_type="unix", unix_precision=precision),
        )
        yield (
            f"ts-{precision}-to-string",
            one(stamp, field="id", target_type="string", format=iso, unix_precision=precision),
        )
    yield "ts-whole-value", one(stamp, target_type="Timestamp", format="yyyy")
    yield "ts-key", one("TimestampConverter$Key", target_type="unix", format="yyyy")
    for pattern in (
        "yyyyMMddHHmmssSSS",
        "EEE, d MMM yyyy HH:mm:ss Z",
        "EEEE MMMM dd yy hh:mm a z",
        "yyyy-MM-dd'T'HH:mm:ss.SSSX",
        "D 'day of' y, k:K:s, u",
        "'o''clock' H",
    ):
        yield (
            f"ts-round-trip-{pattern}",
            {
                "transforms": "a,b",
                "transforms.a.type": stamp,
                "transforms.a.field": "at",
                "transforms.a.target.type": "string",
                "transforms.a.format": pattern,
                "transforms.b.type": stamp,
                "transforms.b.field": "at",
                "transforms.b.target.type": "unix",
                "transforms.b.format": pattern,
            },
        )
        yield f"ts-format-{pattern}", one(stamp, field="at", target_type="string", format=pattern)
    yield "value-to-key", one("ValueToKey", fields="id,name,nope")
    regex = "org.apache.kafka.connect.transforms.RegexRouter"
    yield "regex-router", one(regex, regex="(.*)rs", replacement="$1-routed")
    yield "regex-router-named", one(regex, regex="(?<first>p)(.*)", replacement="${first}X$2$0")
    yield "regex-router-escapes", one(regex, regex="orders", replacement="a\\$b\\\\c")
    yield "regex-router-partial", one(regex, regex="order", replacement="no")
    yield "timestamp-router", one("TimestampRouter")
    yield (
        "timestamp-router-format",
        one(
            "TimestampRouter",
            topic_format="${topic}_${timestamp}_${topic}",
            timestamp_format="yyyy-MM HH",
        ),
    )
    yield (
        "route-then-match",
        {
            "transforms": "r,ins,drop",
            "transforms.r.type": "RegexRouter",
            "transforms.r.regex": "people",
            "transforms.r.replacement": "humans",
            "transforms.ins.type": "InsertField$Value",
            "transforms.ins.topic.field": "topic",
            "transforms.drop.type": "Filter",
            "transforms.drop.predicate": "h",
            "predicates": "h",
            "predicates.h.type": "TopicNameMatches",
            "predicates.h.pattern": "(?<x>h)umans",
        },
    )
    for op in ("copy", "move"):
        yield (
            f"header-from-{op}",
            one(
                "HeaderFrom$Value",
                fields="name,addr,price,tags,nope,ok",
                headers="a,b,c,d,e,f",
                operation=op,
            ),
        )
        yield f"header-from-key-{op}", one("HeaderFrom$Key", fields="k", headers="kh", operation=op)
    yield (
        "header-from-where",
        {
            "transforms": "h",
            "transforms.h.type": "HeaderFrom$Value",
            "transforms.h.fields": "id,count",
            "transforms.h.headers": "id,count",
            "transforms.h.operation": "move",
            "transforms.h.predicate": "o",
            "predicates": "o",
            "predicates.o.type": "TopicNameMatches",
            "predicates.o.pattern": "orders",
        },
    )
    yield "insert-header", one("InsertHeader", header="h", value_literal="hello")
    yield "insert-header-number", one("InsertHeader", header="n", value_literal="42")
    yield (
        "flatten-then-rename",
        {
            "transforms": "f,r,c",
            "transforms.f.type": "Flatten$Value",
            "transforms.r.type": "ReplaceField$Value",
            "transforms.r.renames": "addr.city:city",
            "transforms.r.exclude": "addr.geo.up.z",
            "transforms.c.type": "Cast$Value",
            "transforms.c.spec": "addr.geo.lat:int32",
        },
    )
    yield (
        "reshape-where",
        {
            "transforms": "h,e,x",
            "transforms.h.type": "HoistField$Value",
            "transforms.h.field": "w",
            "transforms.h.predicate": "o",
            "transforms.e.type": "ExtractField$Value",
            "transforms.e.field": "w",
            "transforms.e.predicate": "o",
            "transforms.x.type": "ExtractField$Value",
            "transforms.x.field": "addr",
            "transforms.x.predicate": "o",
            "transforms.x.negate": "true",
            "predicates": "o",
            "predicates.o.type": "TopicNameMatches",
            "predicates.o.pattern": "orders",
        },
    )
    yield (
        "hoist-then-flatten",
        {
            "transforms": "h,f",
            "transforms.h.type": "HoistField$Value",
            "transforms.h.field": "w",
            "transforms.f.type": "Flatten$Value",
            "transforms.f.delimiter": "/",
        },
    )
    yield "cast-whole", one(cast, spec="int64")
    for target in ("int32", "float64", "boolean", "string"):
        yield f"cast-whole-key-{target}", one("Cast$Key", spec=target)
    yield (
        "chain-with-predicate",
        {
            "transforms": "ins,mask,cast",
            "transforms.ins.type": "InsertField$Value",
            "transforms.ins.offset.field": "off",
            "transforms.ins.predicate": "o",
            "transforms.mask.type": "MaskField$Value",
            "transforms.mask.fields": "name",
            "transforms.mask.predicate": "o",
            "transforms.mask.negate": "true",
            "transforms.cast.type": "Cast$Value",
            "transforms.cast.spec": "id:int16",
            "transforms.cast.predicate": "o",
            "predicates": "o",
            "predicates.o.type": "TopicNameMatches",
            "predicates.o.pattern": "orders",
        },
    )


CHAINS = dict(chains())
FORMS = {"text": harness_records(SHAPED + LOOSE), "columns": harness_records(SHAPED)}


def connectd_output(config: dict[str, str], form: str) -> tuple[list[dict[str, Any] | None], bool]:
    """The records as connectd's chain leaves them, in the harness's form, and whether their
    values ended in columns (where a null field and an absent one are one)."""
    chain = chain_of(config)
    recs = FORMS[form]
    raw = raw_batch(recs)
    options = {"schemas.enable": "false"}
    value_options = options | ({"mode": "infer"} if form == "columns" else {})
    converted = convert_poll(
        raw,
        make_converter("json", options, is_key=True),
        make_converter("json", value_options, is_key=False),
    )
    assert not converted.bad, converted.bad
    done = apply(chain, converted.batch)
    kept = {r.offset: r for r in done.batch.records()}
    refused = {f.offset: f.message for f in done.failures}
    out: list[dict[str, Any] | None] = []
    for r in recs:
        got = kept.get(r["offset"])
        if r["offset"] in refused:
            out.append({"error": "DataException: " + refused[r["offset"]]})
        elif got is None:
            out.append(None)
        else:
            out.append(
                {
                    "topic": got.topic,
                    "partition": got.partition,
                    "offset": got.offset,
                    "key": got.key,
                    "value": got.value,
                    "headers": [[k, None if v is None else v.decode()] for k, v in got.headers],
                }
            )
    return out, done.batch.value_columns is not None


@pytest.fixture(scope="module")
def connect() -> dict[tuple[str, str], list[dict[str, Any] | None]]:
    """Every chain's output from Connect's own classes, for each form's records."""
    out = {}
    for form, recs in FORMS.items():
        results = run_harness(connect_libs(), [(c, recs) for c in CHAINS.values()], "json")
        out.update({(case, form): r for case, r in zip(CHAINS, results, strict=True)})
    return out


def _maps(headers: list[list[Any]]) -> list[list[Any]]:
    return [
        [k, json.loads(v) if isinstance(v, str) and v.startswith("{") else v] for k, v in headers
    ]


def _millis(value: Any) -> Any:
    """A date, time or timestamp as the epoch milliseconds Jackson writes for a Date."""
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1000) if value.tzinfo else value
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days * 86_400_000
    if isinstance(value, dt.time):
        return (
            (value.hour * 60 + value.minute) * 60 + value.second
        ) * 1000 + value.microsecond // 1000
    return value


def _same(a: Any, b: Any, *, nulls: bool) -> bool:
    """Equal as JSON, floats as float32 where one side is one; null fields dropped first
    unless ``nulls``."""
    if isinstance(a, dict) and isinstance(b, dict):
        if not nulls:
            a = {k: v for k, v in a.items() if v is not None}
            b = {k: v for k, v in b.items() if v is not None}
        return a.keys() == b.keys() and all(_same(a[k], b[k], nulls=nulls) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, nulls=nulls) for x, y in zip(a, b, strict=True))
    a, b = _millis(a), _millis(b)
    if isinstance(a, float) and isinstance(b, float) and not isinstance(a, bool):
        return a == b or float32(a) == float32(b) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("case", list(CHAINS))
def test_the_transform_does_to_each_record_what_connect_does(
    connect: dict[tuple[str, str], list[dict[str, Any] | None]], case: str, form: str
) -> None:
    expected = connect[(case, form)]
    got, in_columns = connectd_output(CHAINS[case], form)
    nulls = form == "text" and not in_columns  # columns hold no absent field, only nulls
    for want, have, record in zip(expected, got, FORMS[form], strict=True):
        if want is not None and have is not None and "headers" in want:
            # A map's text in a header: Connect lists a HashMap's keys in hash order, connectd
            # in the order they came (a documented difference), so maps compare as maps.
            want["headers"], have["headers"] = _maps(want["headers"]), _maps(have["headers"])
        assert _same(want, have, nulls=nulls), (
            f"{case} ({form}) on {json.dumps(record)}:\n Connect: {want}\n connectd: {have}"
        )
