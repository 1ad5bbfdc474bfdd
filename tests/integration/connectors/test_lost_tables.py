"""Issue 29 item 4: a lost table is never silent (real broker, real Spark, the three formats).

A table sink's table is deleted while its task runs (ParquetSink: the directory; DeltaSink: the
directory with its ``_delta_log``; IcebergSink: the table's directory in a Hadoop catalog):

- the next commit fails the task with ``TableLost`` naming the table and the offsets the task
  had committed there; no automatic restart (a restart meets the same table) and nothing is
  written where the table was;
- restarted by hand, the task finds a table with no offsets while the consumer group committed
  some: it fails at once with ``TableOffsetsMissing`` naming the table and the group's offsets,
  still writing nothing (the group's offsets no longer decide where a table starts);
- the user decides: ``table.offsets.missing=group`` starts the table at the group's offsets.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTP
from support import delta, iceberg, tables
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.runtime.model import State

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _sink(fmt: str, topic: str, where: Path) -> tuple[dict[str, str], Path, Callable[[], int]]:
    """The connector's config, the directory that holds its table, and how far the table's
    committed offsets go (summed over partitions)."""
    name = f"lost-{fmt}"
    base = {"topics": topic, "flush.interval.ms": "500"}
    if fmt == "parquet":
        table = where / "table"
        return (
            {**base, "connector.class": "ParquetSink", "path": str(table)},
            table,
            lambda: tables.committed(table),
        )
    if fmt == "delta":
        table = where / "delta"
        return (
            {**base, "connector.class": "DeltaSink", "path": str(table)},
            table,
            lambda: delta.committed(table),
        )
    warehouse = where / "wh"
    table = warehouse / "db" / "lost"
    config = {
        **base,
        "connector.class": "IcebergSink",
        "table": "db.lost",
        "catalog.warehouse": str(warehouse),
    }
    return config, table, lambda: iceberg.committed(table, name)


async def _group_committed(bootstrap: str, group: str, topic: str) -> int:
    """What the consumer group committed for ``topic``'s partition 0 (0: nothing)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return int(await consumer.committed(KafkaTP(topic, 0)) or 0)
    finally:
        await consumer.stop()


@pytest.mark.parametrize("fmt", ["parquet", "delta", "iceberg"])
async def test_a_table_deleted_under_its_sink_fails_the_task_and_is_never_started_over(
    fmt: str,
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    formats_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    name = f"lost-{fmt}"
    config, table, committed = _sink(fmt, topic, tmp_path)
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    d = await run_daemon(props, executors=formats_pool)
    worker = d.herder
    assert worker is not None
    await worker.create_connector(name, config)
    await produce(kafka_bootstrap, topic, 20)
    await wait_until(lambda: committed() == 20, 180, "the first 20 records in the table")
    await wait_until(
        lambda: _group_committed(kafka_bootstrap, f"connect-{name}", topic),
        30,
        "the consumer group's copy of the offsets",
    )
    assert await _group_committed(kafka_bootstrap, f"connect-{name}", topic) == 20

    shutil.rmtree(table)
    await produce(kafka_bootstrap, topic, 10)

    def failed_with(text: str) -> Any:
        status = worker.task_status(name, 0)
        trace = status.trace or ""
        return status.state is State.FAILED and text in trace and "not restarted" in trace and trace

    trace = await wait_until(lambda: failed_with("TableLost"), 120, "the task FAILED: TableLost")
    assert "lost its state" in trace and f"{topic}-0: 20" in trace, trace
    assert f"DELETE /connectors/{name}/offsets" in trace and "table.offsets.missing=group" in trace
    assert not table.exists(), "something was written where the table was"

    # Restarted by hand: the group committed 20, the table has nothing: refused at open.
    await worker.restart_task(name, 0)
    trace = await wait_until(
        lambda: failed_with("TableOffsetsMissing"), 120, "the restarted task FAILED at open"
    )
    assert f"has no committed offsets for {topic}-0" in trace, trace
    assert f"consumer group committed {topic}-0: 20" in trace, trace
    # No offsets and no rows (ParquetSink's claim has made an empty table with a fence record;
    # Delta and Iceberg create a table with its first batch only).
    assert committed() == 0
    if fmt == "parquet":
        assert tables.coordinates(table) == []
    else:
        assert not table.exists(), "the restarted task wrote where the table was"

    # The user's choice: start the table at the group's offsets.
    await worker.put_connector_config(name, {**config, "table.offsets.missing": "group"})
    await wait_until(lambda: table.exists() and committed() == 30, 180, "the table from 20 on")
    assert worker.task_status(name, 0).state is State.RUNNING
    if fmt == "parquet":  # its files are moved into place just after the commit's record
        await wait_until(
            lambda: sorted(tables.coordinates(table)) == [(0, o) for o in range(20, 30)],
            10,
            "the rows from offset 20 on, and only those",
        )
