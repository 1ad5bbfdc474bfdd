"""A sink's ``RetriableError`` (Connect's ``RetriableException``) from ``put`` is retried as
Connect retries it (issue 35 item 2): the task stays RUNNING, its status says why and when the
next attempt comes, ``errors.retry.timeout`` (0, the default: no retry of anything else) does not
end it, the wait is the one the sink asked with ``context.timeout(ms)``, and once ``put``
succeeds every record is delivered once, by the same incarnation (no restart)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support import failing_sinks
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

RECORDS = 60
FAILURES = 6
WAIT_MS = 400


async def test_a_retriable_put_is_retried_while_running_and_delivers_once(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = await kafka_topic(partitions=2)
    await produce(kafka_bootstrap, topic, RECORDS)
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"))
    assert d.rest_url is not None
    config = {
        "connector.class": "support.failing_sinks:FlakySink",
        "topics": topic,
        "tasks.max": "1",
        "fail.puts": str(FAILURES),
        "retry.wait.ms": str(WAIT_MS),
    }
    async with aiohttp.ClientSession(d.rest_url) as http:
        async with http.post("/connectors", json={"name": "flaky", "config": config}) as r:
            assert r.status == 201, await r.text()

        async def task() -> dict[str, Any]:
            async with http.get("/connectors/flaky/status") as r:
                assert r.status == 200
                status: dict[str, Any] = (await r.json())["tasks"][0]
                return status

        async def retrying_now() -> dict[str, Any] | None:
            status = await task()
            return status if "retrying" in status else None

        async def settled() -> dict[str, Any] | None:
            status = await task()
            return status if "retrying" not in status else None

        # While put fails: RUNNING, with the reason and the next attempt in the status.
        retrying = await wait_until(retrying_now, 60, "the status to show the retry", interval=0.05)
        assert retrying["state"] == "RUNNING" and "trace" not in retrying
        why = retrying["retrying"]
        assert why["reason"].startswith("RetriableError: injected: the store is unreachable")
        assert why["attempts"] >= 1
        since = datetime.datetime.fromisoformat(why["since"])
        next_retry = datetime.datetime.fromisoformat(why["next_retry"])
        assert since <= next_retry
        first = retrying["incarnation"]

        # Past every failure: each record once, by the same incarnation, and no retry shown.
        await wait_until(
            lambda: len(failing_sinks.DELIVERED.get("flaky", [])) >= RECORDS, 60, "all delivered"
        )
        delivered = failing_sinks.DELIVERED["flaky"]
        assert len(delivered) == len(set(delivered)) == RECORDS
        assert failing_sinks.FAILED_PUTS["flaky"] == FAILURES
        done = await wait_until(settled, 30, "the retry gone from the status", interval=0.05)
        assert done["state"] == "RUNNING" and done["incarnation"] == first
        assert done["auto_restart"]["count"] == 0
    # Each retry waited what the sink asked, and says which rule retried it.
    assert "the sink's RetriableError: retried until it succeeds" in caplog.text
    assert f"in {WAIT_MS / 1000:.1f} s" in caplog.text
