"""``GET /metrics`` of a real daemon while records stream: a broker, the session's warm executor
pool, a ``RecordingSink`` whose ``put`` runs a real executor write for every batch.

After every record is consumed and written, the scrape (over HTTP, parsed as Prometheus text)
shows per-task consumed and written counts that add up to what was produced, write-latency
observations, and a consumer lag of 0 for every partition.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.daemon import run_daemon, wait_until, worker_properties  # noqa: F401 (fixture)
from support.kafka import produce
from support.prometheus import Samples, samples

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
PARTITIONS = 2
PER_PARTITION = 40


def _total(scraped: Samples, name: str, c: str) -> float:
    return sum(v for labels, v in scraped.get(name, []) if labels.get("connector") == c)


async def test_metrics_count_records_writes_and_lag(
    run_daemon: Any,  # noqa: F811
    kafka_bootstrap: str,
    kafka_topic: Any,
    spark_pool: Any,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=PARTITIONS)
    for p in range(PARTITIONS):
        await produce(
            kafka_bootstrap, topic, [(None, b"v%d" % i) for i in range(PER_PARTITION)], partition=p
        )
    expected = PARTITIONS * PER_PARTITION
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props, executors=spark_pool)
    name = "metrics-" + uuid.uuid4().hex[:8]
    config = {
        "connector.class": "support.daemon:RecordingSink",
        "tasks.max": str(PARTITIONS),
        "topics": topic,
        "record.key": name,
        "put.fn": "daemon.executor.testing:count_rows",
    }
    async with aiohttp.ClientSession(daemon.rest_url) as http:
        async with http.post("/connectors", json={"name": name, "config": config}) as r:
            assert r.status == 201, await r.text()

        last: dict[str, Any] = {}

        async def caught_up() -> bool:
            async with http.get("/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain")
                s = samples(await r.text())
            lags = {
                (labels["topic"], labels["partition"]): v
                for labels, v in s.get("connectd_consumer_lag_records", [])
                if labels.get("connector") == name
            }
            last.update(samples=s, lags=lags)
            return (
                _total(s, "connectd_records_consumed_total", name) == expected
                and _total(s, "connectd_records_written_total", name) == expected
                and len(lags) == PARTITIONS
                and all(v == 0 for v in lags.values())
            )

        try:
            await wait_until(caught_up, 180.0, "every record consumed and written, lag 0")
        except AssertionError:
            s = last.get("samples", {})
            raise AssertionError(
                f"consumed {_total(s, 'connectd_records_consumed_total', name)},"
                f" written {_total(s, 'connectd_records_written_total', name)}"
                f" of {expected}; lags {last.get('lags')}"
            ) from None

    s = last["samples"]
    assert last["lags"] == {(topic, str(p)): 0.0 for p in range(PARTITIONS)}
    per_task = {
        labels["task"]: v
        for labels, v in s["connectd_records_consumed_total"]
        if labels["connector"] == name
    }
    assert sum(per_task.values()) == expected and set(per_task) <= {"0", "1"}
    assert _total(s, "connectd_write_seconds_count", name) > 0
    assert _total(s, "connectd_write_seconds_sum", name) > 0
    # The loop-lag histogram is fed by the daemon's own monitor.
    assert s["connectd_event_loop_lag_seconds_count"][0][1] > 0

    # A deleted connector's task series go with it (as Connect removes a stopped task's
    # metrics group): no stale lag or counters.
    async with aiohttp.ClientSession(daemon.rest_url) as http:
        async with http.delete(f"/connectors/{name}") as r:
            assert r.status == 204, await r.text()

        async def forgotten() -> bool:
            async with http.get("/metrics") as r:
                text = await r.text()
            return f'connector="{name}"' not in text

        await wait_until(forgotten, 60.0, "no series of the deleted connector")
