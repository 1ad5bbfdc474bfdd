"""Connectors and tasks changed at run time on an in-process daemon and a real broker.

The sink (``support.daemon:RecordingSink``) logs every callback, so each test can check what a
Connect user expects: every record delivered once, pause stops delivery, a config change or a
restart ends the old incarnation through the stop sequence (closing ``pre_commit``, ``close``,
``stop``) and starts one with a larger epoch, STOPPED means no tasks, delete cleans up.
These tests are about the runtime's bookkeeping: the pool runs without Spark.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.daemon import (
    DaemonFactory,
    make_plan,
    put_offsets,
    recorded,
    wait_until,
    worker_properties,
    write_properties,
)
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.spark import ThreadedPool

from daemon.config import load_connector
from daemon.connectors.records import TopicPartition
from daemon.daemon import Daemon
from daemon.errors import ConnectorNotFound
from daemon.runtime.incarnation.consumer import TaskConsumer
from daemon.runtime.model import SinkOffset, State
from daemon.runtime.standalone import StandaloneHerder

pytestmark = pytest.mark.integration

SINK = "support.daemon:RecordingSink"


def _config(topic: str, key: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": SINK,
        "topics": topic,
        "tasks.max": "2",
        "record.key": key,
        **extra,
    }


def _epochs(worker: StandaloneHerder, name: str) -> list[int]:
    return [t.incarnation or 0 for t in worker.connector_status(name).tasks]


def _marks(key: str) -> tuple[int, int]:
    return len(recorded(key, "started")), len(recorded(key, "stopped"))


def _since(key: str, mark: tuple[int, int]) -> tuple[list[int], list[int]]:
    """Task numbers whose incarnations started and stopped since ``mark``, sorted."""
    started = recorded(key, "started")[mark[0] :]
    stopped = recorded(key, "stopped")[mark[1] :]
    return sorted(started), sorted(stopped)


def _delivered_once(key: str, topic: str, n: int) -> bool:
    counts = Counter((t, p, o) for t, p, o in put_offsets(key) if t == topic)
    return len(counts) == n and max(counts.values()) == 1


def _consumers(worker: StandaloneHerder, name: str) -> list[TaskConsumer]:
    """The Kafka consumers of the connector's live incarnations, by task number."""
    slots = worker.connectors[name].slots
    consumers = []
    for number in sorted(slots):
        inc = slots[number].inc
        assert inc is not None and inc.consumer is not None, f"task {number} has no consumer"
        consumers.append(inc.consumer)
    return consumers


async def _positions(consumers: Sequence[TaskConsumer]) -> dict[TopicPartition, int]:
    """Each assigned partition's position: the next offset its consumer hands to the task."""
    out = {}
    for consumer in consumers:
        for tp in consumer.assignment():
            out[tp] = await asyncio.wait_for(consumer.position(tp), 10)
    return out


class PollCounter:
    """Counts the polls of each consumer, and the records they returned, from now on: each
    consumer's ``poll`` is wrapped in place (``monkeypatch`` puts it back at teardown)."""

    def __init__(self, consumers: Sequence[TaskConsumer], monkeypatch: pytest.MonkeyPatch) -> None:
        self.polls = [0] * len(consumers)
        self.records = 0
        for i, consumer in enumerate(consumers):
            monkeypatch.setattr(consumer, "poll", self._counted(i, consumer.poll))

    def _counted(
        self, i: int, poll: Callable[..., Awaitable[dict[Any, list[Any]]]]
    ) -> Callable[..., Awaitable[dict[Any, list[Any]]]]:
        async def counted(*args: Any, **kwargs: Any) -> dict[Any, list[Any]]:
            got = await poll(*args, **kwargs)
            self.polls[i] += 1
            self.records += sum(len(records) for records in got.values())
            return got

        return counted


async def _daemon(
    run_daemon: DaemonFactory, kafka_bootstrap: str, tmp_path: Path, pool: ThreadedPool
) -> StandaloneHerder:
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    d = await run_daemon(props, executors=pool)
    assert d.herder is not None
    return d.herder


