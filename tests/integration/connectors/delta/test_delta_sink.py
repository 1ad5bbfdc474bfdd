"""DeltaSink in the daemon, on a real broker and real Spark with the Delta jars: the SIGKILL
audit and the hang demo's kill (one table per topic with Connect's offsets API, and errant
records by the table's schema: ``test_table_sinks``, for every table sink). Rows are read by
delta-rs and by Spark's Delta reader."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest
from support.daemon import DaemonFactory, ProcessFactory, wait_until, worker_properties
from support.delta import committed, rows_with_deltalake
from support.exactly_once import (
    PARTITIONS,
    SHORT_RECORDS,
    SHORT_WINDOWS,
    TRANSFORMED,
    TRANSFORMED_ROW,
    audit,
)
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.executor.process import read_stat

# Each test starts several JVMs with Delta's jars (30-35 s each on a loaded 2-core CI
# machine, against 13 s alone): more room than the suite's 300 s before the hang guard fires.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]


async def spark_rows(pool: ThreadedPool, table: Path, where: str = "") -> dict[str, int]:
    return dict(
        await pool.run(
            "delta-check",
            "support.delta:spark_count",
            timeout=120,
            kwargs={"path": str(table), "where": where},
        )
    )


@pytest.mark.spark_line
async def test_delta_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    """6,000 records, 3 partitions, the daemon SIGKILLed and an executor JVM SIGKILLed (each
    fault ParquetSink's 20,000-record audit repeats, once), through a chain of six of Connect's
    transforms (a router among them): the Delta table holds each offset once, as the chain
    leaves it, by delta-rs and by Spark."""
    topic = await kafka_topic(partitions=PARTITIONS)

    async def check(table: Path) -> None:
        data = rows_with_deltalake(table, ["kafka_partition", "kafka_offset", "line"])
        assert data.num_rows == SHORT_RECORDS
        assert (
            data.group_by(["kafka_partition", "kafka_offset"]).aggregate([]).num_rows
            == SHORT_RECORDS
        )
        values = pc.utf8_slice_codeunits(data.column("line"), 0, 8)
        assert pc.count_distinct(values).as_py() == SHORT_RECORDS
        assert await spark_rows(delta_pool, table, TRANSFORMED_ROW) == {
            "rows": SHORT_RECORDS,
            "distinct": SHORT_RECORDS,
            "where": SHORT_RECORDS,
        }

    await audit(
        daemon_process,
        kafka_bootstrap,
        topic,
        tmp_path,
        worker_extra={"executor.spark.formats": "delta"},
        sink_extra={
            "connector.class": "DeltaSink",
            "partition.by": "kafka_partition",
            **TRANSFORMED,
        },
        progress=committed,
        check=check,
        records=SHORT_RECORDS,
        windows=SHORT_WINDOWS,
    )


@pytest.mark.spark_line
async def test_a_hung_delta_write_is_killed_and_nothing_of_it_lands(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first commit hangs in a Python UDF inside Delta's write: at the write deadline the
    executor's tree is killed, the restarted task writes every record once, and the table's
    history holds no row of the killed write. The daemon's pool loads Delta on demand."""
    n = 300
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, n)
    table = tmp_path / "table"
    marker = tmp_path / "udf.pid"
    monkeypatch.setenv("CONNECTD_HANG_MARKER", str(marker))  # executors inherit it
    props = worker_properties(
        # Short, for the hang's kill; long enough that a cold executor's first Delta jobs on a
        # loaded machine (creating the table, the fence) are not killed too (20 s was, in CI).
        kafka_bootstrap,
        tmp_path / "state",
        **{"task.write.timeout.ms": "30000"},
    )
    daemon = await run_daemon(props)
    worker = daemon.herder
    assert worker is not None
    await worker.create_connector(
        "hang-delta",
        {
            "connector.class": "support.delta_hang:HangOnceDeltaSink",
            "topics": topic,
            "tasks.max": "1",
            "path": str(table),
            # The hang happens once; the restarts after it have room for a slow first write
            # of a cold executor on a loaded machine (past the deadline, it is killed too).
            "errors.restart.max": "4",
            "errors.restart.backoff.max.ms": "1000",
        },
    )
    await wait_until(marker.exists, 240, "the UDF hanging inside the Delta write")
    udf_pid = int(marker.read_text())
    executor_pid = worker.task_status("hang-delta", 0).executor_pid
    assert executor_pid is not None
    await wait_until(lambda: read_stat(executor_pid) is None, 90, "the deadline's kill")

    def udf_gone() -> bool:
        stat = read_stat(udf_pid)
        return stat is None or not stat.running

    # The pool confirms the whole tree gone before it reports the kill; the executor's own
    # pid goes first.
    await wait_until(udf_gone, 10, "the UDF's Python worker gone with its executor")
    await wait_until(lambda: committed(table) >= n, 240, "the restarted task caught up")
    data = rows_with_deltalake(table, ["kafka_offset"])
    assert data.num_rows == n and pc.count_distinct(data.column("kafka_offset")).as_py() == n
    from deltalake import DeltaTable

    written = 0
    for commit in DeltaTable(str(table)).history():
        written += int((commit.get("operationMetrics") or {}).get("numOutputRows", 0))
        meta = json.loads(commit["userMetadata"]) if commit.get("userMetadata") else None
        if meta is not None:
            assert meta["epoch"] > 0 and meta["kind"] in ("fence", "write")
    assert written == n, "rows of the killed write reached the table's history"
    assert await spark_rows(delta_pool, table) == {"rows": n, "distinct": n}
