"""AvroConverter without a registry process: the schemas are put in its client's cache (the
integration tests fetch them from a real registry), the bodies written by fastavro's writer in
Confluent's wire format. The registry client against a small HTTP server on loopback."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import io
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from aiohttp import web

from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.converters.registry import (
    AvroConverter,
    AvroType,
    RegistryClient,
    RegistrySettings,
    RegistryUnavailable,
    SchemaRefused,
    SchemasNeeded,
)
from daemon.connectors.converters.registry.client import Schema
from daemon.connectors.records import RawBatch
from daemon.errors import ConfigError

URL = "http://127.0.0.1:1/apis/ccompat/v7"


def _record(name: str, fields: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


V1 = _record("Row", [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}])
V2 = _record(
    "Row",
    [
        {"name": "id", "type": "long"},  # was int: its column stays int32, values that fit
        {"name": "name", "type": "string"},
        {"name": "extra", "type": ["null", "double"], "default": None},
    ],
)
CLASH = _record("Row", [{"name": "id", "type": "string"}])


def wire(schema_id: int, schema: Mapping[str, Any] | str, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(
        out, fastavro.parse_schema(schema if isinstance(schema, str) else dict(schema)), value
    )
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def converter(schemas: Mapping[int, Any], *, key: bool = False) -> AvroConverter:
    conv = make_converter("avro", {"schema.registry.url": URL}, is_key=key)
    assert isinstance(conv, AvroConverter) and conv.client is not None
    for sid, schema in schemas.items():
        text = schema if isinstance(schema, str) else json.dumps(schema)
        conv.client.schemas[sid] = Schema(sid, "AVRO", text)
    return conv


def test_record_fields_become_columns_and_a_later_version_adds_one() -> None:
    conv = converter({1: V1, 2: V2})
    first = conv.convert([wire(1, V1, {"id": 1, "name": "a"}), None])
    assert {k: str(v.type) for k, v in first.columns.items()} == {"id": "int32", "name": "string"}
    assert first.tombstones is not None and first.tombstones.to_pylist() == [False, True]
    second = conv.convert(
        [wire(2, V2, {"id": 7, "name": "b", "extra": 1.5}), wire(1, V1, {"id": 2, "name": "c"})]
    )
    # The column keeps the type it was made with: long values that fit are cast to it.
    assert second.columns["id"].type == pa.int32()
    assert second.columns["id"].to_pylist() == [7, 2]
    assert second.columns["extra"].to_pylist() == [1.5, None]
    assert second.value_columns == {"id": "id", "name": "name", "extra": "extra"}
    assert not second.errors


def _with_address(
    fields: list[dict[str, Any]], *, zip_code: bool, n: str = "Sale"
) -> dict[str, Any]:
    address: list[dict[str, Any]] = [{"name": "city", "type": "string"}]
    if zip_code:
        address.append({"name": "zip", "type": ["null", "string"], "default": None})
    record = {"type": "record", "name": "Address", "fields": address}
    return {
        "type": "record",
        "name": n,
        "fields": [
            *fields,
            {"name": "home", "type": ["null", record], "default": None},
            {"name": "past", "type": {"type": "array", "items": "Address"}, "default": []},
        ],
    }


def test_a_nested_record_that_gains_a_field_widens_its_struct_column() -> None:
    id_ = [{"name": "id", "type": "long"}]
    one, two = _with_address(id_, zip_code=False), _with_address(id_, zip_code=True)
    conv = converter({1: one, 2: two})
    first = conv.convert([wire(1, one, {"id": 1, "home": {"city": "a"}, "past": []})])
    assert str(first.columns["home"].type) == "struct<city: string>"
    later = {"id": 2, "home": {"city": "b", "zip": "9"}, "past": [{"city": "c", "zip": "8"}]}
    # Both versions in one poll, and the old one again in the next: one column type for all.
    out = conv.convert([wire(1, one, {"id": 3, "home": None, "past": []}), wire(2, two, later)])
    again = conv.convert([wire(1, one, {"id": 4, "home": {"city": "d"}, "past": [{"city": "e"}]})])
    for batch in (out, again):
        assert not batch.errors
        assert batch.columns["home"].type.names == ["city", "zip"]
        assert batch.columns["past"].type.value_type.names == ["city", "zip"]
    assert out.columns["home"].to_pylist() == [None, {"city": "b", "zip": "9"}]
    assert out.columns["past"].to_pylist() == [[], [{"city": "c", "zip": "8"}]]
    assert again.columns["home"].to_pylist() == [{"city": "d", "zip": None}]
    assert again.columns["past"].to_pylist() == [[{"city": "e", "zip": None}]]


def test_a_value_that_does_not_fit_its_column_is_errant_naming_field_schema_and_types() -> None:
    conv = converter({1: V1, 2: V2, 3: CLASH})
    conv.convert([wire(1, V1, {"id": 1, "name": "a"})])
    out = conv.convert(
        [
            wire(2, V2, {"id": 2**40, "name": "big", "extra": None}),
            wire(3, CLASH, {"id": "x"}),
            wire(1, V1, {"id": 3, "name": "ok"}),
        ]
    )
    assert sorted(out.errors) == [0, 1]
    assert "field 'id' is int64 in schema id 2 but its column is int32" in str(out.errors[0])
    assert "field 'id' is string in schema id 3 but its column is int32" in str(out.errors[1])
    assert out.columns["id"].to_pylist() == [None, None, 3]


def test_bad_wire_format_unknown_ids_and_truncated_bodies_are_errant() -> None:
    conv = converter({1: V1})
    assert conv.client is not None
    conv.client.unknown[9] = "not found (error_code 40403)"
    good = wire(1, V1, {"id": 1, "name": "abc"})
    out = conv.convert([b"{}", b"\x00\x00", wire(9, V1, {"id": 1, "name": ""}), good[:7], good])
    assert sorted(out.errors) == [0, 1, 2, 3]
    assert str(out.errors[0]).startswith("Unknown magic byte!")
    assert str(out.errors[1]).startswith("Unknown magic byte!")  # shorter than the header
    assert "schema id 9 is not in the Schema Registry" in str(out.errors[2])
    assert "the Avro payload cannot be read" in str(out.errors[3])
    assert out.columns["name"].to_pylist() == [None, None, None, None, "abc"]


def test_ids_not_cached_are_asked_for_not_guessed() -> None:
    conv = converter({1: V1})
    with pytest.raises(SchemasNeeded) as caught:
        conv.convert([wire(1, V1, {"id": 1, "name": ""}), wire(5, V1, {"id": 1, "name": ""})])
    assert caught.value.ids == {5}


def test_logical_types_nested_types_and_unions() -> None:
    schema = _record(
        "All",
        [
            {
                "name": "dec",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {
                "name": "fdec",
                "type": {
                    "type": "fixed",
                    "name": "F",
                    "size": 8,
                    "logicalType": "decimal",
                    "precision": 18,
                    "scale": 4,
                },
            },
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "tms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "tus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "lms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "lus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "uclock", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "odd", "type": {"type": "long", "logicalType": "no-such-type"}},
            {"name": "raw", "type": {"type": "fixed", "name": "Four", "size": 4}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "nested", "type": {"type": "array", "items": {"type": "map", "values": "F"}}},
            {
                "name": "pick",
                "type": ["null", "long", "string", _record("Sub", [{"name": "x", "type": "int"}])],
            },
            {"name": "again", "type": ["null", "Sub"]},
            {"name": "key", "type": "string"},
        ],
    )
    utc = datetime.UTC
    value = {
        "dec": decimal.Decimal("-12.34"),
        "fdec": decimal.Decimal("3.1416"),
        "day": datetime.date(2024, 2, 29),
        "tms": datetime.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=utc),
        "tus": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=utc),
        "lms": datetime.datetime(2024, 1, 2, 3, 4, 5, 6000),
        "lus": datetime.datetime(2024, 1, 2, 3, 4, 5, 6),
        "clock": datetime.time(1, 2, 3, 4000),
        "uclock": datetime.time(1, 2, 3, 4),
        "uid": "12345678-1234-5678-1234-567812345678",
        "odd": 42,
        "raw": b"\x00\x01\x02\x03",
        "e": "B",
        "nested": [{"a": decimal.Decimal("1.5000")}],
        "pick": {"x": 5},
        "again": {"x": 6},
        "key": "k",
    }
    conv = converter({1: schema})
    out = conv.convert(
        [
            wire(1, schema, value),
            wire(1, schema, {**value, "pick": 7}),
            wire(1, schema, {**value, "pick": "s", "again": None}),
        ]
    )
    assert not out.errors
    cols = out.columns
    types = {k: str(v.type) for k, v in cols.items()}
    assert types == {
        "dec": "decimal128(9, 2)",
        "fdec": "decimal128(18, 4)",
        "day": "date32[day]",
        "tms": "timestamp[ms, tz=UTC]",
        "tus": "timestamp[us, tz=UTC]",
        "lms": "timestamp[ms]",
        "lus": "timestamp[us]",
        "clock": "int32",
        "uclock": "int64",
        "uid": "string",
        "odd": "int64",
        "raw": "binary",
        "e": "string",
        "nested": "list<item: map<string, decimal128(18, 4)>>",
        "pick": "struct<long: int64, string: string, Sub: struct<x: int32>>",
        "again": "struct<x: int32>",
        "value_key": "string",  # "key" is a reserved column name
    }
    row = {k: v[0].as_py() for k, v in cols.items()}
    assert row["dec"] == decimal.Decimal("-12.34") and row["fdec"] == decimal.Decimal("3.1416")
    assert row["day"] == datetime.date(2024, 2, 29)
    assert row["tms"] == value["tms"] and row["tus"] == value["tus"]
    assert row["lms"] == value["lms"] and row["lus"] == value["lus"]
    assert row["clock"] == 3723004 and row["uclock"] == 3723000004
    assert row["nested"] == [[("a", decimal.Decimal("1.5000"))]]
    assert cols["pick"].to_pylist() == [
        {"long": None, "string": None, "Sub": {"x": 5}},
        {"long": 7, "string": None, "Sub": None},
        {"long": None, "string": "s", "Sub": None},
    ]
    assert cols["again"].to_pylist() == [{"x": 6}, {"x": 6}, None]
    assert out.value_columns is not None and out.value_columns["key"] == "value_key"


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            _record("Node", [{"name": "next", "type": ["null", "Node"]}]),
            "record Node contains itself",
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2},
            "a column takes a precision of 1 to 38",
        ),
        ('{"type": "record", "name": "Bad", "fields": [{"name": "a", "type": "nope"}]}', "nope"),
        ("{not json", "not a valid Avro schema"),
    ],
)
def test_schemas_that_cannot_become_columns_make_their_records_errant(
    schema: Any, why: str
) -> None:
    with pytest.raises(SchemaRefused, match=why):
        AvroType.of(schema if isinstance(schema, str) else json.dumps(schema))
    conv = converter({4: schema})
    out = conv.convert([b"\x00\x00\x00\x00\x04\x00"])
    assert list(out.errors) == [0] and "schema id 4: " in str(out.errors[0])


def test_keys_and_non_record_values_are_one_column() -> None:
    conv = converter({1: '"string"', 2: V1}, key=True)
    out = conv.convert([wire(1, "string", "k1"), None])
    assert out.columns == {"key": pa.array(["k1", None])}
    assert out.tombstones is None
    rec = converter({2: V1}, key=True).convert([wire(2, V1, {"id": 1, "name": "n"})])
    assert rec.columns["key"].to_pylist() == [{"id": 1, "name": "n"}]
    value = converter({1: '"long"', 2: V1})
    assert value.convert([wire(1, "long", 5)]).columns == {"value": pa.array([5], pa.int64())}
    later = value.convert([wire(2, V1, {"id": 1, "name": "n"})])
    assert "one column layout per connector" in str(later.errors[0])


def test_a_whole_poll_with_avro_values_and_a_bad_one() -> None:
    conv = converter({1: V1})
    raw = RawBatch(
        ["t", "t"],
        [0, 0],
        [0, 1],
        [1, 2],
        [b"k", b"k"],
        [wire(1, V1, {"id": 1, "name": "a"}), b"x"],
    )
    result = convert_poll(raw, make_converter("string", {}, is_key=True), conv)
    assert result.batch.table.column("id").to_pylist() == [1]
    assert [b.offset for b in result.bad] == [1]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "value.converter.schema.registry.url is required"),
        ({"schema.registry.url": "localhost:8081"}, "is not an http:// or https:// URL"),
        (
            {"schema.registry.url": URL, "basic.auth.credentials.source": "SASL_INHERIT"},
            "SASL_INHERIT is not supported",
        ),
        (
            {"schema.registry.url": URL, "basic.auth.credentials.source": "USER_INFO"},
            "basic.auth.user.info: expected user:password",
        ),
        (
            {
                "schema.registry.url": "https://r:1",
                "schema.registry.ssl.truststore.location": "/x.bks",
                "schema.registry.ssl.truststore.type": "BKS",
            },
            "truststore.type=BKS: expected one of PEM, PKCS12, JKS",
        ),
        ({"schema.registry.url": URL, "bearer.auth.token": "t"}, "bearer tokens"),
        ({"schema.registry.url": URL, "schemas.cache.config": "0"}, "expected a positive integer"),
        ({"schema.registry.url": URL, "http.read.timeout.ms": "x"}, "http.read.timeout.ms"),
    ],
)
def test_settings_are_checked_naming_the_key(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_converter("io.confluent.connect.avro.AvroConverter", options, is_key=False)


def test_credentials_from_the_url_or_user_info() -> None:
    s = RegistrySettings.parse({"schema.registry.url": "http://u%40x:p%3Aw@h:1/a/"}, "")
    assert s.urls == ["http://h:1/a"] and s.auth == ("u@x", "p:w")
    s = RegistrySettings.parse(
        {
            "schema.registry.url": "http://a:1, http://b:2",
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "me:secret:x",
        },
        "",
    )
    assert s.urls == ["http://a:1", "http://b:2"] and s.auth == ("me", "secret:x")


# --- the client against a real HTTP server on loopback ----------------------------------------


@pytest.fixture
async def registry_server() -> AsyncIterator[tuple[str, list[str], dict[str, Any]]]:
    """A registry that answers id 1 and 404 for others; ``state["fail"]`` makes it answer 500;
    the Authorization headers it saw are listed."""
    seen: list[str] = []
    state: dict[str, Any] = {"fail": False}

    async def by_id(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if state["fail"]:
            return web.json_response({"error_code": 50001, "message": "boom"}, status=500)
        if request.match_info["id"] == "1":
            doc = {
                "schema": json.dumps(V1),
                "references": [{"name": "x.avsc", "subject": "s", "version": 2}],
            }
            return web.json_response(doc)
        return web.json_response({"error_code": 40403, "message": "Schema not found"}, status=404)

    async def subject(request: web.Request) -> web.Response:
        assert request.match_info["version"] == "2"
        return web.json_response({"schema": '"string"'})

    app = web.Application()
    app.router.add_get("/api/schemas/ids/{id}", by_id)
    app.router.add_get("/api/subjects/{subject}/versions/{version}", subject)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/api", seen, state
    finally:
        await runner.cleanup()


async def test_the_client_fails_over_caches_and_remembers_unknown_ids(
    registry_server: tuple[str, list[str], dict[str, Any]],
) -> None:
    url, seen, state = registry_server
    dead = "http://127.0.0.1:9/api"  # nothing listens on the discard port
    settings = RegistrySettings.parse(
        {
            "schema.registry.url": f"{dead},{url}",
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "u:p",
        },
        "",
    )
    client = RegistryClient(settings)
    try:
        await client.fetch([1, 2])
        schema = client.cached(1)
        assert schema is not None and schema.references == (("x.avsc", '"string"'),)
        assert "Schema not found" in client.unknown[2]
        assert set(seen) == {"Basic dTpw"}  # base64 of u:p
        asked = len(seen)
        await client.fetch([1, 2])  # both known now: no request
        assert len(seen) == asked
        state["fail"] = True
        with pytest.raises(RegistryUnavailable, match="HTTP 500 boom"):
            await client.fetch([3])
    finally:
        await client.close()


async def test_a_registry_that_hangs_is_unavailable_after_the_read_timeout() -> None:
    writers: list[asyncio.StreamWriter] = []

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)  # never answers

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = RegistrySettings.parse(
        {"schema.registry.url": f"http://127.0.0.1:{port}", "http.read.timeout.ms": "200"}, ""
    )
    client = RegistryClient(settings)
    try:
        with pytest.raises(RegistryUnavailable, match="did not answer"):
            await client.fetch([1])
    finally:
        await client.close()
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


def test_a_connector_naming_a_converter_is_checked_when_it_is_created() -> None:
    from daemon.connectors.converters import converter_problems
    from daemon.connectors.registry import validate_connector
    from daemon.errors import InvalidConfig

    base = {"connector.class": "EchoSink", "topics": "t"}
    avro = {**base, "value.converter": "io.confluent.connect.avro.AvroConverter"}
    with pytest.raises(InvalidConfig) as caught:
        validate_connector("c", avro)
    [problem] = caught.value.problems
    assert problem.key == "value.converter"
    assert "value.converter.schema.registry.url is required" in problem.message
    assert validate_connector("c", {**avro, "value.converter.schema.registry.url": URL})
    # A reference is resolved when the task starts, and checked there.
    assert not converter_problems({**avro, "value.converter.schema.registry.url": "${env:X}"})
    bad_json = {**base, "key.converter": "json", "key.converter.mode": "infer"}
    [problem] = converter_problems(bad_json)
    assert problem.key == "key.converter" and "keys are converted in text mode" in problem.message


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({}, ["long", "Sub"]),
        ({"enhanced.avro.schema.support": "true"}, ["long", "ns.Sub"]),
        (
            {"generalized.sum.type.support": "true"},
            ["connect_union_field_1", "connect_union_field_2"],
        ),
    ],
)
def test_general_union_field_names_follow_confluents_settings(
    options: dict[str, str], names: list[str]
) -> None:
    sub = {
        "type": "record",
        "name": "Sub",
        "namespace": "ns",
        "fields": [{"name": "x", "type": "int"}],
    }
    schema = _record("U", [{"name": "u", "type": ["null", "long", sub]}])
    conv = make_converter("avro", {"schema.registry.url": URL, **options}, is_key=False)
    assert isinstance(conv, AvroConverter) and conv.client is not None
    conv.client.schemas[1] = Schema(1, "AVRO", json.dumps(schema))
    out = conv.convert([wire(1, schema, {"u": 5}), wire(1, schema, {"u": {"x": 1}})])
    assert [f.name for f in out.columns["u"].type] == names
    assert out.columns["u"].to_pylist() == [
        {names[0]: 5, names[1]: None},
        {names[0]: None, names[1]: {"x": 1}},
    ]


async def test_a_poll_with_more_schema_ids_than_the_cache_holds_still_converts(
    registry_server: tuple[str, list[str], dict[str, Any]],
) -> None:
    """schemas.cache.config=1 and two ids in one poll: both fetched, kept for the conversion."""
    url, _, _ = registry_server
    conv = make_converter(
        "avro", {"schema.registry.url": url, "schemas.cache.config": "1"}, is_key=False
    )
    assert isinstance(conv, AvroConverter) and conv.client is not None
    conv.client.schemas[7] = Schema(7, "AVRO", json.dumps(V1))  # as if fetched before
    batch = [wire(1, V1, {"id": 1, "name": "a"}), wire(7, V1, {"id": 2, "name": "b"})]
    try:
        for _ in range(3):
            try:
                out = conv.convert(batch)
                break
            except SchemasNeeded as need:
                await need.fetch()
        else:
            raise AssertionError("the conversion kept asking for schemas")
        assert out.columns["id"].to_pylist() == [1, 2] and not out.errors
    finally:
        await conv.close()


def test_converter_settings_are_taken_refused_or_warned_about() -> None:
    """Confluent's settings as Confluent's converter classes define them: a serializer-side
    one is taken, one that changes what a reader gives and connectd does not do is refused
    (exit 78 / 400 at creation), a default-only one is refused at another value, and a key no
    setting names is a warning with the setting it may mean."""
    from daemon.connectors.converters import converter_problems

    base = {
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://127.0.0.1:1",
    }

    def problems(**more: str) -> list[tuple[bool, str, str]]:
        config = base | {f"value.converter.{k.replace('_', '.')}": v for k, v in more.items()}
        return [(p.is_error, p.key or "", str(p)) for p in converter_problems(config)]

    assert problems(auto_register_schemas="false", use_latest_version="true") == []
    assert problems(flatten_singleton_unions="true", enhanced_avro_schema_support="true") == []
    [(is_error, key, text)] = problems(schema_registry_urll="http://x")
    assert not is_error and key == "value.converter.schema.registry.urll"
    assert "is not a setting of io.confluent.connect.avro.AvroConverter" in text
    assert "value.converter.schema.registry.url" in text.split("urll", 1)[1]
    for refused in ("rule.executors", "rule.actions", "value.schema.id.deserializer"):
        [(is_error, _, text)] = problems(**{refused.replace(".", "_"): "x"})
        assert is_error and refused in text and "do not support it" in text
    [(is_error, _, text)] = problems(flatten_singleton_unions="false")
    assert is_error and "flatten.singleton.unions=true" in text
    # Connect's own converters likewise: the classic typo of schemas.enable.
    json_typo = converter_problems(
        {
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enabled": "false",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "key.converter.converter.encoding": "UTF-8",
        }
    )
    [typo] = json_typo
    assert not typo.is_error and typo.key == "value.converter.schemas.enabled"
    assert "value.converter.schemas.enable" in str(typo).split("enabled", 1)[1]
