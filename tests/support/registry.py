"""A real Schema Registry for tests (Apicurio Registry through dev/registry/registryctl.py,
Confluent's API), tracked by PID, and records written by Confluent's own serializers
(confluent-kafka's ``SchemaRegistryClient`` with ``AvroSerializer``, ``ProtobufSerializer`` and
``JSONSerializer``):
the producer side is code no one here wrote.

``schema_registry`` is session-scoped (one registry per pytest worker process, started on first
use, about 3 s); ``paused`` stops it (SIGSTOP: connections hang, as with a registry that does
not answer) and lets it go on after.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from support import procs

_PATH = Path(__file__).resolve().parents[2] / "dev" / "registry" / "registryctl.py"


def _load() -> ModuleType:
    name = "connectd_dev_registryctl"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


registryctl = _load()


@dataclass
class Registry:
    """A running registry: ``url`` is what ``schema.registry.url`` takes."""

    url: str
    pid: int

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url})

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The registry stopped (SIGSTOP) inside the block, running again after it."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    run_dir = tmp_path_factory.mktemp("registry")
    port = registryctl.free_port()
    running = registryctl.up(port, run_dir, die_with_parent=True)
    unregister = procs.register_session_owner(lambda: [running.pid])
    try:
        yield Registry(running.url, running.pid)
    finally:
        registryctl.down(run_dir)
        unregister()


def serialize(
    registry: Registry,
    schema: Mapping[str, Any] | str,
    topic: str,
    values: Sequence[Mapping[str, Any] | None],
    *,
    kind: str = "avro",
) -> list[bytes | None]:
    """``values`` written by Confluent's ``AvroSerializer`` (``kind="json"``: its
    ``JSONSerializer``) with ``schema`` (registered on first use under the topic's subject,
    ``TopicNameStrategy``); ``None`` stays a tombstone."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    with registry.client() as client:
        serializer = (
            AvroSerializer(client, text) if kind == "avro" else JSONSerializer(text, client)
        )
        return [None if v is None else serializer(v, ctx) for v in values]


def proto_classes(
    text: str, name: str = "schema.proto", imports: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The message classes (by full name) of a ``.proto`` text, compiled by protoc with
    ``imports`` (import name → text) and the well-known and Confluent files to import (each call
    its own pool, so one file name can hold several versions of a schema)."""
    from google.protobuf import descriptor_pool, message_factory

    from daemon.connectors.converters.registry.protofiles import compile_texts

    files = compile_texts({**(imports or {}), name: text}, targets=[name])
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: str) -> None:
        if file not in added:
            for dep in files[file].dependency:
                add(dep)
            pool.Add(files[file])
            added.add(file)

    add(name)
    out: dict[str, Any] = {}

    def walk(prefix: str, types: Any) -> None:
        for t in types:
            full = f"{prefix}{t.name}"
            out[full] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
            walk(f"{full}.", t.nested_type)

    walk(f"{files[name].package}." if files[name].package else "", files[name].message_type)
    return out


def serialize_protobuf(
    registry: Registry, message_class: Any, topic: str, values: Sequence[Any]
) -> list[bytes | None]:
    """Messages written by Confluent's ``ProtobufSerializer`` (which registers the schema as a
    base64 descriptor under the topic's subject, its imports skipped when well known)."""
    ctx = SerializationContext(topic, MessageField.VALUE)
    with registry.client() as client:
        serializer = ProtobufSerializer(message_class, client)
        return [None if v is None else serializer(v, ctx) for v in values]


def produce_serialized(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    partitions: int = 1,
    timeout: float = 60.0,
) -> None:
    """``values`` (already serialized) to ``topic`` with confluent-kafka's producer, record
    ``i`` to partition ``i % partitions``; returns once every record is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    failed: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        while True:
            try:
                producer.produce(topic, value, key, partition=i % partitions, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.1)
    deadline = time.monotonic() + timeout
    while producer.flush(1.0) > 0:
        assert time.monotonic() < deadline, f"records not acknowledged within {timeout} s"
    assert not failed, failed[:5]
