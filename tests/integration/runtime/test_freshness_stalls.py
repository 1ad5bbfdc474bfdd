"""Freshness and stalls on a real broker and a real daemon, read over HTTP.

- A sink that stops committing while records arrive (``StallingSink``: it accepts every record
  but ``pre_commit`` returns at most ``CAPS[name]``): within ``task.stall.warn.ms`` its task
  status has ``stalled`` (since when, the lag) and ``/health`` names it, 200 by default and 503
  with ``health.stalled.unhealthy=true``; once it commits again both are clear.
- A ParquetSink that commits (the session's warm Spark pool): ``/metrics`` has, per partition,
  the committed offset and log end (both the records produced), lag 0, the time of the last
  commit and the event time of the newest committed record (the producer's timestamp).
- A topic written by a transactional producer: each commit marker takes an offset after the
  transaction's records, so a task that committed every record is one offset short of the log
  end. A caught-up task (EchoSink, ParquetSink) is never stalled and its lag is 0, while a task
  on the same topic that stops committing still is stalled.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.connectors.api import SinkConnector, SinkTask, SinkTaskContext
from daemon.connectors.records import RecordBatch, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

#: Per connector name: the highest offset ``pre_commit`` reports durable (``None``: all).
CAPS: dict[str, int | None] = {}


class StallingTask(SinkTask):
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.name = context.task_id.connector

    async def put(self, batch: RecordBatch) -> None:
        pass  # accepted, held "in a buffer" that is never written

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        cap = CAPS.get(self.name)
        return {tp: o if cap is None else min(o, cap) for tp, o in offsets.items()}

    async def close(self, partitions: Collection[TopicPartition]) -> None:
        pass

    async def stop(self) -> None:
        pass


class StallingSink(SinkConnector):
    def task_class(self) -> type[SinkTask]:
        return StallingTask


def samples(text: str, name: str, connector: str) -> dict[tuple[str, ...], float]:
    """(task, topic, partition) → value of one metric's samples for ``connector``."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels.get("connector") == connector:
                key = tuple(s.labels[k] for k in ("task", "topic", "partition") if k in s.labels)
                out[key] = s.value
    return out


async def get(http: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with http.get(path) as r:
        return r.status, await (r.json() if "json" in r.content_type else r.text())


@pytest.mark.parametrize("unhealthy", [False, True], ids=["health-200", "health-503"])
async def test_a_task_that_stops_committing_is_stalled(
    unhealthy: bool,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    name = "stall-" + uuid.uuid4().hex[:8]
    CAPS[name] = 20
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "offset.flush.interval.ms": "200",
            "task.stall.warn.ms": "2000",
            "health.stalled.unhealthy": str(unhealthy).lower(),
        },
    )
    d = await run_daemon(props, executors=plain_pool)
    config = {"connector.class": f"{__name__}:StallingSink", "topics": topic, "tasks.max": "1"}
    async with aiohttp.ClientSession(d.rest_url) as http:
        async with http.post("/connectors", json={"name": name, "config": config}) as r:
            assert r.status == 201, await r.text()
        await produce(kafka_bootstrap, topic, 20, partition=0)

        async def committed(offset: int, lag: int) -> bool:
            _, text = await get(http, "/metrics")
            key = ("0", topic, "0")
            return (
                samples(text, "connectd_partition_committed_offset", name).get(key) == offset
                and samples(text, "connectd_partition_commit_lag_records", name).get(key) == lag
            )

        await wait_until(lambda: committed(20, 0), 60, "the first 20 records committed")
        status, health = await get(http, "/health")
        assert (status, health["status"]) == (200, "healthy") and "stalled" not in health

        # Records keep arriving; the sink takes them but commits nothing more.
        await produce(kafka_bootstrap, topic, 15, partition=0)
        arrived = time.time()
        await wait_until(lambda: committed(20, 15), 60, "the lag of 15 seen")

        async def stalled() -> Any:
            _, s = await get(http, f"/connectors/{name}/status")
            return s["tasks"][0].get("stalled")

        stall = await wait_until(stalled, 30, "the task reported stalled")
        seen = time.time()
        assert stall["lag"] == 15 and stall["partitions"] == [f"{topic}-0"]
        since = _epoch(stall["since"])
        # The clock started when the lag appeared (after the last commit), and ran its 2 s.
        assert arrived - 2.0 <= since <= arrived + 5.0
        assert seen - since >= 2.0
        assert (await get(http, f"/connectors/{name}/tasks/0/status"))[1]["stalled"] == stall

        status, health = await get(http, "/health")
        expected = (503, "unhealthy") if unhealthy else (200, "healthy")
        assert (status, health["status"]) == expected, health
        assert f"{name}-0 (no commit since {stall['since']}, lag 15)" in health["message"]
        assert health["stalled"] == [
            {"connector": name, "task": 0, "since": stall["since"], "lag": 15}
        ]
        _, text = await get(http, "/metrics")
        assert samples(text, "connectd_task_stalled", name) == {("0",): 1.0}

        # It commits again: no stall, a healthy worker.
        CAPS[name] = None
        await wait_until(lambda: committed(35, 0), 60, "the rest committed")
        assert await stalled() is None
        status, health = await get(http, "/health")
        assert (status, health["status"]) == (200, "healthy") and "stalled" not in health


