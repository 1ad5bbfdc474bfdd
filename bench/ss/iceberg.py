"""Iceberg tables of a Hadoop catalog: what their metadata says was committed, and when.

A Hadoop catalog keeps a table in ``<warehouse>/<namespace>/<name>``; every change to it is a
new ``metadata/vN.metadata.json``, renamed into place whole and never changed (the rename is
the commit), with ``version-hint.text`` naming the newest. IcebergSink writes each batch to a
branch of its own and then moves ``main`` to it in one more metadata version, so the instant
rows became visible is the modification time of the version in which ``main``'s head moved,
and their count the growth of the head snapshot's ``total-records``. The connector's progress
is the ``connectd.offsets.<connector>`` state of the newest snapshot of ``main`` that carries
it (the logic of tests/support/iceberg.py ``committed_offsets``).

The end check reads the table without Spark or connectd: the manifest list and manifests
(Avro, decoded here with the standard library: no Iceberg or Avro package in the venv), then
the live data files they list, with pyarrow.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from ss.tables import data_files_on_disk, row_problems

KEY_PREFIX = "connectd.offsets."  # daemon/connectors/iceberg/state.py KEY_PREFIX
TABLE = "bench.events"  # namespace.name


def sink_props(warehouse: Path) -> tuple[dict[str, str], Path]:
    """IcebergSink's settings for the bench's table in a Hadoop catalog at ``warehouse``, and
    the table's directory there (a namespace is a directory, the table one inside it)."""
    props = {"table": TABLE, "catalog.type": "hadoop", "catalog.warehouse": str(warehouse)}
    return props, warehouse.joinpath(*TABLE.split("."))


def connector_name(connector: Path) -> str:
    """The ``name`` a connector.properties gives (a ``--connector-prop`` may have changed it):
    the snapshot-summary key of its offsets."""
    for line in connector.read_text().splitlines():
        k, _, value = line.partition("=")
        if k.strip() == "name":
            return value.strip()
    raise ValueError(f"{connector}: no name")


def _read_version(meta: Path, n: int) -> tuple[float, dict[str, Any]] | None:
    path = meta / f"v{n}.metadata.json"
    try:
        mtime = path.stat().st_mtime
        return mtime, json.loads(path.read_text())
    except (OSError, ValueError):  # not there yet
        return None


def _main_head(doc: dict[str, Any]) -> dict[str, Any] | None:
    head = doc.get("refs", {}).get("main", {}).get("snapshot-id", doc.get("current-snapshot-id"))
    return next((s for s in doc.get("snapshots", []) if s["snapshot-id"] == head), None)


def committed_offsets(doc: dict[str, Any], connector: str) -> dict[tuple[str, int], int | None]:
    """Next offset per partition in the newest snapshot of ``main`` carrying the connector's
    state (snapshots of others, a compaction's, carry none: walk back to one that does)."""
    snapshots = {s["snapshot-id"]: s for s in doc.get("snapshots", [])}
    at = _main_head(doc)
    while at is not None:
        state = at.get("summary", {}).get(KEY_PREFIX + connector)
        if state:
            return {(t, int(p)): o for t, p, o, _ in json.loads(state)["partitions"]}
        at = snapshots.get(at.get("parent-snapshot-id"))
    return {}


@dataclass
class IcebergReader:
    """Reads a Hadoop-catalog table's metadata versions as they appear (the interface of
    ``CommitLogReader``: ``poll``, ``rows``, ``commits`` with rows, ``files``). ``poll``
    answers the connector's committed offsets summed (every record's next offset: the topic's
    offsets start at 0), the figure the run waits for."""

    table: Path
    connector: str
    rows: int = 0  # total-records of main's head
    offsets: int = 0
    commits: list[tuple[float, int]] = field(default_factory=list)  # (mtime, rows), with rows
    files: list[str] = field(default_factory=list)  # set by the end check
    versions: int = 0  # the newest metadata version read (vN)
    #: Every move of main: (version, mtime, rows added, seconds from the head snapshot's
    #: creation on the sink's branch to the version that made it main's).
    moves: list[tuple[int, float, int, float]] = field(default_factory=list)
    doc: dict[str, Any] | None = None  # the newest metadata read
    _head: int | None = None

    def poll(self) -> int:
        meta = self.table / "metadata"
        while True:
            got = _read_version(meta, self.versions + 1)
            if got is None:
                try:
                    hint = int((meta / "version-hint.text").read_text().strip())
                except (OSError, ValueError):
                    return self.offsets
                if hint <= self.versions + 1:
                    return self.offsets
                self.versions = hint - 1  # older versions deleted: go on from the hint's
                continue
            self.versions += 1
            self._add(*got)

    def _add(self, mtime: float, doc: dict[str, Any]) -> None:
        self.doc = doc
        head = _main_head(doc)
        if head is None or head["snapshot-id"] == self._head:
            return
        self._head = head["snapshot-id"]
        total = int(head.get("summary", {}).get("total-records", 0))
        added = total - self.rows
        made = int(head.get("timestamp-ms", 0)) / 1000
        self.moves.append((self.versions, mtime, added, round(mtime - made, 3) if made else -1))
        if added > 0:
            self.commits.append((mtime, added))
        self.rows = total
        self.offsets = sum(o or 0 for o in committed_offsets(doc, self.connector).values())

    def summary(self) -> dict[str, Any]:
        """What the run's record keeps: metadata versions against moves of main (each batch
        costs the branch's commit and main's), the branches left, every move."""
        refs = (self.doc or {}).get("refs", {})
        return {
            "iceberg_versions": self.versions,
            "iceberg_main_moves": len(self.moves),
            "iceberg_branches": sorted(r for r in refs if r != "main"),
            "iceberg_moves": self.moves,
        }


