"""DeltaSink with what the table sinks share, in the daemon, on a real broker and Spark with the
Delta jars (``delta_pool``):

- skipped offsets through a real out-of-range (retention-like ``DeleteRecords`` below the
  table's committed offset, ``errors.offset.out.of.range=earliest``): the task writes what it
  buffered, then a commit without rows moves the partition past the gap; its
  ``userMetadata`` records the gap and the reason; rows == distinct offsets == what is left;
- two connectors on one Delta table: the second is refused (its task FAILED, naming the
  owner; before, both wrote every record), a third is refused at creation (the daemon reads
  the table's ``_delta_log``), and a rename with ``takeover`` continues the owner's offsets,
  after which the old name is the one refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.delta import committed, committed_offsets, rows_with_deltalake
from support.kafka import delete_before, produce, produce_to
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.errors import InvalidConfig
from daemon.runtime.model import State, TargetState

pytestmark = pytest.mark.integration


def history(table: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    found = DeltaTable(str(table)).history()
    return [json.loads(c["userMetadata"]) for c in found if c.get("userMetadata")]


async def test_offsets_deleted_before_they_were_written_are_skipped_and_recorded(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    name = "gap"
    config = {
        "connector.class": "DeltaSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "errors.offset.out.of.range": "earliest",
    }
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    first = await run_daemon(props, executors=delta_pool)
    assert first.herder is not None
    await first.herder.create_connector(name, config)
    await produce_to(kafka_bootstrap, topic, 0, 0, 50)
    await wait_until(lambda: committed(table) == 50, 180, "50 offsets committed")
    await first.shutdown()

    await produce_to(kafka_bootstrap, topic, 0, 50, 50)
    assert await delete_before(kafka_bootstrap, topic, 0, 80) == 80  # the table has up to 49
    second = await run_daemon(props, executors=delta_pool)
    assert second.herder is not None
    await wait_until(lambda: committed(table) == 100, 180, "the partition at offset 100")
    assert second.herder.task_status(name, 0).state is State.RUNNING
    await second.herder.stop_connector(name)

    (skip,) = [m for m in history(table) if m["kind"] == "skip"]
    assert skip["skipped"] == [[topic, 0, 50, 80]] and skip["connector"] == name
    assert "retention" in skip["reason"] and skip["epoch"] > 0
    data = rows_with_deltalake(table, ["kafka_offset"])
    offsets = sorted(data.column("kafka_offset").to_pylist())
    assert offsets == [*range(50), *range(80, 100)]


def sink(topic: str, table: Path, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "DeltaSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "errors.restart.backoff.max.ms": "1000",
        **extra,
    }


async def test_a_second_connector_on_the_same_partitions_is_refused(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    delta_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props, executors=delta_pool)
    worker = daemon.herder
    assert worker is not None
    # Both created before either wrote (nothing to refuse at creation yet), then started.
    for name in ("first", "second"):
        await worker.create_connector(name, sink(topic, table), TargetState.STOPPED)
    for name in ("first", "second"):
        await worker.resume_connector(name)
    sent = await produce(kafka_bootstrap, topic, 100)

    def settled() -> dict[str, Any] | None:
        states = {n: worker.task_status(n, 0) for n in ("first", "second")}
        failed = [n for n, s in states.items() if s.state is State.FAILED]
        running = [n for n, s in states.items() if s.state is State.RUNNING]
        trace = states[failed[0]].trace or "" if failed else ""
        if len(failed) == 1 and len(running) == 1 and "not restarted automatically" in trace:
            return {"owner": running[0], "refused": failed[0], "trace": trace}
        return None

    outcome = await wait_until(settled, 240, "one connector running, the other refused")
    owner, refused = outcome["owner"], outcome["refused"]
    assert "PartitionsOwned" in outcome["trace"]
    assert f"connector {owner!r} owns it" in outcome["trace"]
    await wait_until(lambda: committed(table) == sent, 180, f"{sent} offsets committed")
    assert set(committed_offsets(table)) == {f"connectd/{owner}/{topic}/0"}
    await worker.delete_connector(refused)

    # At creation: a third one is refused, naming path and owner (the daemon read the log).
    with pytest.raises(InvalidConfig, match=f"written by connector {owner!r}"):
        await worker.create_connector("third", sink(topic, table))

    # A rename takes the partition over and continues the owner's offsets.
    await worker.stop_connector(owner)
    await worker.create_connector("renamed", sink(topic, table, takeover=owner))
    more = await produce(kafka_bootstrap, topic, 30)
    renamed = f"connectd/renamed/{topic}/0"
    await wait_until(
        lambda: committed_offsets(table).get(renamed) == sent + more, 180, "the rename's offsets"
    )
    await worker.stop_connector("renamed")
    data = rows_with_deltalake(table, ["kafka_offset"])
    assert data.num_rows == pc.count_distinct(data.column("kafka_offset")).as_py() == sent + more
    await worker.resume_connector(owner)  # the old name is now the one refused

    def old_name_refused() -> str | None:
        status = worker.task_status(owner, 0)
        trace = status.trace or ""
        return trace if status.state is State.FAILED and "PartitionsOwned" in trace else None

    trace = await wait_until(old_name_refused, 180, "the old name refused")
    assert "connector 'renamed' owns it" in trace
