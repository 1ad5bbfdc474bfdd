"""Issue 13 item 5: two connectors writing the same partitions of one table.

A table's partitions belong to the connector that committed to or fenced them (its commit
log says which). On a real broker and daemon:

- two ParquetSinks created on one empty table (nothing to refuse at creation yet), then
  started: the first to claim the partitions keeps them; the other's claim is refused at once,
  its task FAILED with a trace naming the owner, and the owner writes every record exactly once;
- then a third connector on those topics and that table is refused at creation (``POST``
  answers 400 naming ``path`` and the owner), and ``/config/validate`` files the same error
  under ``path``; on other topics it is accepted; a daemon started with such a connector file
  refuses to start (``InvalidConfig``: exit 78 from the command line);
- a connector that replaces the owner (a rename) says so with ``takeover=<owner>``: it is
  accepted, continues from the owner's committed offsets (every record once in the table),
  and from then on the old name is the one refused.

Before the fix both were accepted and both ran, until the first one's next commit was refused
as an "overlap (duplicate)" that named nobody.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool
from support.tables import committed

from daemon.errors import InvalidConfig
from daemon.runtime.model import State, TargetState
from daemon.storage.commitlog import CommitLog

pytestmark = pytest.mark.integration


def sink(topic: str, table: Path) -> dict[str, str]:
    return {
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
    }


async def test_a_second_connector_on_the_same_partitions_is_refused_by_name(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    runtime_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    table = tmp_path / "table"
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props, executors=runtime_pool)
    worker = daemon.herder
    assert worker is not None
    # Both created before either claimed anything (STOPPED: no task yet), then both started.
    for name in ("first", "second"):
        await worker.create_connector(name, sink(topic, table), TargetState.STOPPED)
    for name in ("first", "second"):
        await worker.resume_connector(name)

    def settled() -> dict[str, Any] | None:
        states = {n: worker.task_status(n, 0) for n in ("first", "second")}
        failed = [n for n, s in states.items() if s.state is State.FAILED]
        running = [n for n, s in states.items() if s.state is State.RUNNING]
        trace = states[failed[0]].trace or "" if failed else ""
        # The refusal is final (not retriable): the trace says so once the policy has seen it.
        if len(failed) == 1 and len(running) == 1 and "not restarted automatically" in trace:
            return {"owner": running[0], "refused": failed[0], "trace": states[failed[0]].trace}
        return None

    outcome = await wait_until(settled, 120, "one connector running, the other refused")
    owner, refused = outcome["owner"], outcome["refused"]
    trace = outcome["trace"] or ""
    assert "PartitionsOwned" in trace and f"connector {owner!r} owns it" in trace

    sent = await produce(kafka_bootstrap, topic, 200)
    await wait_until(lambda: committed(table) == sent, 120, f"{sent} offsets committed")
    assert worker.task_status(owner, 0).state is State.RUNNING
    await worker.stop_connector(owner)
    data = ds.dataset(table, format="parquet").to_table(columns=["kafka_partition", "kafka_offset"])
    partitions, offsets = (data.column(c).to_pylist() for c in ("kafka_partition", "kafka_offset"))
    pairs = set(zip(partitions, offsets, strict=True))
    assert data.num_rows == sent and len(pairs) == sent
    with CommitLog(table) as log:
        writers = {r.connector for r in log.records() if r.kind in ("commit", "fence")}
    assert writers == {owner}
    await worker.delete_connector(refused)

    # At creation: a third connector on those partitions is refused, naming path and owner.
    other_topic = await kafka_topic(partitions=1)
    async with aiohttp.ClientSession(props["listeners"]) as http:
        body = {"name": "third", "config": sink(topic, table)}
        async with http.post("/connectors", json=body) as answer:
            assert answer.status == 400, await answer.text()
            message = (await answer.json())["message"]
        assert f"path: table {table} already holds" in message
        assert f"written by connector {owner!r}" in message
        assert "third" not in worker.connector_names()

        validate = "/connector-plugins/ParquetSink/config/validate"
        async with http.put(validate, json={"name": "third", **sink(topic, table)}) as answer:
            assert answer.status == 200
            infos = await answer.json()
        assert infos["error_count"] == 1
        (path,) = [c["value"] for c in infos["configs"] if c["value"]["name"] == "path"]
        assert any(f"written by connector {owner!r}" in e for e in path["errors"])

        # Other topics in the same table are another connector's to write.
        body = {"name": "third", "config": sink(other_topic, table)}
        async with http.post("/connectors", json=body) as answer:
            assert answer.status == 201, await answer.text()

    # A daemon started with a connector file on those partitions refuses to start.
    with pytest.raises(InvalidConfig, match=f"written by connector {owner!r}"):
        await run_daemon(
            worker_properties(kafka_bootstrap, tmp_path / "state-2"),
            connectors=[{"name": "fourth", **sink(topic, table)}],
            executors=runtime_pool,
        )

    # A rename: the new name takes the partitions over and continues the owner's offsets.
    await worker.create_connector("renamed", {**sink(topic, table), "takeover": owner})
    more = await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: committed(table) == sent + more, 120, "the rename's offsets")
    await worker.stop_connector("renamed")
    data = ds.dataset(table, format="parquet").to_table(columns=["kafka_partition", "kafka_offset"])
    pairs = set(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True))
    assert data.num_rows == len(pairs) == sent + more
    with CommitLog(table) as log:
        assert set(log.owners([topic]).values()) == {"renamed"}
    await worker.resume_connector(owner)  # the old name is now the one refused

    def old_name_refused() -> str | None:
        status = worker.task_status(owner, 0)
        trace = status.trace or ""
        return trace if status.state is State.FAILED and "PartitionsOwned" in trace else None

    trace = await wait_until(old_name_refused, 120, "the old name refused")
    assert "connector 'renamed' owns it" in trace
