"""The bench's data: the two topics it produces, and what each sink says it committed.

connectd's table is read through its commit log (``_connectd/log``, one ``CommitRecord`` per
file; a commit is visible to readers once its record is published); Spark's file sink through
its ``_spark_metadata`` log (one file per batch, ``N`` or ``N.compact``, each listing the data
files the batch added). Commit instants are the modification times of those log files: the
moment each sink made its rows visible.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from daemon.storage.commitlog import META, CommitRecord

PARTITIONS = 3
RECORD_BYTES = 200

#: The JSON value's fields and types, as connectd's JsonConverter names them (``fields`` mode)
#: and as the Spark job's explicit schema declares them (bench/ss/ss_job.py).
JSON_FIELDS = {
    "id": "int64",
    "user": "string",
    "amount": "double",
    "ok": "boolean",
    "ts": "int64",
    "note": "string",
}
ARROW_TYPES = {"int64": pa.int64(), "string": pa.string(), "double": pa.float64()}
ARROW_TYPES["boolean"] = pa.bool_()
ARROW_TYPES["int32"] = pa.int32()


#: The wide JSON shape (issue 32): 10 flat fields, ~300 bytes.
WIDE_FIELDS = {
    "id": "int64",
    "user": "string",
    "amount": "double",
    "ok": "boolean",
    "ts": "int64",
    "country": "string",
    "device": "string",
    "score": "double",
    "visits": "int64",
    "note": "string",
}
WIDE_BYTES = 300


def wide_value(i: int) -> bytes:
    head = (
        f'{{"id":{i},"user":"user-{i % 50_000:05d}","amount":{(i % 100_000) / 100 + 0.01},'
        f'"ok":{"true" if i % 3 else "false"},"ts":{1_764_000_000_000 + i},'
        f'"country":"{("DE", "FR", "US", "JP", "BR")[i % 5]}","device":"device-{i % 977:03d}",'
        f'"score":{(i % 1000) / 7:.4f},"visits":{i % 12_345},"note":"'
    )
    pad = WIDE_BYTES - len(head) - 2
    return (head + "w" * max(pad, 1) + '"}').encode()


def json_value(i: int) -> bytes:
    head = (
        f'{{"id":{i},"user":"user-{i % 50_000:05d}","amount":{(i % 100_000) / 100 + 0.01},'
        f'"ok":{"true" if i % 3 else "false"},"ts":{1_764_000_000_000 + i},"note":"'
    )
    pad = RECORD_BYTES - len(head) - 2
    return (head + "n" * max(pad, 1) + '"}').encode()


#: The JSON records' fields as an Avro record (issue 31's bench): the same values, the same
#: column types.
AVRO_SCHEMA = {
    "type": "record",
    "name": "BenchRecord",
    "namespace": "connectd.bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "ts", "type": "long"},
        {"name": "note", "type": "string"},
    ],
}


def avro_values(topic: str, n: int, registry_url: str) -> list[bytes]:
    """The ``n`` JSON records' values written by Confluent's ``AvroSerializer`` (the schema
    registered under the topic's subject in the registry at ``registry_url``)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    with SchemaRegistryClient({"url": registry_url}) as client:
        serializer = AvroSerializer(client, json.dumps(AVRO_SCHEMA))
        return [serializer(json.loads(json_value(i)), ctx) for i in range(n)]


async def produce(bootstrap: str, n: int, kind: str, registry_url: str | None = None) -> str:
    """A fresh topic of ``PARTITIONS`` partitions holding ``n`` records, ``i % 3`` to each.

    ``kind`` ``json``: a 6-field JSON object of ~200 bytes, key ``user-NNNNN``. ``bytes``: 200
    opaque bytes (the record number, then a slice of a random buffer), the same key. ``wide``:
    a 10-field JSON object of ~300 bytes (``WIDE_FIELDS``), the same key. ``avro``:
    the JSON records' values in Avro through the Schema Registry at ``registry_url``
    (``AVRO_SCHEMA``; ~150 bytes each), the same key."""
    topic = f"bench-ss-{kind}-{uuid.uuid4().hex[:8]}"
    avro = avro_values(topic, n, registry_url or "") if kind == "avro" else None
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()
    noise = random.Random(15).randbytes(1 << 16)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=50, max_batch_size=1 << 20
    )
    await producer.start()
    try:
        pending = []
        for i in range(n):
            if avro is not None:
                value = avro[i]
            elif kind == "json":
                value = json_value(i)
            elif kind == "wide":
                value = wide_value(i)
            else:
                at = (i * 7919) % (len(noise) - RECORD_BYTES)
                value = b"%012d" % i + noise[at : at + RECORD_BYTES - 12]
            key = b"user-%05d" % (i % 50_000)
            pending.append(await producer.send(topic, value, key=key, partition=i % PARTITIONS))
            if len(pending) >= 20_000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return topic


