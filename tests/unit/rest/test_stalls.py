"""A stalled task in ``/connectors/{c}/status``, ``/health`` and ``/metrics`` (fake worker; the
real daemon is in tests/integration/runtime/test_freshness_stalls.py)."""

from __future__ import annotations

import dataclasses

from support.fake_worker import FakeWorker, local_settings, serving_client

from daemon.metrics import Metrics
from daemon.runtime.model import PartitionFreshness, Stall, TaskStatus

STALL = Stall(since="2026-11-25T15:00:00.000+00:00", lag=42, partitions=("t-0",))
FRESH = PartitionFreshness("t", 0, 100, 142, 42, 1_790_000_000.5, 1_789_999_990.25)


class StalledWorker(FakeWorker):
    """Task 0 of every connector is stalled on ``t-0``."""

    def _status(self, c: object, t: object) -> TaskStatus:
        status = super()._status(c, t)  # type: ignore[arg-type]
        if status.id != 0:
            return status
        return dataclasses.replace(status, stalled=STALL, freshness=(FRESH,))


async def test_health_names_a_stalled_task_and_stays_200_by_default() -> None:
    async with serving_client(StalledWorker()) as client:
        await client.create("sink", tasks_max="2")
        status = (await client.get("/connectors/sink/status")).json
        assert status["tasks"][0]["stalled"] == {
            "since": STALL.since,
            "lag": 42,
            "partitions": ["t-0"],
        }
        assert "stalled" not in status["tasks"][1]
        health = await client.get("/health")
        assert health.status == 200
        assert health.json["status"] == "healthy"
        assert (
            "sink-0 (no commit since 2026-11-25T15:00:00.000+00:00, lag 42)"
            in (health.json["message"])
        )
        assert health.json["stalled"] == [
            {"connector": "sink", "task": 0, "since": STALL.since, "lag": 42}
        ]


async def test_health_is_503_for_a_stall_when_asked() -> None:
    settings = local_settings(health_stalled_unhealthy=True)
    async with serving_client(StalledWorker(), settings) as client:
        await client.create("sink")
        health = await client.get("/health")
        assert health.status == 503
        assert health.json["status"] == "unhealthy"
        assert "sink-0" in health.json["message"]


async def test_health_without_stalls_is_unchanged() -> None:
    async with serving_client(FakeWorker(), local_settings(health_stalled_unhealthy=True)) as c:
        await c.create("sink")
        health = await c.get("/health")
        assert health.status == 200 and "stalled" not in health.json


async def test_freshness_gauges_are_read_from_the_status() -> None:
    metrics = Metrics()
    async with serving_client(StalledWorker(), metrics=metrics) as client:
        await client.create("sink", tasks_max="2")
        text = (await client.get("/metrics")).text
    labels = 'connector="sink",partition="0",task="0",topic="t"'
    assert f"connectd_partition_committed_offset{{{labels}}} 100.0" in text
    assert f"connectd_partition_log_end_offset{{{labels}}} 142.0" in text
    assert f"connectd_partition_commit_lag_records{{{labels}}} 42.0" in text
    assert f"connectd_partition_last_commit_timestamp_seconds{{{labels}}} 1.7900000005e+09" in text
    assert (
        f"connectd_partition_committed_event_timestamp_seconds{{{labels}}} 1.78999999025e+09"
        in text
    )
    assert 'connectd_task_stalled{connector="sink",task="0"} 1.0' in text
    assert 'connectd_task_stalled{connector="sink",task="1"} 0.0' in text