# --- Avro object container files (the Iceberg manifests), just enough to read them ---------


class _Avro:
    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)
        self.named: dict[str, Any] = {}

    def long(self) -> int:
        shift = result = 0
        while True:
            b = self.buf.read(1)[0]
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)  # zigzag

    def raw(self) -> bytes:
        return self.buf.read(self.long())

    def blocks(self) -> Any:
        """Item counts of an array's or map's blocks (a negative count has its size next)."""
        while n := self.long():
            if n < 0:
                n = -n
                self.long()
            yield n

    def value(self, schema: Any) -> Any:
        if isinstance(schema, list):  # a union: the branch's index, then its value
            return self.value(schema[self.long()])
        if isinstance(schema, str):
            kind, schema = schema, self.named.get(schema, schema)
            if not isinstance(schema, str):
                return self.value(schema)
        else:
            kind = schema["type"]
            if kind in ("record", "enum", "fixed"):
                self.named[schema["name"]] = schema
                if "namespace" in schema:
                    self.named[f"{schema['namespace']}.{schema['name']}"] = schema
            elif not isinstance(kind, str) or kind not in ("array", "map"):
                return self.value(kind)  # a primitive with attributes (logicalType ...)
        match kind:
            case "null":
                return None
            case "boolean":
                return self.buf.read(1) != b"\0"
            case "int" | "long":
                return self.long()
            case "float":
                return struct.unpack("<f", self.buf.read(4))[0]
            case "double":
                return struct.unpack("<d", self.buf.read(8))[0]
            case "bytes":
                return self.raw()
            case "string":
                return self.raw().decode()
            case "fixed":
                return self.buf.read(schema["size"])
            case "enum":
                return schema["symbols"][self.long()]
            case "array":
                return [self.value(schema["items"]) for n in self.blocks() for _ in range(n)]
            case "map":
                return {
                    self.raw().decode(): self.value(schema["values"])
                    for n in self.blocks()
                    for _ in range(n)
                }
            case "record":
                return {f["name"]: self.value(f["type"]) for f in schema["fields"]}
        raise ValueError(f"Avro type {kind!r} not read here")


def read_avro(path: Path) -> list[dict[str, Any]]:
    """The records of an Avro object container file (codecs null and deflate, Iceberg's
    default ``gzip`` being Avro's deflate)."""
    data = path.read_bytes()
    head = _Avro(data)
    if head.buf.read(4) != b"Obj\x01":
        raise ValueError(f"{path}: not an Avro container file")
    meta = {head.raw().decode(): head.raw() for n in head.blocks() for _ in range(n)}
    sync = head.buf.read(16)
    schema = json.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", b"null").decode()
    out = []
    while head.buf.tell() < len(data):
        count, block = head.long(), head.raw()
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        elif codec != "null":
            raise ValueError(f"{path}: Avro codec {codec} not read here")
        body = _Avro(block)
        out += [body.value(schema) for _ in range(count)]
        if head.buf.read(16) != sync:
            raise ValueError(f"{path}: sync marker differs")
    return out


def _local(uri: str) -> Path:
    return (
        Path(unquote(urlparse(uri).path)) if "://" in uri or uri.startswith("file:") else Path(uri)
    )


def live_data_files(doc: dict[str, Any]) -> list[tuple[str, int]]:
    """(path, record count) of every data file of ``main``'s head: manifest list → data
    manifests → entries not deleted (status 2)."""
    head = _main_head(doc)
    if head is None:
        return []
    out = []
    for manifest in read_avro(_local(head["manifest-list"])):
        if manifest.get("content", 0) != 0:  # a delete manifest: the sink writes none
            raise ValueError(f"delete manifest {manifest['manifest_path']} in an append table")
        for entry in read_avro(_local(manifest["manifest_path"])):
            if entry["status"] != 2:
                f = entry["data_file"]
                out.append((f["file_path"], int(f["record_count"])))
    return out


def check_iceberg_table(
    reader: IcebergReader, produced: int, *, typed: Mapping[str, str] | None
) -> tuple[list[str], int]:
    """What differs between the table (its newest metadata, manifests and data files) and the
    topic (empty: main's head has ``total-records`` == the connector's offsets summed ==
    produced, its manifests list data files of that many records, all on disk, whose rows ==
    distinct (partition, offset) == produced, with ``typed`` each field of its type); and how
    many Parquet files under the table are no part of it (written by a commit that never
    published). Sets ``reader.files``."""
    reader.poll()
    doc, table = reader.doc, reader.table
    if doc is None:
        return [f"no Iceberg metadata in {table}"], 0
    problems = []
    if not reader.rows == reader.offsets == produced:
        problems.append(
            f"total-records {reader.rows}, offsets committed {reader.offsets}, produced {produced}"
        )
    live = live_data_files(doc)
    base = table.resolve()
    reader.files = sorted(os.path.relpath(_local(p), base) for p, _ in live)
    if sum(n for _, n in live) != reader.rows:
        problems.append(f"manifests: {sum(n for _, n in live)} records, snapshot {reader.rows}")
    on_disk = set(data_files_on_disk(table))
    missing = [f for f in reader.files if f not in on_disk]
    if missing:
        problems.append(f"files of the table not on disk: {missing[:5]}")
    readable = [table / f for f in reader.files if f in on_disk]
    if not readable:
        return [*problems, f"no data files in {table}"], len(on_disk)
    columns = ["kafka_partition", "kafka_offset", *(typed or {})]
    data = pa.concat_tables([pq.read_table(f, columns=columns) for f in readable])
    problems += row_problems(data, produced, typed=typed)
    return problems, len(on_disk - set(reader.files))