async def test_pause_resume_stop_restart_delete(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = await kafka_topic(partitions=3)
    key = uuid.uuid4().hex
    worker = await _daemon(run_daemon, kafka_bootstrap, tmp_path, plain_pool)
    await worker.create_connector("life", _config(topic, key))
    await produce(kafka_bootstrap, topic, 300)
    await wait_until(lambda: _delivered_once(key, topic, 300), 60, "300 records delivered once")
    status = worker.connector_status("life")
    assert status.state is State.RUNNING
    assert [t.state for t in status.tasks] == [State.RUNNING, State.RUNNING]
    first = _epochs(worker, "life")
    assert len(set(first)) == 2  # one counter per connector: two tasks, two epochs

    # Pause: tasks keep their partitions but fetch and deliver nothing.
    mark = _marks(key)
    consumers = _consumers(worker, "life")
    await worker.pause_connector("life")
    assert worker.connector_status("life").state is State.PAUSED
    assert {t.state for t in worker.connector_status("life").tasks} == {State.PAUSED}
    held = await _positions(consumers)
    assert set(held) == {TopicPartition(topic, p) for p in range(3)}
    assert sum(held.values()) == 300
    await produce(kafka_bootstrap, topic, 100)
    # Every task polls on while paused: three polls each, all begun after the records were in
    # the topic, returned nothing; the positions stayed; nothing was delivered.
    polls = PollCounter(consumers, monkeypatch)
    await wait_until(lambda: min(polls.polls) >= 3, 30, "three polls of each paused task")
    assert polls.records == 0
    assert await _positions(consumers) == held
    assert len(put_offsets(key)) == 300
    assert _since(key, mark) == ([], [])  # pausing ends no incarnation
    await worker.resume_connector("life")
    await wait_until(lambda: _delivered_once(key, topic, 400), 60, "400 records delivered once")
    # What was produced during the pause came after resume, each record once, from the
    # positions the partitions were held at.
    resumed = put_offsets(key)[300:]
    assert len(resumed) == len(set(resumed)) == 100
    assert all(o >= held[TopicPartition(t, p)] for t, p, o in resumed), (held, resumed)
    assert polls.records == 100

    # Restart one task: the stop sequence's close path ran, then a larger epoch started.
    # (Task 0 keeps its incarnation, though the rebalance that follows may hand it partitions
    # and so a fresh epoch: who started and stopped is read from the sink, by task number.)
    closes_before = len(recorded(key, "closing_pre_commit"))
    mark = _marks(key)
    await worker.restart_task("life", 1)
    after = _epochs(worker, "life")
    assert after[1] > max(first)
    assert _since(key, mark) == ([1], [1])
    assert len(recorded(key, "closing_pre_commit")) > closes_before

    # Stop: every task through the stop sequence, zero tasks, state STOPPED.
    mark = _marks(key)
    await worker.stop_connector("life")
    status = worker.connector_status("life")
    assert status.state is State.STOPPED and status.tasks == ()
    assert worker.connector_info("life").tasks == ()
    assert _since(key, mark) == ([], [0, 1])

    # Nothing was delivered twice across the restart and the stop.
    delivered = put_offsets(key)
    assert len(delivered) == len(set(delivered)) == 400

    # Offsets: STOPPED allows altering the group's offsets.
    offsets = await worker.get_offsets("life")
    assert sum(o.offset for o in offsets) == 400
    assert {(o.topic, o.partition) for o in offsets} == {(topic, p) for p in range(3)}
    await worker.alter_offsets("life", [SinkOffset(topic, 0, 0)])
    changed = {o.partition: o.offset for o in await worker.get_offsets("life")}
    assert changed[0] == 0
    await worker.reset_offsets("life")
    assert await worker.get_offsets("life") == []

    # Resume from STOPPED: tasks come back with new epochs and re-read everything.
    await worker.resume_connector("life")
    assert worker.connector_status("life").state is State.RUNNING
    assert min(_epochs(worker, "life")) > max(after)

    def reread() -> list[tuple[str, int, int]] | None:
        again = put_offsets(key)[400:]
        return again if len(set(again)) == 400 else None

    # Every record exactly once more: as many rows as distinct offsets as produced.
    again = await wait_until(reread, 60, "the 400 records delivered again")
    assert len(again) == len(set(again)) == 400
    assert set(again) == set(delivered)

    # Delete: tasks stopped, the connector gone.
    mark = _marks(key)
    await worker.delete_connector("life")
    assert _since(key, mark) == ([], [0, 1])
    with pytest.raises(ConnectorNotFound):
        worker.connector_status("life")


async def test_config_change_restarts_tasks_through_the_stop_sequence(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=2)
    key = uuid.uuid4().hex
    worker = await _daemon(run_daemon, kafka_bootstrap, tmp_path, plain_pool)
    await worker.create_connector("conf", _config(topic, key))
    await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: _delivered_once(key, topic, 50), 60, "50 records delivered")
    before = _epochs(worker, "conf")

    mark = _marks(key)
    created, info = await worker.put_connector_config(
        "conf", _config(topic, key, **{"tasks.max": "1"})
    )
    assert not created and info.tasks == (0,)
    after = _epochs(worker, "conf")
    assert len(after) == 1 and after[0] > max(before)
    assert _since(key, mark) == ([0], [0, 1])  # both old incarnations stopped, one started
    assert worker.connector_status("conf").tasks[0].state is State.RUNNING
    # The same config again changes nothing.
    mark = _marks(key)
    await worker.put_connector_config("conf", _config(topic, key, **{"tasks.max": "1"}))
    assert _since(key, mark) == ([], [])
    # Nothing is delivered twice across the change (the group offsets were committed).
    await produce(kafka_bootstrap, topic, 50)
    await wait_until(lambda: _delivered_once(key, topic, 100), 60, "100 records delivered once")


