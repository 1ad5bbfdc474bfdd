"""Test helpers for a real Kafka broker: start one on free ports, make topics, produce, consume.

The broker is the development broker of dev/kafka/kafkactl.py (KRaft combined mode, jars from
Maven Central), started in a temporary directory and stopped by PID. The async helpers use
aiokafka, each with its own short-lived client, so tests stay independent of each other.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTP
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import for_code
from aiokafka.structs import ConsumerRecord

__all__ = [
    "KafkaBroker",
    "consume_all",
    "create_topic",
    "delete_topic",
    "free_port",
    "kafkactl",
    "produce",
    "unique_topic_name",
]

_KAFKACTL_PATH = Path(__file__).resolve().parents[2] / "dev" / "kafka" / "kafkactl.py"


def _load_kafkactl() -> ModuleType:
    name = "connectd_dev_kafkactl"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _KAFKACTL_PATH)
    assert spec is not None and spec.loader is not None, _KAFKACTL_PATH
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


kafkactl = _load_kafkactl()
"""dev/kafka/kafkactl.py as a module: up(), down(), read_pid(), probe(), KafkactlError, ..."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return int(kafkactl.free_port())


class KafkaBroker:
    """A real single-node broker on free ports in a temporary directory, owned by this process.

    `start()` returns once the broker answers Metadata; `stop()` ends it by PID (SIGTERM, then
    SIGKILL after `stop_timeout`), confirms it is gone, and removes the directory. The broker is
    started with PR_SET_PDEATHSIG, so it is killed if this process dies without calling `stop()`.
    """

    def __init__(
        self,
        version: str | None = None,
        *,
        ready_timeout: float = 90.0,
        stop_timeout: float = 20.0,
        keep_dir: bool = False,
        listeners: Sequence[str] = (),
        properties: Mapping[str, str] | None = None,
        format_args: Sequence[str] = (),
        jvm_options: Sequence[str] = (),
    ) -> None:
        """``listeners``: more listeners besides PLAINTEXT, by security protocol (SSL,
        SASL_SSL...), each on a free port (``listener_ports``); ``properties`` and
        ``format_args``, ``jvm_options``: what they need (``kafkactl.up``)."""
        self.version = version or os.environ.get("KAFKA_VERSION") or kafkactl.DEFAULT_VERSION
        self.listeners = tuple(listeners)
        self.properties = dict(properties or {})
        self.format_args = tuple(format_args)
        self.jvm_options = tuple(jvm_options)
        self.listener_ports: dict[str, int] = {}
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.keep_dir = keep_dir
        self.run_dir: Path | None = None
        self.port: int | None = None
        self.pid: int | None = None
        self.ready_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("the broker is not started")
        return f"127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the broker and return its bootstrap address. Retries on a port race."""
        if self.pid is not None:
            return self.bootstrap
        self.run_dir = Path(tempfile.mkdtemp(prefix="connectd-kafka-"))
        for attempt in range(3):
            port = free_port()
            self.listener_ports = {name: free_port() for name in self.listeners}
            t0 = time.monotonic()
            try:
                broker = kafkactl.up(
                    port,
                    self.version,
                    self.run_dir,
                    ready_timeout=self.ready_timeout,
                    die_with_parent=True,
                    listeners=self.listener_ports,
                    properties=self.properties,
                    format_args=self.format_args,
                    jvm_options=self.jvm_options,
                )
            except kafkactl.PortTaken:
                if attempt == 2:
                    self._remove_dir()
                    raise
                continue
            except BaseException:
                self._remove_dir()
                raise
            self.ready_seconds = time.monotonic() - t0
            self.port, self.pid = port, int(broker.pid)
            return self.bootstrap
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the broker by PID and wait until it is gone. Idempotent."""
        try:
            if self.run_dir is not None and self.pid is not None:
                # down() signals the PID only while it is this directory's broker, and returns
                # once it is reaped: no risk of hitting a reused PID.
                kafkactl.down(self.run_dir, self.stop_timeout)
        finally:
            self.pid = None
            self._remove_dir()

    def halt(self) -> None:
        """Stop the broker process (SIGTERM, by PID), keeping its storage, for `resume()`."""
        if self.run_dir is not None:
            kafkactl.down(self.run_dir, self.stop_timeout)
        self.pid = None

    def resume(self) -> None:
        """Start the halted broker again on the same port and storage (topics, records and
        group offsets kept), as after a machine's restart."""
        if self.run_dir is None:
            raise RuntimeError("the broker was never started")
        broker = kafkactl.restart(
            self.run_dir, ready_timeout=self.ready_timeout, die_with_parent=True
        )
        self.pid = int(broker.pid)

    def pids(self) -> list[int]:
        """The broker's PID while it runs (for the test session's process-leak check)."""
        return [self.pid] if self.pid is not None else []

    def _remove_dir(self) -> None:
        if self.run_dir is not None and not self.keep_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def unique_topic_name(hint: str = "t") -> str:
    """`t-<hint>-<uuid8>`, with the hint reduced to the characters Kafka allows in topic names."""
    clean = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in hint)
    return f"t-{clean.strip('-')[:100]}-{uuid.uuid4().hex[:8]}"


