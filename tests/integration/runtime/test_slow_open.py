"""A sink whose ``open`` outlasts the consumer's session (a Delta table's claim waiting for a
JVM start: 10-40 s here) does not get its tasks thrown out of the sink group.

aiokafka sends no heartbeat while its assignment callback runs. The callback used to wait for
the whole open: past ``session.timeout.ms`` the coordinator dropped the member, the group
rebalanced, the next open outlasted the session again, and the group never settled (measured
on this test before the fix: no record delivered in 60 s, the members dropped over and over).
Now the callback returns to aiokafka after a third of the session and the open goes on beside
the task, its partitions held until it is done. Real broker, real aiokafka, no Spark.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support import failing_sinks
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory

from daemon.runtime.model import State

pytestmark = pytest.mark.integration

RECORDS = 200
SESSION_MS = 6000
OPEN_MS = 9000  # past the session


async def test_an_open_longer_than_the_session_keeps_the_members_in_the_group(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="connectd.task")
    topic = await kafka_topic(partitions=2)
    await produce(kafka_bootstrap, topic, RECORDS)
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        session_timeout_ms=str(SESSION_MS),
        heartbeat_interval_ms="1000",
        # No offset commit during the open: the coordinator counts a member's commit as a
        # sign of life too (OffsetMetadataManager), which would hide the missing heartbeats.
        offset_flush_interval_ms="60000",
    )
    d = await run_daemon(props)
    assert d.herder is not None
    name = "slow-open"
    config = {
        "connector.class": "support.failing_sinks:SlowOpenSink",
        "topics": topic,
        "tasks.max": "2",
        "open.delay.ms": str(OPEN_MS),
    }
    await d.herder.create_connector(name, config)

    def delivered() -> int:
        return len(set(failing_sinks.DELIVERED.get(name, [])))

    await wait_until(lambda: delivered() == RECORDS, 90, f"{RECORDS} records delivered")
    opens = failing_sinks.OPENS[name]

    # A member dropped for its silence learns it at its first heartbeat after the callback
    # (UNKNOWN_MEMBER_ID), rejoins, and both tasks open again (another 9 s each). Watch for
    # that over a window of five heartbeat intervals: an observation period, not a wait.
    def dropped() -> bool:
        return "member_id was not recognized" in caplog.text or failing_sinks.OPENS[name] > opens

    with pytest.raises(AssertionError, match="not reached"):
        await wait_until(dropped, 5.0, "a member dropped from the sink group")
    await produce(kafka_bootstrap, topic, RECORDS)
    await wait_until(lambda: delivered() == 2 * RECORDS, 30, "the next records delivered")
    assert len(failing_sinks.DELIVERED[name]) == 2 * RECORDS  # none twice
    assert failing_sinks.OPENS[name] == opens, "the tasks opened their partitions again"
    status = d.herder.connector_status(name)
    assert [t.state for t in status.tasks] == [State.RUNNING, State.RUNNING]
    assert "goes on beside the rebalance" in caplog.text
