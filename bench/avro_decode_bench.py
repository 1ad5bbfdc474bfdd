"""Avro and Protobuf decoding against the JSON path, per record, in one process (issue 31's
target: Avro decoding no slower per record than today's JSON path).

    .venv/bin/python bench/avro_decode_bench.py [--records N] [--runs R]

The bench's record shape (bench/ss/tables.py: id, user, amount, ok, ts, note; ~200 bytes as
JSON) as Avro bodies and as JSON text, decoded in polls of 500 and 5,000 records:

- ``avro-columnar``: connectd's AvroType.decode, column by column (registry/columnar.py);
- ``avro-fastavro``: the same type with the column reader off: fastavro record by record, the
  path other schemas (arrays, maps, general unions) take;
- ``json``: the JsonConverter's fast path (``pyarrow.json`` with the columns' schema);
- ``avro-converter`` / ``json-converter``: the whole converters as a task runs them, wire
  format included (Confluent's header, the schema from the converter's cache; JsonConverter
  with ``schemas.enable=false`` and the bench's typed ``fields``, as bench/ss configures it);
- ``proto-converter``: ProtobufConverter on the same record as a proto3 message (upb parses
  each message, then a Python step per field builds the row: registry/protoschema.py).

CPU microseconds per record (``time.process_time``), median of ``--runs``, and each Avro path's
ratio to JSON. One core; nothing else runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.json as pj

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ss.tables import AVRO_SCHEMA, json_value

from daemon.connectors.converters import make_converter
from daemon.connectors.converters.registry import AvroConverter
from daemon.connectors.converters.registry.avro import AvroType
from daemon.connectors.converters.registry.client import Schema
from daemon.connectors.converters.registry.protofiles import compile_texts

PROTO = """
syntax = "proto3";
package connectd.bench;
message BenchRecord {
  int64 id = 1;
  string user = 2;
  double amount = 3;
  bool ok = 4;
  int64 ts = 5;
  string note = 6;
}
"""


def _proto_bodies(values: list[dict[str, Any]]) -> list[bytes]:
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(compile_texts({"bench.proto": PROTO})["bench.proto"])
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("connectd.bench.BenchRecord"))
    return [b"\x00\x00\x00\x00\x02\x00" + cls(**v).SerializeToString() for v in values]


JSON_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("user", pa.string()),
        ("amount", pa.float64()),
        ("ok", pa.bool_()),
        ("ts", pa.int64()),
        ("note", pa.string()),
    ]
)


_KINDS = {"int64": "int64", "string": "string", "double": "double", "bool": "boolean"}


def _json(chunk: Sequence[bytes]) -> Any:
    options = pj.ParseOptions(explicit_schema=JSON_SCHEMA)
    return pj.read_json(pa.BufferReader(b"\n".join(chunk)), parse_options=options)


def _per_record(fn: Callable[[Sequence[bytes]], Any], data: list[bytes], size: int) -> float:
    t0 = time.process_time()
    for k in range(0, len(data), size):
        fn(data[k : k + size])
    return (time.process_time() - t0) / len(data) * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    avro = AvroType.of(json.dumps(AVRO_SCHEMA))
    assert avro.columns is not None, "the bench's schema has a column plan"
    fallback = dataclasses.replace(avro, columns=None)
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    bodies, texts = [], []
    for i in range(args.records):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, json.loads(json_value(i)))
        bodies.append(buf.getvalue())
        texts.append(json_value(i))
    a, _ = avro.decode(bodies[:1000])
    b, _ = fallback.decode(bodies[:1000])
    assert a.equals(b), "the two Avro paths must agree"
    avro_converter = make_converter("avro", {"schema.registry.url": "http://unused"}, is_key=False)
    assert isinstance(avro_converter, AvroConverter) and avro_converter.client is not None
    avro_converter.client.schemas[1] = Schema(1, "AVRO", json.dumps(AVRO_SCHEMA))
    framed = [b"\x00\x00\x00\x00\x01" + b for b in bodies]
    fields = ",".join(f"{f.name}:{_KINDS[str(f.type)]}" for f in JSON_SCHEMA)
    json_converter = make_converter(
        "json", {"schemas.enable": "false", "fields": fields}, is_key=False
    )
    proto_converter = make_converter(
        "protobuf", {"schema.registry.url": "http://unused"}, is_key=False
    )
    assert proto_converter.client is not None  # type: ignore[attr-defined]
    proto_converter.client.schemas[2] = Schema(2, "PROTOBUF", PROTO)  # type: ignore[attr-defined]
    protos = _proto_bodies([json.loads(t) for t in texts])
    assert (
        proto_converter.convert(protos[:100])
        .columns["user"]
        .equals(avro_converter.convert(framed[:100]).columns["user"])
    ), "Protobuf and Avro must read the same records"
    paths: dict[str, tuple[Callable[[Sequence[bytes]], Any], list[bytes]]] = {
        "avro-columnar": (lambda c: avro.decode(c), bodies),
        "avro-fastavro": (lambda c: fallback.decode(c), bodies),
        "json": (_json, texts),
        "avro-converter": (avro_converter.convert, framed),
        "json-converter": (json_converter.convert, texts),
        "proto-converter": (proto_converter.convert, protos),
    }
    print(f"{args.records:,} records, CPU µs per record, median of {args.runs} runs")
    print(f"{'poll':>6}  {'path':<14} {'µs/record':>9}  ratio")
    for size in (500, 5000):
        medians = {
            name: statistics.median(_per_record(fn, data, size) for _ in range(args.runs))
            for name, (fn, data) in paths.items()
        }
        for name, us in medians.items():
            peer = "json-converter" if name.endswith("converter") else "json"
            print(f"{size:>6}  {name:<14} {us:>9.2f}  {us / medians[peer]:>5.2f}x {peer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
