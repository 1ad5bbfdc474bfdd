"""Converters: Connect's String, JSON and ByteArray converters over whole polls."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from support.converters import PollConverter

from daemon.connectors import (
    ByteArrayConverter,
    JsonConverter,
    OffsetRange,
    RawBatch,
    StringConverter,
    converter_class,
    list_converters,
    make_converter,
)
from daemon.errors import ConfigError


def raw(
    values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None, **kw: Any
) -> RawBatch:
    n = len(values)
    return RawBatch(
        kw.get("topics", ["t"] * n),
        kw.get("partitions", [0] * n),
        kw.get("offsets", list(range(n))),
        kw.get("timestamps", [1_700_000_000_000 + i for i in range(n)]),
        list(keys) if keys is not None else [None] * n,
        list(values),
        kw.get("headers"),
        kw.get("timestamp_types"),
    )


def batch_converter(value: str = "string", key: str = "string", **options: str) -> PollConverter:
    return PollConverter(
        make_converter(key, {}, is_key=True), make_converter(value, options, is_key=False)
    )


def js(*docs: Any) -> list[bytes]:
    return [json.dumps(d).encode() for d in docs]


# --- the table's shape --------------------------------------------------------------------


def test_table_columns_and_types() -> None:
    r = batch_converter().convert(
        raw([b"a", None], keys=[b"k", None], headers=[[("h", b"1"), ("n", None)], []])
    )
    t = r.batch.table
    assert t.column_names == [
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
        "key",
        "value",
        "headers",
    ]
    assert t.schema.field("kafka_topic").type == pa.string()
    assert t.schema.field("kafka_partition").type == pa.int32()
    assert t.schema.field("kafka_offset").type == pa.int64()
    assert t.schema.field("kafka_timestamp").type == pa.timestamp("ms", tz="UTC")
    assert t.schema.field("headers").type == pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())])
    )
    assert t.column("value").to_pylist() == ["a", None]  # tombstone kept as null
    assert t.column("headers").to_pylist()[0] == [
        {"key": "h", "value": b"1"},
        {"key": "n", "value": None},
    ]
    assert r.bad == []


def test_negative_or_missing_timestamp_is_null() -> None:
    t = batch_converter().convert(raw([b"a", b"b", b"c"], timestamps=[5, -1, None])).batch.table
    stamps = t.column("kafka_timestamp").cast(pa.int64()).to_pylist()
    assert stamps == [5, None, None]


def test_ranges_cover_every_record_including_bad_ones() -> None:
    r = batch_converter("json", **{"schemas.enable": "false"}).convert(
        raw([b"1", b"{bad", b"2"], partitions=[0, 1, 1], offsets=[7, 3, 9])
    )
    assert [b.offset for b in r.bad] == [3]
    assert r.batch.ranges == (OffsetRange("t", 0, 7, 8), OffsetRange("t", 1, 3, 10))
    assert r.batch.table.column("kafka_offset").to_pylist() == [7, 9]


def test_empty_batch() -> None:
    r = batch_converter("json", **{"schemas.enable": "false"}).convert(raw([]))
    assert r.batch.table.num_rows == 0 and r.batch.ranges == () and r.bad == []


def test_rawbatch_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        RawBatch(["t"], [0], [0, 1], [0], [None], [None])


def test_rawbatch_from_consumer_records() -> None:
    class Rec:
        def __init__(self, offset: int) -> None:
            self.topic, self.partition, self.offset = "t", 2, offset
            self.timestamp, self.timestamp_type = 10 + offset, 1
            self.key, self.value, self.headers = b"k", b"v%d" % offset, [("h", b"x")]

    b = RawBatch.from_records([Rec(0), Rec(1)])
    r = batch_converter().convert(b)
    assert r.batch.table.column("value").to_pylist() == ["v0", "v1"]
    assert r.batch.timestamp_types is not None
    assert r.batch.timestamp_types.to_pylist() == [1, 1]


# --- String and ByteArray ----------------------------------------------------------------


def test_bytearray_keeps_bytes() -> None:
    r = batch_converter("bytearray", key="bytearray").convert(
        raw([b"\xff\x00", None], keys=[b"\x01", None])
    )
    assert r.batch.table.column("value").to_pylist() == [b"\xff\x00", None]
    assert r.batch.table.schema.field("key").type == pa.binary()


def test_string_bad_utf8_is_replaced_as_connect_does() -> None:
    # Connect's StringConverter is `new String(bytes, UTF_8)`: malformed bytes become U+FFFD
    # and the record is delivered, neither failed nor dead-lettered.
    r = batch_converter().convert(
        raw([b"ok", b"bad \xc3\x28", b"\xff\xfe", b"fine"], keys=[b"1", b"\xff2", b"3", None])
    )
    assert r.bad == []
    assert r.batch.table.column("value").to_pylist() == [
        "ok",
        "bad \ufffd(",
        "\ufffd\ufffd",
        "fine",
    ]
    assert r.batch.table.column("key").to_pylist() == ["1", "\ufffd2", "3", None]
    assert r.batch.table.column("kafka_offset").to_pylist() == [0, 1, 2, 3]


def test_string_other_encoding_replaces_too() -> None:
    conv = make_converter("string", {"encoding": "UTF-16-LE"}, is_key=False)
    out = conv.convert([b"a\x00\x00\xd8", b"b\x00"])  # a lone high surrogate, then "b"
    assert out.errors == {}
    assert out.columns["value"].to_pylist() == ["a\ufffd", "b"]


def test_bad_key_is_reported_with_key_stage() -> None:
    r = batch_converter(key="json").convert(raw([b"v"], keys=[b"{bad"]))
    assert r.bad[0].stage == "key" and r.batch.table.num_rows == 0


def test_json_bad_utf8_stays_a_bad_record() -> None:
    # JSON is parsed, not just decoded: invalid UTF-8 there is a malformed document, as in
    # Connect's JsonConverter (DataException), so it is reported rather than replaced.
    r = batch_converter("json", **{"schemas.enable": "false"}).convert(raw([b'"\xff"', b'"ok"']))
    assert [b.offset for b in r.bad] == [0]
    assert r.batch.table.num_rows == 1


def test_string_other_encoding() -> None:
    conv = PollConverter(
        make_converter("string", {}, is_key=True),
        make_converter("StringConverter", {"encoding": "ISO-8859-1"}, is_key=False),
    )
    assert conv.convert(raw(["é".encode("latin-1")])).batch.table.column("value").to_pylist() == [
        "é"
    ]
    with pytest.raises(ConfigError, match="unknown encoding"):
        make_converter("string", {"encoding": "klingon"}, is_key=False)


# --- JSON --------------------------------------------------------------------------------


def test_json_schemas_enable_is_the_default_and_requires_the_envelope() -> None:
    envelope = {"schema": {"type": "string", "optional": False}, "payload": "hi"}
    r = batch_converter("json").convert(raw(js(envelope, {"plain": 1})))
    assert r.batch.table.column("value").to_pylist() == ["hi"]  # typed by the schema
    (bad,) = r.bad
    assert bad.offset == 1 and bad.exception_class == "daemon.errors.ConversionError"
    assert "schemas.enable=false" in bad.error


def test_json_envelope_null_payload_for_required_schema_is_bad() -> None:
    docs = js(
        {"schema": {"type": "string", "optional": False}, "payload": None},
        {"schema": {"type": "string", "optional": True}, "payload": None},
    )
    r = batch_converter("json").convert(raw(docs))
    assert [b.offset for b in r.bad] == [0]
    assert "Invalid null value for required STRING field" in r.bad[0].error
    assert r.batch.table.column("value").to_pylist() == [None]


@pytest.mark.parametrize("schemas", ["true", "false"])
def test_json_text_mode_keeps_json_text_and_reports_invalid(schemas: str) -> None:
    docs: list[Any] = [{"a": 1}, [1, 2], "s", 3.5, None]
    if schemas == "true":
        docs = [{"schema": None, "payload": d} for d in docs]
    values: list[bytes | None] = [*js(*docs), b"{nope", b"NaN", b"", None]
    r = batch_converter("json", **{"schemas.enable": schemas, "mode": "text"}).convert(raw(values))
    assert r.batch.json_columns == frozenset({"value"})
    texts = r.batch.table.column("value").to_pylist()
    assert [json.loads(t) if t is not None else None for t in texts] == [
        {"a": 1},
        [1, 2],
        "s",
        3.5,
        None,
        None,
    ]
    assert [b.offset for b in r.bad] == [5, 6, 7]
    assert {b.exception_class for b in r.bad} <= {
        "json.decoder.JSONDecodeError",
        "builtins.ValueError",
        "daemon.errors.ConversionError",
    }
    records = list(r.batch.records())
    assert records[1].value == [1, 2] and records[4].value is None and records[5].value is None


def test_json_fields_mode_projects_and_types() -> None:
    conv = batch_converter(
        "json", **{"schemas.enable": "false", "fields": "id:int64, name, score:double, tags:json"}
    )
    r = conv.convert(
        raw([*js({"id": 1, "name": "a", "score": 2, "tags": [1], "extra": True}, {"id": 2}), None])
    )
    t = r.batch.table
    assert t.column_names[4:] == ["key", "id", "score", "tags", "name", "headers"]
    assert t.column("id").to_pylist() == [1, 2, None]
    assert t.column("score").to_pylist() == [2.0, None, None]  # an int in a double column is fine
    assert t.column("tags").to_pylist() == ["[1]", None, None]
    assert r.batch.value_columns == {"id": "id", "score": "score", "tags": "tags", "name": "name"}
    values = [rec.value for rec in r.batch.records()]
    assert values[0] == {"id": 1, "score": 2.0, "tags": [1], "name": "a"}
    assert values[2] is None  # a tombstone stays a null value


def test_json_fields_mode_needs_fields_and_values() -> None:
    with pytest.raises(ConfigError, match="needs a list"):
        make_converter("json", {"mode": "fields"}, is_key=False)
    with pytest.raises(ConfigError, match="text mode only"):
        make_converter("json", {"fields": "a"}, is_key=True)
    with pytest.raises(ConfigError, match="unknown type"):
        make_converter("json", {"fields": "a:decimal"}, is_key=False)
    with pytest.raises(ConfigError, match="not one of"):
        make_converter("json", {"mode": "guess"}, is_key=False)
    with pytest.raises(ConfigError, match="true or false"):
        make_converter("json", {"schemas.enable": "yes"}, is_key=False)


def test_json_infer_first_seen_type_wins_and_conflicts_are_bad_records() -> None:
    conv = batch_converter("json", **{"schemas.enable": "false", "mode": "infer"})
    first = conv.convert(
        raw(js({"a": 1, "b": None}, {"a": "x", "c": True}, {"a": 2, "c": False}, 5))
    )
    assert first.batch.table.column_names[5:-1] == ["a", "c"]  # b: only null so far, no column
    assert first.batch.table.column("a").to_pylist() == [1, 2]
    assert [b.offset for b in first.bad] == [1, 3]
    assert "is string here but int64 was seen first" in first.bad[0].error
    assert "not an object" in first.bad[1].error
    # The schema sticks across batches: a later batch keeps a, c and adds b.
    second = conv.convert(raw(js({"b": "now"}, {"a": 1.5}), offsets=[10, 11]))
    assert second.batch.table.column_names[5:-1] == ["a", "c", "b"]
    assert second.batch.table.column("b").to_pylist() == ["now"]
    assert [b.offset for b in second.bad] == [11]


def test_json_reserved_field_names_are_prefixed() -> None:
    conv = batch_converter("json", **{"schemas.enable": "false", "mode": "infer"})
    r = conv.convert(raw(js({"key": 1, "value": 2, "kafka_offset": 3, "value_key": 4})))
    assert r.batch.value_columns == {
        "key": "value_key",
        "value": "value_value",
        "kafka_offset": "value_kafka_offset",
        "value_key": "value_value_key",
    }
    assert next(iter(r.batch.records())).value == {
        "key": 1,
        "value": 2,
        "kafka_offset": 3,
        "value_key": 4,
    }


def test_json_int_out_of_range_and_lone_surrogate_are_bad_records() -> None:
    conv = batch_converter("json", **{"schemas.enable": "false", "mode": "infer"})
    r = conv.convert(
        raw([b'{"a": 1, "s": "ok"}', b'{"a": 99999999999999999999}', b'{"s": "\\ud800"}'])
    )
    assert [b.offset for b in r.bad] == [1, 2]
    assert r.batch.table.column("a").to_pylist() == [1]


# The fast path (pyarrow.json) must give exactly what the reference path gives.
CORPUS: list[bytes | None] = [
    b'{"a": 1, "b": "x", "c": 1.5, "d": true}',
    b'{"a": 2}',
    None,
    b'{"a": 3, "b": null, "c": 2}',
    b'{"a": 4, "zzz": [1, {"q": 2}]}',
    b'{"a": "str"}',
    b'{"a": 1.5}',
    b'{"d": 1}',
    b"[1, 2]",
    b"null",
    b"true",
    b'"s"',
    b' {"a": 10}',
    b"",
    b"  ",
    b'{"a": 5}\n',
    b'{"a":\n6}',
    b'{"a": 7, "a": 8}',
    b'{"a": NaN}',
    b'{"a": -Infinity}',
    b'{"a": 2, "z": Infinity}',
    b'{"z": NaN, "a": 3}',
    b'{"b": "NaN is text"}',
    b'{"a": 1e400}',
    b'{"b": "\xff"}',
    b'{"b": "\\ud83d\\ude00 ok"}',
    b'{"a": 9} trailing',
    b'{"c": -0.0, "b": "\\u0000"}',
]


def _outcome(conv: JsonConverter, data: Sequence[bytes | None]) -> tuple[Any, ...]:
    out = conv.convert(data)
    cols = {k: v.to_pylist() for k, v in out.columns.items()}
    tomb = out.tombstones.to_pylist() if out.tombstones is not None else None
    return cols, sorted(out.errors), tomb


@pytest.mark.parametrize("mode", ["text", "fields", "infer"])
def test_json_fast_path_matches_reference_path(mode: str) -> None:
    options = {"schemas.enable": "false", "mode": mode}
    if mode == "fields":
        options["fields"] = "a:int64,b:string,c:double,d:boolean"
    # Each record alone, then shuffled groups, so the fast path sees good and bad mixtures.
    groups: list[list[bytes | None]] = [[v] for v in CORPUS] + [CORPUS[:5], CORPUS[:2], CORPUS]
    for group in groups:
        fast, slow = JsonConverter(), JsonConverter()
        for c in (fast, slow):
            c.configure(options, is_key=False)
            c.convert([b'{"a": 0, "b": "", "c": 0.5, "d": false}'])  # learn the flat schema
        slow._fast = lambda data: None  # type: ignore[method-assign]
        assert _outcome(fast, group) == _outcome(slow, group), group


def test_json_fast_path_is_used_for_flat_known_fields() -> None:
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false", "mode": "infer"}, is_key=False)
    conv.convert([b'{"a": 1}'])
    assert conv._fast([b'{"a": 2}', None, b'{"a": 3}']) is not None
    assert conv._fast([b'{"a": 2, "new": 1}']) is None  # a new field: the reference path learns it


# --- choosing converters ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
        ("StringConverter", StringConverter),
        ("string", StringConverter),
        ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
        ("json", JsonConverter),
        ("JSON", JsonConverter),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
        ("bytearray", ByteArrayConverter),
        ("daemon.connectors.converters:ByteArrayConverter", ByteArrayConverter),
    ],
)
def test_converter_names(name: str, cls: type) -> None:
    assert converter_class(name) is cls


def test_unknown_converter_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as e:
        converter_class("io.confluent.connect.thrift.ThriftConverter")
    assert "org.apache.kafka.connect.json.JsonConverter" in str(e.value)
    with pytest.raises(ConfigError, match="cannot be loaded"):
        converter_class("no.such.module:Conv")
    with pytest.raises(ConfigError, match="is not a"):
        converter_class("daemon.connectors.records:RawBatch")
    # string, JSON, byte array, five numbers, a boolean, Avro, Protobuf, JSON Schema
    assert len(list_converters()) == 12


def test_batch_converter_from_connect_config() -> None:
    conv = PollConverter.from_config(
        {
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "value.converter.fields": "id:int64",
        }
    )
    r = conv.convert(raw(js({"id": 7}), keys=[b"\x00"]))
    assert r.batch.table.column("id").to_pylist() == [7]
    assert r.batch.table.column("key").to_pylist() == [b"\x00"]


def test_json_bare_null_never_reaches_pyarrow() -> None:
    """A `null` line crashes pyarrow.json (apache/arrow#47409): it must take the Python path."""
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false"}, is_key=False)
    assert conv._fast([b'{"a": 1}', b"null"]) is None
    out = conv.convert([b'{"a": 1}', b"null"])
    assert out.columns["value"].to_pylist() == ['{"a": 1}', "null"] and out.errors == {}


def test_json_parser_python_disables_pyarrow() -> None:
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false", "parser": "python"}, is_key=False)
    conv._fast = None  # type: ignore[assignment,method-assign]  # would fail if called
    assert conv.convert([b'{"a": 1}']).columns["value"].to_pylist() == ['{"a": 1}']
    with pytest.raises(ConfigError, match="auto or python"):
        make_converter("json", {"parser": "simd"}, is_key=False)


def test_text_headers_decode_each_value_and_keep_nulls() -> None:
    from daemon.connectors.converters.batch import (
        TEXT_HEADERS_TYPE,
        header_encoding,
        headers_array,
        text_headers,
    )

    column = headers_array([[("a", b"x"), ("b", None)], [], [("c", b"\xffok")]], 3)
    text = text_headers(column, "utf-8")
    assert text.type == TEXT_HEADERS_TYPE
    assert text.to_pylist() == [
        [{"key": "a", "value": "x"}, {"key": "b", "value": None}],
        [],
        [{"key": "c", "value": "\ufffdok"}],
    ]
    latin = text_headers(headers_array([[("k", b"\xe9")]], 1), "latin-1")
    assert latin.to_pylist() == [[{"key": "k", "value": "é"}]]
    assert header_encoding(None, {}) is None and header_encoding("bytearray", {}) is None
    assert header_encoding("simple", {"converter.type": "header"}) == "utf-8"
    assert header_encoding("string", {"converter.encoding": "ISO-8859-1"}) == "iso8859-1"
    with pytest.raises(ConfigError, match=r"header\.converter\.converter\.encoding"):
        header_encoding("simple", {"converter.encoding": "latin-1"})
    with pytest.raises(ConfigError, match="unknown encoding"):
        header_encoding("string", {"converter.encoding": "nope"})


def test_header_converter_problems_name_the_key() -> None:
    from daemon.connectors.converters import converter_problems

    problems = converter_problems(
        {"header.converter": "SimpleHeaderConverter", "header.converter.schemas.enable": "true"}
    )
    assert [(p.key, p.is_error) for p in problems] == [("header.converter", True)]
    assert "header.converter.schemas.enable" in str(problems[0])
    assert converter_problems({"header.converter": "ByteArrayConverter"}) == []
    # JsonConverter takes its own settings as a header converter, not connectd's column modes.
    json_headers = {"header.converter": "JsonConverter", "header.converter.schemas.enable": "false"}
    assert converter_problems(json_headers) == []
    [problem] = converter_problems({**json_headers, "header.converter.mode": "text"})
    assert problem.key == "header.converter" and "header.converter.mode" in str(problem)


def test_boolean_converter_reads_kafkas_one_byte_and_names_what_it_refuses() -> None:
    from daemon.config.values import Converter as Kind
    from daemon.config.values import parse_converter
    from daemon.connectors.converters import make_converter

    assert parse_converter("org.apache.kafka.connect.converters.BooleanConverter") is Kind.BOOLEAN
    out = make_converter("boolean", {}, is_key=False).convert(
        [b"\x01", b"\x00", None, b"\xff", b"\x01\x00", b""]
    )
    assert out.columns["value"].type == pa.bool_()
    assert out.columns["value"].to_pylist() == [True, False, None, None, None, None]
    assert sorted(out.errors) == [3, 4, 5]
    assert str(out.errors[3]) == (
        "Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: -1"
    )
    assert str(out.errors[4]).endswith("Size of data received by BooleanDeserializer is not 1")
