"""Bad records on a real broker: errors.tolerance, the dead-letter topic, exactly once.

- 1,000 JSON records (37 malformed) in 2 partitions into a Parquet table through Spark, under
  ``errors.tolerance=all`` with a dead-letter topic and context headers, while the daemon (a real
  subprocess) is SIGKILLed twice mid-run: in the end the table holds the 963 good records once
  each, the dead-letter topic the 37 bad ones once each with Connect's headers, and together
  they hold every source offset exactly once.
- ``errors.tolerance=none``: the task is FAILED, its trace naming topic, partition and offset.
- A dead-letter replication factor the cluster cannot satisfy: FAILED, naming the setting.
"""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, ProcessFactory, wait_until, worker_properties
from support.kafka import consume_all, delete_topic, produce, topic_size
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool
from support.tables import committed

from daemon.runtime.model import State

pytestmark = pytest.mark.integration

RECORDS = 1_000
MALFORMED = 37
PARTITIONS = 2


def rows(table: Path) -> int:
    if not table.is_dir():
        return 0
    return int(ds.dataset(table, format="parquet").count_rows())


async def test_bad_records_end_in_the_dead_letter_topic_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("CONNECTD_TEST_SEED", time.time_ns() % 10_000))
    rng = random.Random(seed)
    print(f"\nseed {seed} (CONNECTD_TEST_SEED={seed} to replay)")
    topic = await kafka_topic(partitions=PARTITIONS)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    bad = set(rng.sample(range(RECORDS), MALFORMED))
    values = [
        b'{"n": %d, "pad": "%s"' % (i, b"x" * 40) if i in bad else b'{"n": %d}' % i
        for i in range(RECORDS)
    ]
    await produce(kafka_bootstrap, topic, [(b"k%d" % i, v) for i, v in enumerate(values)])
    source = await consume_all(kafka_bootstrap, topic, RECORDS)
    coords = {(r.partition, r.offset): r for r in source}
    bad_coords = {
        c for c, r in coords.items() if r.value is not None and not r.value.endswith(b"}")
    }
    assert len(bad_coords) == MALFORMED

    table = tmp_path / "table"
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"value.converter": "json", "value.converter.schemas.enable": "false"},
    )
    sink = {
        "name": "dead",
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "1",
        "path": str(table),
        "flush.max.records": "40",
        "buffer.max.records": "40",  # writes of 40-80 records even behind the backlog
        "flush.interval.ms": "500",
        "consumer.override.max.poll.records": "40",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }
    try:
        began = time.monotonic()
        # Watched from the start, not from the REST API's (support/exactly_once.py: audit).
        p = daemon_process(worker, [sink], wait=False)
        kills = []
        for at in (1, rng.randint(350, 650)):
            await wait_until(lambda a=at: committed(table) >= a, 300, f"{at} offsets committed")
            p.signal(signal.SIGKILL)
            p.wait(10)
            kills.append(committed(table))
            p = daemon_process(worker, [sink], wait=False)
        assert kills[-1] < RECORDS, f"the kills came too late: {kills}"
        assert rows(table) > 0
        await wait_until(lambda: committed(table) >= RECORDS, 300, "caught up", interval=0.2)
        print(
            f"SIGKILLs at {kills} offsets committed; caught up in {time.monotonic() - began:.0f} s"
        )
        logs = "".join(
            (tmp_path / f"daemon-{i}" / "daemon.log").read_text(errors="replace") for i in range(3)
        )
        # Shows whether a kill struck between a dead letter's produce and the sink's commit.
        print(f"re-read dead letters not produced again: {logs.count('topic already')} time(s)")
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0

        data = ds.dataset(table, format="parquet").to_table(
            columns=["kafka_topic", "kafka_partition", "kafka_offset"]
        )
        assert data.num_rows == RECORDS - MALFORMED
        in_table = set(
            zip(
                data.column("kafka_partition").to_pylist(),
                data.column("kafka_offset").to_pylist(),
                strict=True,
            )
        )
        assert len(in_table) == RECORDS - MALFORMED  # distinct: none twice
        assert set(data.column("kafka_topic").to_pylist()) == {topic}

        assert await topic_size(kafka_bootstrap, dlq) == MALFORMED  # none twice, none lost
        letters = await consume_all(
            kafka_bootstrap, dlq, MALFORMED, isolation_level="read_committed"
        )
        assert len(letters) == MALFORMED
        in_dlq = set()
        for letter in letters:
            h = {k: v.decode() if v is not None else None for k, v in letter.headers}
            where = (int(h["__connect.errors.partition"]), int(h["__connect.errors.offset"]))
            in_dlq.add(where)
            original = coords[where]
            assert h["__connect.errors.topic"] == topic
            assert (letter.key, letter.value) == (original.key, original.value)
            assert letter.timestamp == original.timestamp
            assert h["__connect.errors.connector.name"] == "dead"
            assert h["__connect.errors.task.id"] == "0"
            assert h["__connect.errors.stage"] == "VALUE_CONVERTER"
            assert h["__connect.errors.class.name"].endswith("JsonConverter")
            assert h["__connect.errors.exception.class.name"] == "json.decoder.JSONDecodeError"
            assert "value conversion failed" in h["__connect.errors.exception.message"]
            assert h["__connect.errors.exception.stacktrace"]
        assert in_dlq == bad_coords
        assert in_table | in_dlq == set(coords) and not in_table & in_dlq
    finally:
        await delete_topic(kafka_bootstrap, dlq)


async def _bad_record_daemon(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    topic: str,
    pool: ThreadedPool,
    tmp_path: Path,
    **errors: str,
) -> tuple[object, str]:
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"value.converter": "json", "value.converter.schemas.enable": "false"},
    )
    d = await run_daemon(props, executors=pool)
    assert d.herder is not None
    name = f"bad-{uuid.uuid4().hex[:6]}"
    config = {
        "connector.class": "support.daemon:RecordingSink",
        "topics": topic,
        "record.key": uuid.uuid4().hex,
        "errors.restart.enabled": "false",
        **errors,
    }
    await d.herder.create_connector(name, config)
    return d.herder, name


async def test_tolerance_none_fails_the_task_naming_the_record(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, [(None, b'{"n": 0}'), (None, b'{"n": 1}'), (None, b"{")])
    worker, name = await _bad_record_daemon(
        run_daemon, kafka_bootstrap, topic, plain_pool, tmp_path
    )

    def failed() -> str | None:
        (task,) = worker.connector_status(name).tasks  # type: ignore[attr-defined]
        return task.trace if task.state is State.FAILED else None

    trace = await wait_until(failed, 60, "the task FAILED")
    assert f"topic {topic} partition 0 offset 2" in trace
    assert "ConversionError" in trace and "errors.tolerance=all" in trace


async def test_a_replication_factor_above_the_brokers_fails_naming_the_setting(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    try:
        worker, name = await _bad_record_daemon(
            run_daemon,
            kafka_bootstrap,
            topic,
            plain_pool,
            tmp_path,
            **{
                "errors.tolerance": "all",
                "errors.deadletterqueue.topic.name": dlq,
                "errors.deadletterqueue.topic.replication.factor": "3",
            },
        )

        def failed() -> str | None:
            (task,) = worker.connector_status(name).tasks  # type: ignore[attr-defined]
            return task.trace if task.state is State.FAILED else None

        trace = await wait_until(failed, 60, "the task FAILED")
        assert "errors.deadletterqueue.topic.replication.factor=3" in trace
        assert dlq in trace
    finally:
        await delete_topic(kafka_bootstrap, dlq)