async def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    *,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> str:
    """Create `name` with one replica and wait until every partition has a leader."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        topic = NewTopic(name, partitions, 1, topic_configs=dict(config or {}))
        resp = await admin.create_topics([topic], timeout_ms=int(timeout * 1000))
        for _name, code, *rest in resp.topic_errors:
            if code != 0:
                raise for_code(code)(f"creating topic {name!r}: {rest[0] if rest else code}")
        deadline = time.monotonic() + timeout
        while True:
            (meta,) = await admin.describe_topics([name])
            parts = meta["partitions"]
            if (
                meta["error_code"] == 0
                and len(parts) == partitions
                and all(p["leader"] >= 0 for p in parts)
            ):
                return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} not visible with leaders after {timeout}s")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def delete_topic(bootstrap: str, name: str, *, timeout: float = 30.0) -> None:
    """Delete `name`; a topic that does not exist is not an error."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        resp = await admin.delete_topics([name], timeout_ms=int(timeout * 1000))
        for _name, code, *_ in resp.topic_error_codes:
            if code not in (0, 3):  # 3: UNKNOWN_TOPIC_OR_PARTITION
                raise for_code(code)(f"deleting topic {name!r}")
    finally:
        await admin.close()


async def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]] | int,
    *,
    partition: int | None = None,
) -> int:
    """Produce (key, value) pairs, or N generated records (key None, value b"value-<i>").

    Waits for every record to be acknowledged by the broker (acks=all); returns how many.
    """
    if isinstance(records, int):
        records = [(None, b"value-%d" % i) for i in range(records)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value=value, key=key, partition=partition)
            for key, value in records
        ]
        for fut in futures:
            await fut
    finally:
        await producer.stop()
    return len(futures)


async def consume_all(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout: float = 30.0,
    **consumer_options: Any,
) -> list[ConsumerRecord[bytes, bytes]]:
    """Read `topic` from the beginning (no consumer group) until `expected` records arrived.

    Returns the records in (partition, offset) order — at least `expected`, more if the last
    fetch brought more. Raises TimeoutError, saying how many arrived, after `timeout` seconds.
    """
    options: dict[str, Any] = {"auto_offset_reset": "earliest", "enable_auto_commit": False}
    options.update(consumer_options)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, **options)
    await consumer.start()
    got: list[ConsumerRecord[bytes, bytes]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < expected:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"{len(got)} of {expected} records arrived from {topic!r} in {timeout}s"
                )
            batch = await consumer.getmany(timeout_ms=int(min(left, 1.0) * 1000))
            for recs in batch.values():
                got.extend(recs)
    finally:
        await consumer.stop()
    return sorted(got, key=lambda r: (r.partition, r.offset))


async def topic_size(bootstrap: str, topic: str, partitions: int = 1) -> int:
    """Records in ``topic`` (end minus beginning offsets, read_committed)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    await consumer.start()
    try:
        parts = [KafkaTP(topic, p) for p in range(partitions)]
        consumer.assign(parts)
        ends = await consumer.end_offsets(parts)
        first = await consumer.beginning_offsets(parts)
        return sum(ends[p] - first[p] for p in parts)
    finally:
        await consumer.stop()


async def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """``kafka-delete-records``: the partition's log starts at ``offset`` afterwards."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        tp = KafkaTP(topic, partition)
        low = await admin.delete_records({tp: RecordsToDelete(offset)}, timeout_ms=30_000)
        return int(low[tp])
    finally:
        await admin.close()


async def produce_to(bootstrap: str, topic: str, partition: int, first: int, count: int) -> None:
    values = [(None, b"p%d-%d" % (partition, i)) for i in range(first, first + count)]
    await produce(bootstrap, topic, values, partition=partition)


def dead_letter_settings(topic: str) -> dict[str, str]:
    """A connector's settings for ``errors.tolerance=all`` with a dead-letter topic that carries
    Connect's context headers."""
    return {
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": topic,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }


async def dead_letters(
    bootstrap: str, topic: str, expected: int
) -> list[tuple[bytes | None, dict[str, str]]]:
    """The first ``expected`` records of a dead-letter topic: (value, headers as text)."""
    letters = await consume_all(bootstrap, topic, expected)
    return [(x.value, {k: (v or b"").decode() for k, v in x.headers}) for x in letters]
