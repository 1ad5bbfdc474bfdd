"""Protobuf schemas as a Schema Registry answers them, made into descriptors.

Registries answer a Protobuf schema in one of two forms (Confluent's turns what it stores into
``.proto`` text; Apicurio gives back what was registered, and Confluent's Python serializer
registers a base64 ``FileDescriptorProto``): both are read. Text is compiled by ``protoc``
(grpcio-tools' build, Google's own parser) in a child process with a deadline, once per schema
id; a descriptor is taken as it is. A schema's references are other files it imports, under
their import names, in either form.

Imports that are not references come from the files every Protobuf user has: Google's
well-known types (``google/protobuf/*.proto``, shipped with grpcio-tools), ``google/type``'s
Date and TimeOfDay and Confluent's ``confluent/meta.proto`` and ``confluent/type/decimal.proto``
(their messages as registered schemas use them, in ``protos/``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from daemon.connectors.converters.registry.avro import SchemaRefused

#: The name the registered schema's own text is compiled under (its imports use their own).
MAIN = "__registered__.proto"
_BUNDLED = Path(__file__).with_name("protos")
#: protoc's deadline per schema (it reads a few kilobytes; a start takes ~60 ms here).
PROTOC_TIMEOUT = 30.0
#: Where Connect's options for a field (precision, scale, connect.type) live.
META_FIELD = 1088


def _wkt_dir() -> Path:
    import grpc_tools

    return Path(grpc_tools.__file__).with_name("_proto")


def descriptor_of(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A schema text that is a base64 ``FileDescriptorProto``, read; None for ``.proto`` text."""
    compact = "".join(text.split())
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except DecodeError:
        return None
    return proto if proto.message_type or proto.enum_type or proto.dependency else None


def compile_texts(
    sources: Mapping[str, str],
    given: Sequence[descriptor_pb2.FileDescriptorProto] = (),
    targets: Sequence[str] = (),
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """``sources`` (import name → ``.proto`` text) compiled by protoc, with ``given`` descriptors
    and the bundled and well-known files to import from; every file the ``targets`` (default:
    all sources) needed, by name. ``SchemaRefused`` with protoc's message."""
    with tempfile.TemporaryDirectory(prefix="connectd-protoc-") as tmp:
        root = Path(tmp, "src")
        for name, text in sources.items():
            path = PurePosixPath(name)
            if path.is_absolute() or ".." in path.parts or not name:
                raise SchemaRefused(f"a reference named {name!r} is not a relative import path")
            where = root.joinpath(*path.parts)
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(text, encoding="utf-8")
        out = Path(tmp, "set.pb")
        args = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{root}",
            f"-I{_BUNDLED}",
            f"-I{_wkt_dir()}",
            f"--descriptor_set_out={out}",
            "--include_imports",
        ]
        if given:
            known = Path(tmp, "given.pb")
            known.write_bytes(descriptor_pb2.FileDescriptorSet(file=given).SerializeToString())
            args.append(f"--descriptor_set_in={known}")
        args += list(targets or sources)
        try:
            done = subprocess.run(
                args,
                cwd=tmp,
                capture_output=True,
                timeout=PROTOC_TIMEOUT,
                env={**os.environ, "LC_ALL": "C"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SchemaRefused(
                f"protoc did not read the schema within {PROTOC_TIMEOUT:g} s"
            ) from None
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().replace(f"{root}/", "")
            raise SchemaRefused(f"not a valid .proto schema: {why[:1000]}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
        return {f.name: f for f in files}


@functools.cache
def builtin_files() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """The bundled and well-known files, compiled once per process."""
    wkt = _wkt_dir() / "google" / "protobuf"
    names = [f"google/protobuf/{p.name}" for p in sorted(wkt.glob("*.proto"))]
    names += [str(p.relative_to(_BUNDLED)) for p in sorted(_BUNDLED.rglob("*.proto"))]
    return compile_texts({}, targets=names)


def file_set(
    text: str, references: Sequence[tuple[str, str]]
) -> tuple[descriptor_pool.DescriptorPool, descriptor_pb2.FileDescriptorProto]:
    """A pool holding the schema ``text`` and everything it imports, and the schema's own file
    (whose messages the wire format's message indexes count); ``SchemaRefused``."""
    given: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    sources: dict[str, str] = {}
    for name, body in (*references, (MAIN, text)):
        proto = descriptor_of(body)
        if proto is not None:
            proto.name = name
            given[name] = proto
        else:
            sources[name] = body
    files = dict(given)
    if sources:
        files.update(compile_texts(sources, list(given.values())))
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    builtins: dict[str, descriptor_pb2.FileDescriptorProto] | None = None

    def add(name: str, chain: tuple[str, ...]) -> None:
        nonlocal builtins
        if name in added:
            return
        if name in chain:
            raise SchemaRefused(f"{name} imports itself through {' → '.join(chain)}")
        proto = files.get(name)
        if proto is None:
            builtins = builtin_files() if builtins is None else builtins
            proto = builtins.get(name)
        if proto is None:
            raise SchemaRefused(
                f"the schema imports {name!r}, which is neither one of its references nor a "
                "well-known type"
            )
        for dep in proto.dependency:
            add(dep, (*chain, name))
        try:
            pool.Add(proto)
        except (TypeError, ValueError, KeyError) as e:
            raise SchemaRefused(f"{name} cannot be loaded: {e}") from e
        added.add(name)

    add(MAIN, ())
    return pool, files[MAIN]


def meta_params(options: bytes) -> dict[str, str]:
    """Confluent's ``(confluent.field_meta).params`` of a field's serialized options: the
    Connect parameters (``connect.type``, ``precision``, ``scale``) a schema gives a field."""
    params: dict[str, str] = {}
    for number, body in _fields(options):
        if number != META_FIELD or not isinstance(body, bytes):
            continue
        for n, entry in _fields(body):
            if n == 2 and isinstance(entry, bytes):
                kv = {k: v for k, v in _fields(entry) if isinstance(v, bytes)}
                params[kv.get(1, b"").decode("utf-8", "replace")] = kv.get(2, b"").decode(
                    "utf-8", "replace"
                )
    return params


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a serialized message: varints and fixed values as
    integers, length-delimited ones as bytes; nothing for bytes that do not parse."""
    out: list[tuple[int, int | bytes]] = []
    pos, end = 0, len(data)
    try:
        while pos < end:
            key, pos = varint(data, pos)
            number, wire = key >> 3, key & 7
            if wire == 0:
                value, pos = varint(data, pos)
                out.append((number, value))
            elif wire == 2:
                size, pos = varint(data, pos)
                if pos + size > end:
                    return out
                out.append((number, data[pos : pos + size]))
                pos += size
            elif wire in (1, 5):
                width = 8 if wire == 1 else 4
                out.append((number, int.from_bytes(data[pos : pos + width], "little")))
                pos += width
            else:
                return out
    except IndexError:
        pass
    return out


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and where it ends; ``IndexError`` past the data's end
    or past ten bytes."""
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")
