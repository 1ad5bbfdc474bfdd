"""``--until-caught-up``: run until every connector's sink has committed what its topics held
at start, then stop cleanly (the backfill or scheduled-job mode: Spark Structured Streaming's
``AvailableNow``, kafka-delta-ingest's ``--end``).

At start the end offset of every partition of each running connector's topics is read once
(``topics``, or the topics ``topics.regex`` matches then): its target. A partition is caught up
when a task of the connector reports a committed offset (what its sink's ``pre_commit`` made
durable, the table's own offsets for the table sinks) at or past its target, or reports no lag
with the log end at or past it (a transaction marker takes the offset after a transaction's
records: the sink commits ``N``, the log ends at ``N + 1``; ``freshness.py`` knows such offsets
hold no record). Records produced after the start may be written too; the run does not wait for
them.

The run ends, through the usual stop sequence (every task's closing commit), when every
connector is caught up: exit 0. It ends sooner, exit 1, when a connector or one of its tasks
has FAILED with no automatic restart scheduled, naming it and the reason. A connector that is
paused or stopped at start is not waited for, nor is one created through REST later.
Exactly once holds as always: a run killed in the middle leaves the committed offsets where
they were, and the next run continues from them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as KafkaTopicPartition

from daemon.config import parse_connector
from daemon.config.worker import WorkerConfig
from daemon.connectors.records import TopicPartition
from daemon.runtime.clients import client_settings
from daemon.runtime.model import ConnectorStatus, Herder, PartitionFreshness
from daemon.structs import State

log = logging.getLogger(__name__)

#: How often the watcher looks at the tasks' committed offsets (seconds).
INTERVAL = 0.5
#: Bound on reading the topics' end offsets at start (seconds).
READ_TIMEOUT = 60.0

Targets = dict[str, dict[TopicPartition, int]]


@dataclass
class Progress:
    """Where the run stands: connectors caught up, still behind (partitions left), failed."""

    done: list[str] = field(default_factory=list)
    behind: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return bool(self.failed) or not self.behind


def _topics(config: Mapping[str, str], known: set[str]) -> list[str]:
    """The connector's topics as its tasks subscribe to them (the same parsed settings)."""
    parsed = parse_connector(config).config
    if parsed.topics:
        return list(parsed.topics)
    if parsed.topics_regex is None:
        return []
    return sorted(t for t in known if parsed.topics_regex.fullmatch(t))


async def read_targets(worker: WorkerConfig, herder: Herder) -> Targets:
    """Each running connector's partitions with their end offsets, read now."""
    names = [
        n
        for n in herder.connector_names()
        if herder.connector_status(n).state not in (State.PAUSED, State.STOPPED)
    ]
    if not names:
        return {}
    consumer = AIOKafkaConsumer(**client_settings(worker, "until-caught-up"))
    async with asyncio.timeout(READ_TIMEOUT):
        await consumer.start()
        try:
            return await _ends(consumer, herder, names)
        finally:
            await consumer.stop()


async def _ends(consumer: AIOKafkaConsumer, herder: Herder, names: list[str]) -> Targets:
    # consumer.topics() reads the whole cluster's metadata but keeps none of it: the same
    # read, kept, gives the partitions; assigning them lets end_offsets find their leaders.
    cluster = await consumer._client.fetch_all_metadata()
    known = set(cluster.topics())
    wanted = {
        name: [
            KafkaTopicPartition(topic, p)
            for topic in _topics(herder.connector_config(name), known)
            for p in sorted(cluster.partitions_for_topic(topic) or ())
        ]
        for name in names
    }
    every = sorted({tp for parts in wanted.values() for tp in parts})
    if not every:
        return {name: {} for name in names}
    consumer.assign(every)
    ends = await consumer.end_offsets(every)
    return {
        name: {TopicPartition(tp.topic, tp.partition): ends[tp] for tp in parts}
        for name, parts in wanted.items()
    }


def _failure(status: ConnectorStatus) -> str | None:
    """Why the connector cannot catch up by itself: it or a task FAILED, no restart coming."""

    def final(auto: object) -> bool:
        return auto is None or getattr(auto, "next_restart", None) is None

    if status.state is State.FAILED and final(status.auto_restart):
        return (status.trace or "the connector failed").strip().splitlines()[0]
    for t in status.tasks:
        if t.state is State.FAILED and final(t.auto_restart):
            reason = (t.trace or "failed").strip().splitlines()[0]
            return f"task {t.id}: {reason}"
    return None


def _caught_up(target: int, reports: list[PartitionFreshness]) -> bool:
    for f in reports:
        if f.committed is not None and f.committed >= target:
            return True
        if f.lag == 0 and f.log_end is not None and f.log_end >= target:
            return True
    return False


def progress(herder: Herder, targets: Targets) -> Progress:
    out = Progress()
    for name, ends in targets.items():
        try:
            status = herder.connector_status(name)
        except Exception:  # deleted through REST meanwhile: nothing left to wait for
            out.done.append(name)
            continue
        why = _failure(status)
        if why is not None:
            out.failed[name] = why
            continue
        reports: dict[TopicPartition, list[PartitionFreshness]] = {}
        for t in status.tasks:
            for f in t.freshness:
                reports.setdefault(TopicPartition(f.topic, f.partition), []).append(f)
        left = sum(
            1 for tp, end in ends.items() if end > 0 and not _caught_up(end, reports.get(tp, []))
        )
        if left:
            out.behind[name] = left
        else:
            out.done.append(name)
    return out


async def watch(herder: Herder, targets: Targets, interval: float = INTERVAL) -> Progress:
    """Until every connector of ``targets`` is caught up or one has failed for good."""
    log.info(
        "until caught up: %s",
        "; ".join(
            f"{name}: {sum(ends.values())} record offset(s) over {len(ends)} partition(s)"
            for name, ends in targets.items()
        )
        or "no running connector",
    )
    while True:
        now = progress(herder, targets)
        if now.finished:
            return now
        await asyncio.sleep(interval)