async def test_a_failing_task_is_failed_with_its_trace_then_restarted(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    worker = await _daemon(run_daemon, kafka_bootstrap, tmp_path, plain_pool)
    await worker.create_connector(
        "echo",
        {
            "connector.class": "EchoSink",
            "topics": topic,
            "fail.task.after.records": "10",
            "errors.restart.max": "1",
        },
    )
    await produce(kafka_bootstrap, topic, 20)

    # Retriable (InjectedFailure): restarted at once (restart 0 waits 0 s); the new incarnation
    # re-reads the records (nothing was committed), fails again and stays FAILED, since
    # errors.restart.max=1.
    again = await wait_until(
        lambda: (
            (t := worker.connector_status("echo").tasks[0]).state is State.FAILED
            and t.auto_restart is not None
            and t.auto_restart.count == 1
            and t.auto_restart.next_restart is None
            and t
        ),
        60,
        "the task FAILED after one automatic restart",
    )
    assert again.trace is not None and "InjectedFailure" in again.trace
    assert "fail.task.after.records=10" in again.trace
    assert again.auto_restart is not None and again.auto_restart.last_restart is not None
    epochs = worker.env.epochs.current("echo")
    # The restarted incarnation: a new epoch at start, and the counter's latest once it got
    # its partition.
    assert again.epoch == epochs and (again.incarnation or 0) >= 2
    # An operator's restart brings it back.
    await worker.restart_task("echo", 0)
    assert (worker.task_status("echo", 0).incarnation or 0) > (again.incarnation or 0)


async def test_reload_applies_changed_connector_files(
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    plain_pool: ThreadedPool,
    tmp_path: Path,
) -> None:
    """What SIGHUP does: the command line's connector files are read again and applied."""
    topic = await kafka_topic(partitions=2)
    path = write_properties(
        tmp_path / "reload.properties", {"name": "reload", **_config(topic, "reload")}
    )
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    plan = replace(make_plan(props), connectors=(load_connector(path).config,))
    daemon = Daemon(
        replace(plan, connector_files=(path,)), executors=plain_pool, handle_signals=False
    )
    async with daemon:
        worker = daemon.herder
        assert worker is not None
        before = _epochs(worker, "reload")
        assert len(before) == 2
        write_properties(path, {"name": "reload", **_config(topic, "reload", **{"tasks.max": "1"})})
        await daemon.reload()
        after = _epochs(worker, "reload")
        assert len(after) == 1 and after[0] > max(before)
        assert worker.connector_config("reload")["tasks.max"] == "1"