# --- connectd's commit log ------------------------------------------------------------------


@dataclass
class CommitLogReader:
    """Reads a table's commit log incrementally from its files (records are never changed)."""

    table: Path
    rows: int = 0
    commits: list[tuple[float, int]] = field(default_factory=list)  # (mtime, rows), in seq order
    files: list[str] = field(default_factory=list)  # ``final`` paths, relative to the table
    _next: int = 0

    def poll(self) -> int:
        log = self.table / META / "log"
        if not log.is_dir():
            return self.rows
        names = sorted(n for n in os.listdir(log) if n.endswith(".json"))
        for name in names[self._next :]:
            path = log / name
            try:
                record = CommitRecord.from_json(path.read_bytes(), source=name)
                mtime = path.stat().st_mtime
            except Exception:  # being published: read it at the next poll
                break
            self._next += 1
            if record.kind != "commit":
                continue
            rows = sum(r.end - r.start for r in record.ranges)
            self.rows += rows
            self.commits.append((mtime, rows))
            self.files.extend(f.final for f in record.files)
        return self.rows


# --- Spark's file sink ----------------------------------------------------------------------


def spark_metadata(out: Path) -> tuple[list[tuple[float, int]], list[str]]:
    """Per batch, in order: its commit instant (the mtime of its ``_spark_metadata`` file) and
    how many data files it added; and every data file the log lists, relative to ``out``."""
    meta = out / "_spark_metadata"
    if not meta.is_dir():
        return [], []
    logs = []
    for name in os.listdir(meta):
        stem = name.removesuffix(".compact")
        if stem.isdigit():
            logs.append((int(stem), meta / name))
    logs.sort()
    batches, files = [], set()
    for _, path in logs:
        added = 0
        for line in path.read_text().splitlines()[1:]:  # line 1 is the version, "v1"
            entry = json.loads(line)
            if entry.get("action", "add") == "add" and entry["path"] not in files:
                files.add(entry["path"])
                added += 1
        batches.append((path.stat().st_mtime, added))
    base = out.resolve()
    rel = sorted(os.path.relpath(unquote(urlparse(f).path), base) for f in files)
    return batches, rel


# --- checks ---------------------------------------------------------------------------------


def data_files_on_disk(table: Path) -> list[str]:
    """Parquet files under ``table`` outside ``_``/``.``-prefixed names (what readers see)."""
    found = []
    for root, dirs, names in os.walk(table):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for n in names:
            if n.endswith(".parquet") and not n.startswith(("_", ".")):
                found.append(os.path.relpath(os.path.join(root, n), table))
    return sorted(found)


def check_table(
    table: Path,
    listed: list[str],
    produced: int,
    *,
    partition_col: str,
    offset_col: str,
    typed: Mapping[str, str] | None,
) -> list[str]:
    """What differs between the table and the topic (empty: rows == distinct (partition,
    offset) == produced, the files the sink's log lists are those on disk, and with ``typed``
    each value field has its type)."""
    problems = []
    on_disk = data_files_on_disk(table)
    if sorted(listed) != on_disk:
        extra, missing = set(on_disk) - set(listed), set(listed) - set(on_disk)
        problems.append(
            f"files: {len(on_disk)} on disk, {len(listed)} in the sink's log; "
            f"not in the log: {sorted(extra)[:5]}, not on disk: {sorted(missing)[:5]}"
        )
    readable = [f for f in listed if (table / f).exists()]
    if not readable:
        return [*problems, f"no data files in {table}"]
    parts = [pq.read_table(table / f) for f in readable]
    data = pa.concat_tables(parts, promote_options="default")
    return problems + row_problems(
        data, produced, typed=typed, partition_col=partition_col, offset_col=offset_col
    )


def row_problems(
    data: pa.Table,
    produced: int,
    *,
    typed: Mapping[str, str] | None,
    partition_col: str = "kafka_partition",
    offset_col: str = "kafka_offset",
    same: Callable[[pa.DataType, pa.DataType], bool] = operator.eq,
) -> list[str]:
    """What differs between a table's rows and the topic: rows == distinct (partition, offset)
    == produced, and with ``typed`` each field of its type (``same`` compares types)."""
    problems = []
    part = pc.cast(data.column(partition_col), pa.int64())
    coords = pc.add(pc.multiply(part, 1 << 40), pc.cast(data.column(offset_col), pa.int64()))
    distinct = pc.count_distinct(coords).as_py()
    if not data.num_rows == distinct == produced:
        problems.append(
            f"rows {data.num_rows}, distinct (partition, offset) {distinct}, produced {produced}"
        )
    for name, kind in (typed or {}).items():
        want = ARROW_TYPES[kind]
        got = data.schema.field(name).type if name in data.schema.names else None
        if got is None or not same(got, want):
            problems.append(f"column {name}: {got}, expected {want}")
    return problems
