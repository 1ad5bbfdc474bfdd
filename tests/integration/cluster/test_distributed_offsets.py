"""The offsets API (KIP-875) in distributed mode, on a ParquetSink whose offsets live in its
table: any worker reads them; altering needs the connector STOPPED (Connect's 400 otherwise),
and what one worker altered the other reads back.

Real ``connectd distributed`` processes, a real Spark write per worker (``local[1]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cluster import ClusterFactory, ClusterWorker
from support.daemon import wait_until
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

pytestmark = pytest.mark.integration

NAME = "parquet"


def _offsets(worker: ClusterWorker) -> dict[int, int] | None:
    code, body = worker.try_rest("GET", f"/connectors/{NAME}/offsets")
    if code != 200:
        return None
    return {o["partition"]["kafka_partition"]: o["offset"]["kafka_offset"] for o in body["offsets"]}


async def test_offsets_through_any_worker(
    cluster: ClusterFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    await produce(kafka_bootstrap, topic, [(None, b"x")] * 10, partition=0)
    await produce(kafka_bootstrap, topic, [(None, b"y")] * 6, partition=1)
    c = await cluster(2, **{"executor.pool.spares": "0"})
    table = tmp_path / "table"
    config = {
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "2",
        "path": str(table),
        "flush.max.records": "4",
        "flush.interval.ms": "500",
    }
    code, answer = await c.write(c[0], "POST", "/connectors", {"name": NAME, "config": config})
    assert code == 201, answer
    await wait_until(lambda: committed(table) == 16, 240, "16 rows in the table")
    a, b = c[0], c[1]
    await wait_until(lambda: _offsets(b) == {0: 10, 1: 6}, 60, "offsets read on worker 2")
    assert _offsets(a) == {0: 10, 1: 6}

    body: dict[str, Any] = {
        "offsets": [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": 0},
                "offset": {"kafka_offset": 4},
            }
        ]
    }
    code, answer = b.try_rest("PATCH", f"/connectors/{NAME}/offsets", body)
    assert code == 400 and "STOPPED" in answer["message"], (code, answer)

    code, answer = await c.write(b, "PUT", f"/connectors/{NAME}/stop")
    assert code == 204, answer

    def stopped(w: ClusterWorker) -> bool:
        status = w.status(NAME)
        return bool(status) and status["connector"]["state"] == "STOPPED" and not status["tasks"]

    await c.wait(stopped, 60, "the connector STOPPED with no tasks on both workers")
    code, answer = b.try_rest("PATCH", f"/connectors/{NAME}/offsets", body)
    assert code == 200, answer
    await wait_until(lambda: _offsets(a) == {0: 4, 1: 6}, 60, "the altered offset read on worker 1")
