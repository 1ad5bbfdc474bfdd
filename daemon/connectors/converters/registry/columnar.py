"""Avro bodies decoded column by column: one pass per field over the whole batch, in numpy, with
no Python step per record.

Avro's binary encoding has no per-record index: each field starts where the previous one ended.
So every record carries a read position, and each field is read for all records at once —
a varint is ten byte gathers and a mask, a double eight gathers viewed as ``float64``, a string
a varint length and one gather of every string's bytes into an Arrow buffer — moving all the
positions past it. A ``["null", T]`` union reads ``T`` only at the records whose branch is not
null; a nested record reads its fields in turn.

What it reads: records (nested too), ``null``, ``boolean``, ``int``, ``long``, ``float``,
``double``, ``string``, ``bytes``, ``enum``, ``fixed``, unions of ``null`` and one type, and
the logical types ``avro.py`` casts from those (date, times, timestamps, uuid), plus
``decimal`` on ``bytes`` or ``fixed``. A schema with arrays, maps or other unions gets no plan
(``plan`` returns None) and ``avro.py`` decodes with fastavro, record by record.

Anything unexpected in the bytes — a varint longer than ten bytes, a length past the record's
end, a boolean that is not 0 or 1, an enum index out of range, invalid UTF-8, a record whose
fields end before or after its last byte — makes ``decode`` return None: the caller decodes the
batch with fastavro, which finds the records at fault (the reference behaviour).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

_PAD = 16  # bytes after the last body: a gather of a bad varint or a short value stays inside


class Malformed(Exception):
    """The batch holds bytes this reader does not expect."""


@dataclass(frozen=True)
class Node:
    """One Avro type: ``kind`` is a primitive name, ``record``, ``enum``, ``fixed``,
    ``nullable`` (a union of null and ``children[0]``; ``size`` is null's branch index) or
    ``decimal`` (on bytes: ``size`` 0; on fixed: its size)."""

    kind: str
    raw: pa.DataType
    children: tuple[Node, ...] = ()
    names: tuple[str, ...] = ()  # record: field names; enum: symbols
    size: int = 0


def plan(schema: Any, raw: pa.DataType, named: dict[str, Node] | None = None) -> Node | None:
    """The reading plan of a (rewritten: logical types to cast already removed) Avro schema
    whose Arrow type (before the casts) is ``raw``; None when it holds a type this reader does
    not take."""
    named = {} if named is None else named
    try:
        return _plan(schema, raw, named, "")
    except _Unsupported:
        return None


class _Unsupported(Exception):
    pass


_PRIMITIVE = ("null", "boolean", "int", "long", "float", "double", "string", "bytes")


def _plan(schema: Any, raw: pa.DataType, named: dict[str, Node], space: str) -> Node:
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return Node(schema, raw)
        for name in (schema if "." in schema or not space else f"{space}.{schema}", schema):
            if name in named:
                return named[name]
        raise _Unsupported(schema)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(schema) != 2 or len(branches) != 1:
            raise _Unsupported("union")
        inner = _plan(branches[0], raw, named, space)
        return Node("nullable", raw, (inner,), size=schema.index("null"))
    if not isinstance(schema, dict):
        raise _Unsupported(schema)
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _plan(kind, raw, named, space)
    if schema.get("logicalType") == "decimal" and kind in ("bytes", "fixed"):
        node = Node("decimal", raw, size=int(schema.get("size", 0)) if kind == "fixed" else 0)
        if node.size > 16 and kind == "fixed":
            raise _Unsupported("wide fixed decimal")
        return _named(schema, node, named, space) if kind == "fixed" else node
    if kind in _PRIMITIVE:
        return Node(str(kind), raw)
    if kind == "enum":
        node = Node("enum", raw, names=tuple(schema.get("symbols", ())))
        return _named(schema, node, named, space)
    if kind == "fixed":
        return _named(schema, Node("fixed", raw, size=int(schema["size"])), named, space)
    if kind in ("record", "error"):
        name = str(schema.get("name", ""))
        inner_space = name.rsplit(".", 1)[0] if "." in name else schema.get("namespace", space)
        children = []
        for f, arrow_field in zip(schema.get("fields", []), raw, strict=True):
            children.append(_plan(f["type"], arrow_field.type, named, inner_space or ""))
        node = Node("record", raw, tuple(children), tuple(f.name for f in raw))
        return _named(schema, node, named, space)
    if isinstance(kind, str) and kind not in ("array", "map"):
        return _plan(kind, raw, named, space)
    raise _Unsupported(kind)


def _named(schema: dict[str, Any], node: Node, named: dict[str, Node], space: str) -> Node:
    name = str(schema.get("name", ""))
    ns = schema.get("namespace", space)
    full = name if "." in name or not ns else f"{ns}.{name}"
    named[full] = named[name] = node
    return node


class Spans:
    """Records laid end to end in one buffer: record i is ``buf[starts[i]:ends[i]]``. What the
    converter splits a poll into (``Spans.of``) and what the column reader reads."""

    def __init__(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        self.buf, self.starts, self.ends = buf, starts, ends

    @classmethod
    def of(cls, parts: Sequence[bytes]) -> Spans:
        lengths = np.fromiter(map(len, parts), np.int64, len(parts))
        ends = np.cumsum(lengths)
        buf = np.frombuffer(b"".join(parts) + bytes(_PAD), np.uint8)
        return cls(buf, ends - lengths, ends)

    def __len__(self) -> int:
        return len(self.starts)

    def subset(self, rows: np.ndarray, skip: int = 0) -> Spans:
        """The records ``rows``, each without its first ``skip`` bytes."""
        return Spans(self.buf, self.starts[rows] + skip, self.ends[rows])

    def bodies(self) -> list[bytes]:
        data = self.buf.tobytes()
        return [data[a:b] for a, b in zip(self.starts.tolist(), self.ends.tolist(), strict=True)]


class _Reader:
    """The batch's bytes and each record's read position."""

    def __init__(self, spans: Spans) -> None:
        self.buf, self.pos, self.ends = spans.buf, spans.starts.copy(), spans.ends

    def varint(self, rows: np.ndarray) -> np.ndarray:
        """The zigzag varint (``int``/``long``) at each of ``rows``' positions: byte k of every
        varint still going, for k = 0, 1, ... until none goes on (two passes for small numbers,
        where a fixed ten would cost five times as much)."""
        at = self.pos[rows]
        b = self.buf[at]
        u = (b & 0x7F).astype(np.uint64)
        going = np.flatnonzero(b >= 0x80)
        n = np.ones(len(rows), np.int64)
        for k in range(1, 10):
            if not len(going):
                break
            b = self.buf[at[going] + k]
            u[going] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            n[going] += 1
            going = going[b >= 0x80]
        else:
            if len(going):
                raise Malformed("a varint longer than ten bytes")
        self.pos[rows] = at + n
        self._check(rows)
        value: np.ndarray = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(
            np.int64
        )
        return value

    def fixed_bytes(self, rows: np.ndarray, width: int) -> np.ndarray:
        at = self.pos[rows]
        out: np.ndarray = self.buf[at[:, None] + np.arange(width)]
        self.pos[rows] = at + width
        self._check(rows)
        return out

    def _check(self, rows: np.ndarray) -> None:
        if (self.pos[rows] > self.ends[rows]).any():
            raise Malformed("a value past the record's end")

    def blobs(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Length-prefixed bytes (``string``/``bytes``) at each row: Arrow offsets and data."""
        lengths = self.varint(rows)
        if (lengths < 0).any():
            raise Malformed("a negative length")
        return self._gather(rows, lengths)

    def _gather(self, rows: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = self.pos[rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        data = self.buf[np.repeat(at - offsets[:-1], lengths) + np.arange(total)]
        self.pos[rows] = at + lengths
        self._check(rows)
        return offsets, data


def decode(node: Node, spans: Spans) -> pa.Array | None:
    """The records as one Arrow array of ``node.raw`` (cast it to the logical types after), or
    None when the batch holds anything unexpected (see the module docstring)."""
    if not len(spans):
        return pa.array([], node.raw)
    reader = _Reader(spans)
    try:
        out = _read(node, reader, np.arange(len(spans)))
        if (reader.pos != reader.ends).any():
            raise Malformed("a record's fields end before its last byte")
        out.validate(full=True)  # invalid UTF-8 in a string, among others
    except (Malformed, pa.ArrowInvalid, IndexError, ValueError, OverflowError):
        return None
    return out


def _read(node: Node, r: _Reader, rows: np.ndarray) -> pa.Array:
    n = len(rows)
    kind = node.kind
    if kind == "null":
        return pa.nulls(n, node.raw)
    if kind == "boolean":
        b = r.fixed_bytes(rows, 1)[:, 0]
        if (b > 1).any():
            raise Malformed("a boolean that is not 0 or 1")
        return pa.array(b.astype(bool), pa.bool_())
    if kind in ("int", "long"):
        v = r.varint(rows)
        if kind == "int" and ((v < -(2**31)) | (v >= 2**31)).any():
            raise Malformed("an int out of range")
        return pa.array(v.astype(np.int32 if kind == "int" else np.int64), node.raw)
    if kind in ("float", "double"):
        width = 4 if kind == "float" else 8
        raw = r.fixed_bytes(rows, width)
        values = np.ascontiguousarray(raw).view("<f4" if width == 4 else "<f8")[:, 0]
        return pa.array(values, node.raw)
    if kind in ("string", "bytes"):
        offsets, data = r.blobs(rows)
        return _binary(node.raw, n, offsets, data)
    if kind == "fixed":
        data = r.fixed_bytes(rows, node.size).reshape(-1)
        offsets = np.arange(0, (n + 1) * node.size, node.size, dtype=np.int64)
        return _binary(node.raw, n, offsets, data)
    if kind == "enum":
        index = r.varint(rows)
        if ((index < 0) | (index >= len(node.names))).any():
            raise Malformed("an enum index out of range")
        return pa.array(node.names, node.raw).take(pa.array(index))
    if kind == "decimal":
        return _decimal(node, r, rows)
    if kind == "record":
        children = [_read(c, r, rows) for c in node.children]
        return pa.StructArray.from_arrays(children, fields=list(node.raw))
    if kind == "nullable":
        branch = r.varint(rows)
        if ((branch != 0) & (branch != 1)).any():
            raise Malformed("a union branch out of range")
        present = branch != node.size
        inner = _read(node.children[0], r, rows[present])
        where = np.cumsum(present) - 1
        index = pa.array(where, pa.int64(), mask=~present)
        return inner.take(index)
    raise Malformed(kind)


def _binary(t: pa.DataType, n: int, offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    if offsets[-1] >= 2**31:
        raise Malformed("more than 2 GiB of strings in one batch")
    return pa.Array.from_buffers(
        t, n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data.tobytes())]
    )


def _decimal(node: Node, r: _Reader, rows: np.ndarray) -> pa.Array:
    """Big-endian two's complement (Avro's decimal) → little-endian 16-byte decimal128."""
    if node.size:
        lengths = np.full(len(rows), node.size, np.int64)
    else:
        lengths = r.varint(rows)
        if ((lengths < 1) | (lengths > 16)).any():
            raise Malformed("a decimal of no bytes or over 16")
    at = r.pos[rows]
    cols = np.arange(16)
    # Column j of the big-endian 16 bytes: byte j - (16 - length) of the value, else the sign.
    src = at[:, None] + cols[None, :] - (16 - lengths)[:, None]
    inside = cols[None, :] >= (16 - lengths)[:, None]
    gathered = r.buf[np.where(inside, src, at[:, None])]
    sign = np.where(r.buf[at] >= 0x80, np.uint8(0xFF), np.uint8(0))
    big = np.where(inside, gathered, sign[:, None]).astype(np.uint8)
    r.pos[rows] = at + lengths
    r._check(rows)
    little = np.ascontiguousarray(big[:, ::-1])
    wide = pa.decimal128(38, node.raw.scale)
    values = pa.Array.from_buffers(wide, len(rows), [None, pa.py_buffer(little.tobytes())])
    return values.cast(node.raw)  # ArrowInvalid for a value wider than the schema's precision