def _epoch(iso_time: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso_time).timestamp()


async def test_a_committing_parquet_sink_is_fresh(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    warm_spark: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    # Event times a minute in the past, one millisecond apart: the newest committed record's
    # is known exactly.
    base_ms = int(time.time() * 1000) - 60_000
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for p in (0, 1):
            for i in range(30):
                await producer.send_and_wait(
                    topic, b"v%d" % i, partition=p, timestamp_ms=base_ms + 100 * p + i
                )
    finally:
        await producer.stop()
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    d = await run_daemon(props, executors=warm_spark)
    name = "fresh-" + uuid.uuid4().hex[:8]
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "1",
        "path": str(tmp_path / "table"),
        "flush.max.records": "1000",
        "flush.interval.ms": "500",
    }
    started = time.time()
    async with aiohttp.ClientSession(d.rest_url) as http:
        async with http.post("/connectors", json={"name": name, "config": config}) as r:
            assert r.status == 201, await r.text()
        keys = [("0", topic, "0"), ("0", topic, "1")]

        async def fresh() -> str | None:
            _, text = await get(http, "/metrics")
            done = samples(text, "connectd_partition_committed_offset", name)
            return text if all(done.get(k) == 30 for k in keys) else None

        text = await wait_until(fresh, 180, "both partitions committed")
    assert samples(text, "connectd_partition_log_end_offset", name) == dict.fromkeys(keys, 30)
    assert samples(text, "connectd_partition_commit_lag_records", name) == dict.fromkeys(keys, 0)
    last = samples(text, "connectd_partition_last_commit_timestamp_seconds", name)
    assert set(last) == set(keys)
    assert all(started <= t <= time.time() for t in last.values()), last
    event = samples(text, "connectd_partition_committed_event_timestamp_seconds", name)
    assert event == {k: (base_ms + 100 * p + 29) / 1000 for p, k in enumerate(keys)}
    assert samples(text, "connectd_task_stalled", name) == {("0",): 0.0}


@pytest.mark.parametrize("sink", ["EchoSink", "ParquetSink"])
async def test_a_caught_up_task_on_a_transactional_topic_is_never_stalled(
    sink: str,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    # ParquetSink writes through Spark: the session's warm pool; EchoSink needs none.
    pool = request.getfixturevalue("warm_spark" if sink == "ParquetSink" else "plain_pool")
    topic = await kafka_topic(partitions=1)
    # Two transactions of 5 records: records at 0..4 and 6..10, commit markers at 5 and 11.
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, transactional_id="tx-" + uuid.uuid4().hex[:8]
    )
    await producer.start()
    try:
        for t in range(2):
            async with producer.transaction():
                for i in range(5):
                    await producer.send_and_wait(topic, b"t%d-%d" % (t, i), partition=0)
    finally:
        await producer.stop()
    warn = 1.0
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "offset.flush.interval.ms": "200",
            "task.stall.warn.ms": str(int(warn * 1000)),
            "health.stalled.unhealthy": "true",
        },
    )
    d = await run_daemon(props, executors=pool)
    fresh, stuck = "txfresh-" + uuid.uuid4().hex[:8], "txstuck-" + uuid.uuid4().hex[:8]
    CAPS[stuck] = 3  # commits offsets 0..2, then never again
    configs = {
        fresh: {"connector.class": sink, "topics": topic, "tasks.max": "1"},
        stuck: {"connector.class": f"{__name__}:StallingSink", "topics": topic, "tasks.max": "1"},
    }
    if sink == "ParquetSink":
        configs[fresh].update(path=str(tmp_path / "table"), **{"flush.interval.ms": "200"})
    key = ("0", topic, "0")
    async with aiohttp.ClientSession(d.rest_url) as http:
        for name, config in configs.items():
            async with http.post("/connectors", json={"name": name, "config": config}) as r:
                assert r.status == 201, await r.text()

        async def all_committed() -> bool:
            _, text = await get(http, "/metrics")
            return (
                samples(text, "connectd_partition_committed_offset", fresh).get(key) == 11
                and samples(text, "connectd_partition_log_end_offset", fresh).get(key) == 12
            )

        await wait_until(all_committed, 120, "every record committed, the log end past a marker")

        async def stall_of(name: str) -> Any:
            _, s = await get(http, f"/connectors/{name}/status")
            return s["tasks"][0].get("stalled")

        # The stuck task is stalled (the stall clock runs the same for both tasks) ...
        stall = await wait_until(lambda: stall_of(stuck), 30, "the stuck task stalled")
        assert stall["lag"] > 0 and stall["partitions"] == [f"{topic}-0"]
        # ... and the caught-up one never is, well past the threshold.
        until = time.monotonic() + 4 * warn
        while time.monotonic() < until:
            assert await stall_of(fresh) is None
            status, health = await get(http, "/health")
            assert status == 503 and [s["connector"] for s in health["stalled"]] == [stuck]
            await asyncio.sleep(0.2)  # the pace of the polling, not a synchronisation
        _, text = await get(http, "/metrics")
    assert samples(text, "connectd_partition_commit_lag_records", fresh) == {key: 0}
    assert samples(text, "connectd_task_stalled", fresh) == {("0",): 0.0}
    assert samples(text, "connectd_task_stalled", stuck) == {("0",): 1.0}
