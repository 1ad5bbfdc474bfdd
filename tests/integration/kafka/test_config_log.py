"""The config log on a real broker: leader-only transactional writes, read_committed snapshots,
and a zombie leader fenced by the broker."""

from __future__ import annotations

import uuid

import pytest
from aiokafka.errors import ProducerFenced
from support.kafka import consume_all, produce
from support.kafka_fixtures import TopicFactory

from daemon.storage.kafka import (
    ConfigLogReader,
    ConfigLogWriter,
    ConfigWriteFailed,
    LeaderFenced,
    StoreTimeout,
)
from daemon.storage.kafka.configrecords import connector_record, task_record
from daemon.structs import TargetState, TaskId

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


async def _config_topic(kafka_topic: TopicFactory) -> str:
    return await kafka_topic(1, config=COMPACT)


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


async def test_writes_are_seen_as_a_snapshot_with_connect_semantics(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await _config_topic(kafka_topic)
    async with (
        ConfigLogWriter(topic, kafka_bootstrap, _group()) as writer,
        ConfigLogReader(topic, kafka_bootstrap) as reader,
    ):
        assert (await reader.read_to_end(10)).offset == 0  # an empty log

        await writer.put_connector_config(
            "s3", {"connector.class": "ParquetSink", "password": "${file:/etc/s.properties:pw}"}
        )
        await writer.put_task_configs("s3", [{"task": "0"}, {"task": "1"}])
        await writer.put_connector_config(
            "hang", {"connector.class": "HangSink"}, target_state=TargetState.STOPPED
        )
        await writer.put_target_state("s3", TargetState.PAUSED)
        end = await writer.put_restart_request("s3", include_tasks=True, only_failed=False)
        snap = await reader.read_to_end(10, at_least=end)

        # stored unresolved: no secret was looked up on the way to Kafka
        assert snap.connectors["s3"]["password"] == "${file:/etc/s.properties:pw}"
        assert snap.tasks("s3") == ({"task": "0"}, {"task": "1"})
        assert snap.target_state("s3") is TargetState.PAUSED
        assert snap.target_state("hang") is TargetState.STOPPED
        assert snap.tasks("hang") == ()
        (restart,) = snap.restarts_since(0)
        assert (restart.connector, restart.include_tasks, restart.only_failed) == (
            "s3",
            True,
            False,
        )
        assert snap.restarts_since(restart.offset + 1) == []
        # Connect's offset: the last record's + 1 (commit markers in between do not count)
        assert snap.offset == restart.offset + 1 == end

        later = await reader.read_to_end(10, at_least=await writer.delete_connector("s3"))
        assert set(later.connectors) == {"hang"}
        assert later.tasks("s3") == ()
        assert "s3" not in later.target_states and later.restart_requests == {}
        assert snap.connectors.keys() == {"s3", "hang"}  # the older snapshot did not change


async def test_task_configs_stay_invisible_until_their_commit_record(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    """Task records written without their commit (plain producer, as a crashed pre-transaction
    leader would leave them) are buffered, not applied; the commit applies them."""
    topic = await _config_topic(kafka_topic)
    key, value = connector_record("c", {"connector.class": "EchoSink"})
    tasks = [task_record(TaskId("c", i), {"n": str(i)}) for i in range(2)]
    await produce(kafka_bootstrap, topic, [(key.encode(), value or b"")], partition=0)
    await produce(kafka_bootstrap, topic, [(k.encode(), v) for k, v in tasks], partition=0)
    hostile = [(b"connector-bad", b"\x00not json"), (b"commit-c", b'{"tasks":"2"}')]
    await produce(kafka_bootstrap, topic, hostile, partition=0)  # skipped, never a crash
    async with ConfigLogReader(topic, kafka_bootstrap) as reader:
        snap = await reader.read_to_end(10)
        assert set(snap.connectors) == {"c"} and snap.tasks("c") == () and snap.offset == 5
        async with ConfigLogWriter(topic, kafka_bootstrap, _group()) as writer:
            end = await writer.write([("commit-c", b'{"tasks":2}')])
        assert (await reader.read_to_end(10, at_least=end)).tasks("c") == ({"n": "0"}, {"n": "1"})


async def test_a_replaced_leader_is_fenced_and_its_write_never_seen(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await _config_topic(kafka_topic)
    group = _group()
    a = ConfigLogWriter(topic, kafka_bootstrap, group)
    b = ConfigLogWriter(topic, kafka_bootstrap, group)
    try:
        await a.start()
        await a.put_connector_config("by-a", {"k": "1"})  # A is the leader: committed
        await b.start()  # a new leader claims the log: A is fenced from now on
        with pytest.raises(LeaderFenced, match="fenced"):
            await a.put_task_configs("zombie", [{"k": "z"}])
        with pytest.raises(LeaderFenced):  # and stays fenced
            await a.put_connector_config("zombie", {"k": "z"})
        end = await b.put_connector_config("by-b", {"k": "2"})
        async with ConfigLogReader(topic, kafka_bootstrap) as reader:
            snap = await reader.read_to_end(10, at_least=end)
        assert set(snap.connectors) == {"by-a", "by-b"}
        assert snap.tasks("zombie") == ()
        # Not even an uncommitted record of A's reached the log: nothing to abort.
        raw = await consume_all(kafka_bootstrap, topic, 2, isolation_level="read_uncommitted")
        assert [r.key for r in raw] == [b"connector-by-a", b"connector-by-b"]
    finally:
        await a.stop()
        await b.stop()


async def test_read_to_end_names_the_topic_when_the_deadline_passes(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    topic = await _config_topic(kafka_topic)
    await produce(
        kafka_bootstrap, topic, [(b"connector-x", b'{"properties":{}}')] * 50, partition=0
    )
    async with ConfigLogReader(topic, kafka_bootstrap) as reader:
        with pytest.raises(StoreTimeout, match=topic):
            await reader.read_to_end(0.0)
        snap = await reader.read_to_end(10)  # the reader is still usable
    assert snap.offset == 50 and set(snap.connectors) == {"x"}


async def test_a_zombie_mid_transaction_is_aborted_by_the_new_leader(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    """A leader stalled between its records and its commit (the window a SIGSTOP can hit): the
    new leader's start aborts the open transaction; the zombie's records were in the log but
    no read_committed reader ever returns them, and its commit fails as fenced."""
    topic = await _config_topic(kafka_topic)
    group = _group()
    async with ConfigLogWriter(topic, kafka_bootstrap, group) as a:
        producer = a._producer  # the writer's own transaction, stopped half-way on purpose
        await producer.begin_transaction()
        key, value = task_record(TaskId("c", 0), {"zombie": "yes"})
        await producer.send_and_wait(topic, key=key.encode(), value=value, partition=0)
        async with ConfigLogWriter(topic, kafka_bootstrap, group) as b:
            with pytest.raises(ProducerFenced):
                await producer.commit_transaction()
            await b.put_connector_config("c", {"connector.class": "EchoSink"})
            end = await b.put_task_configs("c", [{"leader": "b"}])
            async with ConfigLogReader(topic, kafka_bootstrap) as reader:
                snap = await reader.read_to_end(10, at_least=end)
    assert snap.tasks("c") == ({"leader": "b"},)
    raw = await consume_all(kafka_bootstrap, topic, 4, isolation_level="read_uncommitted")
    assert raw[0].value is not None and b"zombie" in raw[0].value  # it was written, then aborted


async def test_a_failed_transaction_lands_nothing_and_closes_the_writer(
    kafka_bootstrap: str, kafka_topic: TopicFactory
) -> None:
    """All or nothing: the second record of a transaction is refused (too large), so the first,
    already handed to the producer, is aborted with it; the writer is closed, as Connect drops
    its producer."""
    topic = await _config_topic(kafka_topic)
    async with ConfigLogWriter(topic, kafka_bootstrap, _group()) as writer:
        small = connector_record("ok", {"k": "v"})
        huge = connector_record("huge", {"k": "x" * 2_000_000})
        with pytest.raises(ConfigWriteFailed, match="was not committed"):
            await writer.write([small, huge])
        with pytest.raises(ConfigWriteFailed):
            await writer.put_connector_config("after", {})
    async with (
        ConfigLogWriter(topic, kafka_bootstrap, _group()) as other,
        ConfigLogReader(topic, kafka_bootstrap) as reader,
    ):
        end = await other.put_connector_config("later", {})
        snap = await reader.read_to_end(10, at_least=end)
    assert set(snap.connectors) == {"later"}
