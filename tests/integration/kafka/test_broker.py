"""The development broker is a real Kafka: round trips, committed offsets, rebalances, kafkactl."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord
from support.kafka import consume_all, free_port, kafkactl, produce
from support.kafka_fixtures import TopicFactory

from daemon.kafka import traffic
from daemon.kafka.client import client_of

pytestmark = pytest.mark.integration


def _group_consumer(bootstrap: str, topic: str, group: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=300,  # notice a rebalance quickly
        session_timeout_ms=6000,  # the broker's minimum by default
    )


async def _poll_until(
    consumers: list[AIOKafkaConsumer], done: Callable[[], bool], timeout: float = 30.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Poll every consumer until `done()` holds; return what they fetched meanwhile."""
    got: list[ConsumerRecord[bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"condition not met in {timeout}s"
        batches = await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
        for batch in batches:
            for recs in batch.values():
                got.extend(recs)
    return got


async def test_round_trip_keeps_exact_keys_values_and_order(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic()
    sent: list[tuple[bytes | None, bytes]] = [
        (b"k1", b"first"),
        (None, b"no key"),
        (b"k2", b""),
        (b"\x00\xff", bytes(range(256))),
        (b"k1", b"x" * 100_000),
    ]
    assert await produce(kafka_bootstrap, topic, sent) == len(sent)

    got = await consume_all(kafka_bootstrap, topic, expected=len(sent), timeout=30)

    assert [(r.key, r.value) for r in got] == sent
    assert [r.offset for r in got] == list(range(len(sent)))
    assert {r.partition for r in got} == {0}


async def test_consume_all_says_how_many_arrived_on_timeout(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic()
    await produce(kafka_bootstrap, topic, 2)
    with pytest.raises(TimeoutError, match="2 of 3 records"):
        await consume_all(kafka_bootstrap, topic, expected=3, timeout=2)


async def test_new_group_member_resumes_after_committed_offset(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic()
    await produce(kafka_bootstrap, topic, 10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)

    first = _group_consumer(kafka_bootstrap, topic, group)
    await first.start()
    try:
        got: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < 4:
            assert time.monotonic() < deadline, f"only {len(got)} records in 30s"
            batch = await first.getmany(timeout_ms=500, max_records=4 - len(got))
            got.extend(r for recs in batch.values() for r in recs)
        assert [r.value for r in got] == [b"value-%d" % i for i in range(4)]
        await first.commit({tp: 4})
        assert await first.committed(tp) == 4
    finally:
        await first.stop()

    second = _group_consumer(kafka_bootstrap, topic, group)
    await second.start()
    try:
        rest: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(rest) < 6:
            assert time.monotonic() < deadline, f"only {len(rest)} records in 30s"
            batch = await second.getmany(timeout_ms=500)
            rest.extend(r for recs in batch.values() for r in recs)
        assert [r.offset for r in rest] == list(range(4, 10))
        assert [r.value for r in rest] == [b"value-%d" % i for i in range(4, 10)]
    finally:
        await second.stop()


async def test_rebalance_gives_each_of_two_members_one_partition(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await kafka_topic(partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    both = {TopicPartition(topic, 0), TopicPartition(topic, 1)}

    c1 = _group_consumer(kafka_bootstrap, topic, group)
    c2 = _group_consumer(kafka_bootstrap, topic, group)
    await c1.start()
    try:
        await _poll_until([c1], lambda: c1.assignment() == both)
        await c2.start()
        await _poll_until(
            [c1, c2],
            lambda: (
                len(c1.assignment()) == 1
                and len(c2.assignment()) == 1
                and c1.assignment() | c2.assignment() == both
            ),
        )
        # Each member now reads exactly its own partition.
        for p in (0, 1):
            await produce(kafka_bootstrap, topic, [(None, b"to-%d" % p)], partition=p)
        seen: dict[int, list[tuple[int, bytes]]] = {1: [], 2: []}

        async def drain(n: int, c: AIOKafkaConsumer) -> None:
            batch = await c.getmany(timeout_ms=200)
            seen[n].extend((r.partition, r.value) for recs in batch.values() for r in recs)

        deadline = time.monotonic() + 30
        while len(seen[1]) + len(seen[2]) < 2:
            assert time.monotonic() < deadline, f"records not delivered in 30s: {seen}"
            await asyncio.gather(drain(1, c1), drain(2, c2))
        for n, c in ((1, c1), (2, c2)):
            (mine,) = c.assignment()
            assert seen[n] == [(mine.partition, b"to-%d" % mine.partition)]
    finally:
        await asyncio.gather(c1.stop(), c2.stop())


def _kafkactl(*args: Any) -> subprocess.CompletedProcess[str]:
    script = kafkactl.HERE / "kafkactl.py"
    return subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_kafkactl_up_is_idempotent_and_down_stops_by_pid(tmp_path: Path) -> None:
    port = free_port()
    run_dir = tmp_path / "broker"
    where = ("--port", port, "--dir", run_dir)
    try:
        up = _kafkactl("up", *where)
        if up.returncode == kafkactl.EX_UNAVAILABLE:
            pytest.skip(f"kafkactl cannot run a broker here: {up.stderr.strip()}")
        assert up.returncode == 0, up.stderr
        assert up.stdout == f"127.0.0.1:{port}\n"
        pid = int((run_dir / "broker.pid").read_text())
        assert kafkactl.is_alive(pid)

        again = _kafkactl("up", *where)
        assert again.returncode == 0, again.stderr
        assert again.stdout == f"127.0.0.1:{port}\n"
        assert int((run_dir / "broker.pid").read_text()) == pid

        status = _kafkactl("status", *where)
        assert status.returncode == 0
        assert status.stdout.startswith(f"running: pid {pid}, Kafka ")
        assert kafkactl.probe("127.0.0.1", port) == [1]
    finally:
        down = _kafkactl("down", *where)
    assert down.returncode == 0, down.stderr
    assert not kafkactl.is_alive(pid)
    # `kafkactl up` detached the broker and exited, so the broker was re-parented to this
    # process (a subreaper, tests/conftest.py): once `down` has killed it, it is ours to reap.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    assert not (run_dir / "broker.pid").exists()

    down_again = _kafkactl("down", *where)
    assert down_again.returncode == 0, down_again.stderr
    assert "no broker running" in down_again.stderr
    status = _kafkactl("status", *where)
    assert status.returncode == 3
    assert status.stdout.startswith("not running")


async def test_a_tracked_consumers_traffic_counts_what_the_broker_sent(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    """``daemon.kafka.traffic`` on a real broker: the bytes received cover every record fetched
    (they are in the fetch responses) and connections are the client's live ones."""
    topic = await kafka_topic()
    sent = [(None, os.urandom(10_000)) for _ in range(50)]  # random: no compression gains
    assert await produce(kafka_bootstrap, topic, sent) == len(sent)
    client_id = f"traffic-{uuid.uuid4().hex[:8]}"
    counted = traffic.track(client_id)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap, client_id=client_id,
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    counted.attach(client_of(consumer))
    try:
        await consumer.start()
        got: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < len(sent):
            assert time.monotonic() < deadline, f"{len(got)} of {len(sent)} records in 30 s"
            for recs in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(recs)
        assert counted.bytes_in > 50 * 10_000 and counted.responses >= 3  # metadata, fetches
        assert counted.connections() >= 1
    finally:
        await consumer.stop()
        traffic.release(counted)
    assert counted.connections() == 0
