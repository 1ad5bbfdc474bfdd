"""The column-by-column Avro reader against fastavro record by record (the reference): the same
arrays for random values of every type it reads, and for bytes it does not expect it steps aside
(``decode`` returns None) so that fastavro finds the records at fault."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import io
import json
import random
from typing import Any

import fastavro
import pytest

from daemon.connectors.converters.registry import columnar
from daemon.connectors.converters.registry.avro import AvroType

UTC = datetime.UTC

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "All",
    "namespace": "t",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "by", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F3", "size": 3}},
        {"name": "os", "type": ["null", "string"]},
        {"name": "so", "type": ["long", "null"]},
        {
            "name": "dec",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3},
        },
        {
            "name": "fdec",
            "type": {
                "type": "fixed",
                "name": "D8",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {
            "name": "sub",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Sub",
                    "fields": [
                        {"name": "x", "type": "int"},
                        {"name": "y", "type": ["null", "E"]},
                    ],
                },
            ],
        },
        {"name": "again", "type": "Sub"},
    ],
}


def _value(rng: random.Random) -> dict[str, Any]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.3 else v

    big = rng.choice([0, 1, -1, 2**31 - 1, -(2**31), 2**62, -(2**63), 2**63 - 1])
    return {
        "b": rng.random() < 0.5,
        "i": rng.choice([0, -1, 63, -64, 64, 2**31 - 1, -(2**31), rng.randint(-9999, 9999)]),
        "l": rng.choice([big, rng.randint(-(2**40), 2**40)]),
        "f": rng.choice([0.0, -1.5, 3.25, float("inf")]),
        "d": rng.choice([0.0, -0.0, 1e300, -2.5e-300, rng.random()]),
        "s": rng.choice(["", "a", "héllo ✓", "x" * rng.randint(0, 300)]),
        "by": bytes(rng.randrange(256) for _ in range(rng.randint(0, 20))),
        "n": None,
        "e": rng.choice("ABC"),
        "fx": bytes(rng.randrange(256) for _ in range(3)),
        "os": maybe("opt"),
        "so": maybe(rng.randint(-5, 5)),
        "dec": decimal.Decimal(rng.randint(-(10**17), 10**17)) / 1000,
        "fdec": decimal.Decimal(rng.randint(-(10**16), 10**16)) / 100,
        "day": datetime.date(1900, 1, 1) + datetime.timedelta(days=rng.randint(0, 80000)),
        "ts": datetime.datetime(1960, 1, 1, tzinfo=UTC)
        + datetime.timedelta(microseconds=rng.randint(0, 4 * 10**15)),
        "uid": "12345678-1234-5678-1234-567812345678",
        "sub": maybe({"x": rng.randint(-100, 100), "y": maybe(rng.choice("AB"))}),
        "again": {"x": 1, "y": None},
    }


def _bodies(values: list[dict[str, Any]]) -> list[bytes]:
    parsed = fastavro.parse_schema(SCHEMA)
    out = []
    for v in values:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, v)
        out.append(buf.getvalue())
    return out


def _both(bodies: list[bytes]) -> tuple[Any, Any]:
    avro = AvroType.of(json.dumps(SCHEMA))
    assert avro.columns is not None, "the schema has a column plan"
    reference = dataclasses.replace(avro, columns=None)
    return avro.decode(bodies), reference.decode(bodies)


@pytest.mark.parametrize("seed", range(5))
def test_random_values_read_the_same_as_fastavro(seed: int) -> None:
    rng = random.Random(seed)
    bodies = _bodies([_value(rng) for _ in range(rng.choice([1, 7, 300]))])
    avro = AvroType.of(json.dumps(SCHEMA))
    assert avro.columns is not None
    assert columnar.decode(avro.columns, columnar.Spans.of(bodies)) is not None  # no fallback
    (fast, fast_errors), (ref, ref_errors) = _both(bodies)
    assert not fast_errors and not ref_errors
    assert fast.type == ref.type
    assert fast.to_pylist() == ref.to_pylist()


def _corrupt(body: bytes, how: str) -> bytes:
    if how == "truncated":
        return body[: len(body) // 2]
    if how == "trailing":
        return body + b"\x00"
    if how == "bad boolean":
        return b"\x07" + body[1:]
    if how == "long varint":
        return body[:1] + b"\xff" * 11 + body[1:]
    if how == "empty":
        return b""
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "trailing", "bad boolean", "long varint", "empty"])
def test_unexpected_bytes_fall_back_to_fastavro(how: str) -> None:
    rng = random.Random(99)
    bodies = _bodies([_value(rng) for _ in range(20)])
    bodies[5] = _corrupt(bodies[5], how)
    avro = AvroType.of(json.dumps(SCHEMA))
    assert avro.columns is not None
    assert columnar.decode(avro.columns, columnar.Spans.of(bodies)) is None
    (fast, fast_errors), (ref, ref_errors) = _both(bodies)
    assert fast.to_pylist() == ref.to_pylist()
    assert sorted(fast_errors) == sorted(ref_errors)


def test_an_enum_index_or_utf8_the_column_reader_cannot_take() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
            {"name": "s", "type": "string"},
        ],
    }
    avro = AvroType.of(json.dumps(schema))
    assert avro.columns is not None
    good = b"\x00\x04ok"  # enum index 0, a string of 2 bytes (zigzag varints)
    for bad in (b"\x02\x04ok", b"\x00\x04\xff\xfe"):  # index 1 of one symbol; not UTF-8
        assert columnar.decode(avro.columns, columnar.Spans.of([good, bad])) is None
        array, errors = avro.decode([good, bad])
        assert list(errors) == [1] and array.to_pylist() == [{"e": "A", "s": "ok"}, None]


def test_arrays_maps_and_general_unions_have_no_column_plan() -> None:
    for field_type in (
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        ["null", "int", "string"],
    ):
        schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": field_type}]}
        assert AvroType.of(json.dumps(schema)).columns is None


def test_a_decimal_wider_than_its_precision_is_errant() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {
                "name": "d",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2},
            }
        ],
    }
    # Unscaled 12345 (123.45: five digits) and 1234 (12.34), as big-endian two's complement.
    bodies = [b"\x04\x30\x39", b"\x04\x04\xd2"]
    avro = AvroType.of(json.dumps(schema))
    assert avro.columns is not None
    assert columnar.decode(avro.columns, columnar.Spans.of(bodies)) is None
    array, errors = avro.decode(bodies)
    assert list(errors) == [0]
    assert array.to_pylist() == [None, {"d": decimal.Decimal("12.34")}]
