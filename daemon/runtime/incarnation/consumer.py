"""A task's Kafka consumer: aiokafka in the connector's group ``connect-<name>``, as Connect does.

Settings, lowest precedence first: connectd's defaults (``enable_auto_commit=False`` — progress
is the sink's business; ``auto_offset_reset="earliest"`` — Connect's sink default), the worker's
Kafka client settings (brokers, security), the worker's ``consumer.*`` keys, the connector's
``consumer.override.*`` keys. Connect consumer keys that mean the same in aiokafka are mapped
(the table is ``daemon.config.clients.CONSUMER_KEYS``, which also checks their values when a
file or REST body is loaded); the others are ignored with a warning.

Records per poll: ``max.poll.records`` is 10,000 unless set (Connect's consumer default is
500; ``MAX_POLL_RECORDS`` says why), or fewer if the sink task asks (``max_poll_records``: the
table sinks' buffer bound). The fetched bytes bound a poll as well
(``max.partition.fetch.bytes``, ``fetch.max.bytes``).

Why ``max.poll.interval.ms`` is raised: aiokafka sends heartbeats from a background task, so a
long write never starves the group session; what it does enforce is the time between two
``getmany`` calls (``max.poll.interval.ms``), and a task does not poll while its ``put`` runs.
So that bound is kept above the longest a ``put`` may take (its deadline, which covers
``task.write.timeout.ms``), plus a margin: a slow write never causes a rebalance by itself. The
same bound is the group's rebalance timeout, i.e. how long a rebalance waits for a task to
finish the write it is in.

Rebalances: the listener hands revoked and assigned partitions to the task (``Partitions``).
Newly assigned partitions are paused at once, before any of their records can be returned, and
resumed only after the task has opened them and applied the seeks it asked for.

Offsets out of range: aiokafka runs with ``auto_offset_reset="none"``, so it never moves a
position on its own. A partition with no committed offset (no seek, nothing in the group) gets
the user's ``auto.offset.reset`` applied here (``earliest``, ``latest``; ``none`` fails the
task, as before). A fetch whose offset is no longer in the log (retention deleted it) is raised
as ``OutOfRange`` with the offsets: ``errors.offset.out.of.range`` decides what happens
(``daemon.runtime.incarnation.gaps``), never a silent reset.

Consumer lag: with ``metrics``, every poll refreshes, for each assigned partition whose end is
known, ``highwater - position`` (records in the log that the task has not been handed yet; the
highwater comes with every fetch response); partitions no longer assigned lose their series,
and closing the consumer drops the task's. The consumer's network figures (bytes and responses
received, live connections: ``daemon.kafka.traffic``) are exported from its start to its close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTP
from aiokafka.errors import NoOffsetForPartitionError, OffsetOutOfRangeError
from aiokafka.structs import OffsetAndMetadata

from daemon.config import ConnectorConfig, WorkerConfig
from daemon.config.clients import CONSUMER_KEYS, KafkaClient, ignored_reason, is_security_key
from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.errors import TaskTimeout
from daemon.kafka.client import client_of
from daemon.kafka.outages import BrokerOutageFilter
from daemon.kafka.positions import fetch_state, fetch_states, request_reset
from daemon.kafka.records import RAW
from daemon.kafka.records import install as install_raw_records
from daemon.kafka.traffic import ClientTraffic, release, track
from daemon.runtime.clients import client_security, security_settings

log = logging.getLogger("connectd.consumer")
#: Bound on reading the consumer group's committed offsets (``committed_offsets``).
COMMITTED_TIMEOUT = 30.0


def group_id(connector: str) -> str:
    """The consumer group of a connector's tasks, as in Connect."""
    return f"connect-{connector}"


#: Seconds a poll may take beyond a ``put``'s deadline (a rebalance finishing, a fetch).
POLL_MARGIN = 60.0


def poll_bound(put_timeout: float) -> float:
    """The longest a task waits between two polls, in seconds: a ``put``'s deadline plus
    ``POLL_MARGIN``. Also the bound of one poll (``getmany`` waits for a rebalance to end)."""
    return put_timeout + POLL_MARGIN


def poll_bound_ms(put_timeout: float) -> int:
    """The smallest ``max.poll.interval.ms`` a task consumer gets (see the module docstring)."""
    return int(poll_bound(put_timeout) * 1000)


#: ``max.poll.records`` unless the worker's ``consumer.*`` or the connector's
#: ``consumer.override.*`` says otherwise. Connect's consumers take 500; here each poll is one
#: ``put`` of an Arrow batch, and what a poll costs apart from its records (the hand-off to the
#: conversion thread, the Arrow tables built, the sink's checks, ``put``, the bookkeeping) was
#: most of the event loop's time with 500: 1M JSON records took 12 s with 500 per poll, 7.9 s
#: with 10,000 (bench/README.md, "Cut 3").
MAX_POLL_RECORDS = 10_000


def consumer_settings(
    worker: WorkerConfig,
    connector: ConnectorConfig,
    *,
    task: int,
    put_timeout: float,
    warn: Callable[[str], None] | None = None,
    poll_records: int | None = None,
) -> dict[str, Any]:
    """The ``AIOKafkaConsumer`` keyword arguments of one task of ``connector``.
    ``poll_records``: the most records the task's ``put`` should get
    (``SinkTask.max_poll_records``), the default's bound where ``max.poll.records`` is not set."""
    warn = warn or log.warning
    kwargs: dict[str, Any] = {
        "bootstrap_servers": list(worker.bootstrap_servers),
        "client_id": f"{worker.client_id or 'connectd'}-{connector.name}-{task}",
        "group_id": group_id(connector.name),
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_interval_ms": poll_bound_ms(put_timeout),
        "session_timeout_ms": int(worker.session_timeout.total_seconds() * 1000),
        "heartbeat_interval_ms": int(worker.heartbeat_interval.total_seconds() * 1000),
        "max_poll_records": min(MAX_POLL_RECORDS, max(1, poll_records or MAX_POLL_RECORDS)),
    }
    kwargs.update(security_settings(consumer_security(worker, connector)))
    for source, overrides in (
        ("consumer.", worker.consumer),
        ("consumer.override.", connector.consumer_override),
    ):
        for key, value in overrides.items():
            if is_security_key(key):
                continue  # in consumer_security
            spec = CONSUMER_KEYS.get(key)
            if spec is None:  # the loaders warned already; each task says it once more
                why = ignored_reason(KafkaClient.CONSUMER, key) or "not a Kafka consumer setting"
                warn(f"{source}{key} is ignored: {why}")
                continue
            try:
                kwargs[spec.argument] = spec.parse(value)
            except ValueError as e:  # a ${provider:...} value, checked only once resolved
                warn(f"{source}{key}={value!r} is ignored: {e}")
    least = poll_bound_ms(put_timeout)
    if kwargs["max_poll_interval_ms"] < least:
        warn(
            f"max.poll.interval.ms={kwargs['max_poll_interval_ms']} raised to {least}: it must"
            " exceed the put deadline, or a slow write would cause a rebalance"
        )
        kwargs["max_poll_interval_ms"] = least
    kwargs["rebalance_timeout_ms"] = kwargs["max_poll_interval_ms"]
    return kwargs


def consumer_security(worker: WorkerConfig, connector: ConnectorConfig) -> WorkerConfig:
    """The worker's settings with the security settings of ``consumer.*`` and then the
    connector's ``consumer.override.*`` applied, as Connect applies them to a task's consumer:
    e.g. a connector's own ``sasl.jaas.config`` (``client_security``)."""
    return client_security(worker, connector, KafkaClient.CONSUMER, "the task consumer")


class OutOfRange(Exception):
    """A fetch's offsets are no longer (or not yet) in their partitions' logs: ``offsets`` per
    partition. Not an error by itself: ``errors.offset.out.of.range`` decides."""

    def __init__(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.offsets = dict(offsets)
        super().__init__(", ".join(f"{tp}@{o}" for tp, o in sorted(self.offsets.items())))


class LagMetrics(Protocol):
    """Where consumer lag goes (``daemon.metrics.Metrics`` fits); calls never block."""

    def set_consumer_lags(
        self, connector: str, task: int, lags: Mapping[TopicPartition, int]
    ) -> None: ...

    def set_log_ends(
        self, connector: str, task: int, ends: Mapping[TopicPartition, int | None]
    ) -> None: ...

    def watch_client(self, traffic: ClientTraffic) -> None:
        """Export a started consumer's network figures (Kafka's ``consumer-metrics``)."""
        ...

    def forget_client(self, traffic: ClientTraffic) -> None:
        """The consumer closed: its figures go."""
        ...


class Partitions(Protocol):
    """Who hears about rebalances: the incarnation's ``Rebalancer``. Both run in aiokafka's
    coordinator task; the incarnation serialises them with its own callbacks."""

    async def partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None: ...

    async def partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None: ...


def to_kafka(tp: TopicPartition) -> KafkaTP:
    return KafkaTP(tp.topic, tp.partition)


def from_kafka(tp: KafkaTP) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, consumer: TaskConsumer) -> None:
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: Iterable[KafkaTP]) -> None:
        tps = frozenset(from_kafka(tp) for tp in revoked)
        if tps:
            await self._consumer.target.partitions_revoked(tps)

    async def on_partitions_assigned(self, assigned: Iterable[KafkaTP]) -> None:
        tps = frozenset(from_kafka(tp) for tp in assigned)
        if not tps:
            self._consumer.warn_idle()
        # Before anything can be returned for them: hold them until the task opened them.
        self._consumer.hold(tps)
        await self._consumer.target.partitions_assigned(tps)


class TaskConsumer:
    """One task's consumer: subscribe, poll, seek, pause/resume, commit, close.

    ``outages``: the daemon's broker-outage filter, which hears of this consumer's metadata
    updates (one may show a broker is back); none for a consumer outside a daemon."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        topics: Collection[str] = (),
        pattern: str | None = None,
        target: Partitions,
        metrics: LagMetrics | None = None,
        task_id: TaskId | None = None,
        outages: BrokerOutageFilter | None = None,
        tasks_max: int = 1,
    ) -> None:
        if bool(topics) == bool(pattern):
            raise ValueError("subscribe to topics or to a pattern, not both or neither")
        self.settings = dict(settings)
        self.topics = tuple(topics)
        self.pattern = pattern
        self.target = target
        self._consumer: AIOKafkaConsumer | None = None
        self._traffic: ClientTraffic | None = None
        self._held: set[TopicPartition] = set()
        self._closing = False
        self._metrics = metrics if task_id is not None else None
        self._task_id = task_id
        self._outages = outages
        self._tasks_max = tasks_max  # the connector's: for the warning of an idle task
        self._warned_idle = False
        #: ``auto.offset.reset``, applied here to partitions with no committed offset only.
        self.reset = str(self.settings.get("auto_offset_reset", "earliest"))

    @classmethod
    def for_task(
        cls,
        worker: WorkerConfig,
        config: ConnectorConfig,
        task_id: TaskId,
        *,
        put_timeout: float,
        target: Partitions,
        metrics: LagMetrics | None,
        outages: BrokerOutageFilter | None = None,
        poll_records: int | None = None,
    ) -> TaskConsumer:
        """The consumer of one task of the connector ``config`` (``consumer_settings``),
        subscribed to its ``topics`` or ``topics.regex``."""
        pattern = config.topics_regex.pattern if config.topics_regex is not None else None
        settings = consumer_settings(
            worker, config, task=task_id.task, put_timeout=put_timeout, poll_records=poll_records
        )
        return cls(
            settings,
            topics=config.topics,
            pattern=pattern,
            target=target,
            metrics=metrics,
            task_id=task_id,
            outages=outages,
            tasks_max=config.tasks_max,
        )

    @property
    def group_id(self) -> str:
        return str(self.settings["group_id"])

    async def start(self) -> None:
        """Connect and subscribe. Partitions arrive later, through the listener."""
        # No automatic reset: an offset out of range is raised (``OutOfRange``), a missing one
        # gets ``self.reset`` in ``poll``.
        # Records as aiokafka decodes them, with no Python object each (``daemon.kafka.records``):
        # topic and partition are the keys of each poll's answer.
        install_raw_records()
        consumer = AIOKafkaConsumer(
            **{**self.settings, "auto_offset_reset": "none", "key_deserializer": RAW}
        )
        self._consumer = consumer
        # Counted from the first connection on (``daemon.kafka.traffic``).
        self._traffic = track(str(self.settings.get("client_id", "aiokafka")))
        self._traffic.attach(client_of(consumer))
        if self._metrics is not None:
            self._metrics.watch_client(self._traffic)
        await consumer.start()
        if self._outages is not None:
            # A metadata update may show that a broker is back (the client's connection to it
            # answers): the log's broker-outage summary ends.
            self._outages.watch(client_of(consumer))
        listener = _Listener(self)
        if self.pattern is not None:
            consumer.subscribe(pattern=f"^(?:{self.pattern})$", listener=listener)
        else:
            consumer.subscribe(topics=list(self.topics), listener=listener)

    def warn_idle(self) -> None:
        """Once: a warning if this task got no partition because the connector asks for more
        tasks than its topics have partitions (the extra tasks stay idle)."""
        consumer = self._consumer
        if self._warned_idle or consumer is None:
            return
        partitions = sum(
            len(consumer.partitions_for_topic(t) or ()) for t in consumer.subscription()
        )
        if 0 < partitions < self._tasks_max:
            self._warned_idle = True
            log.warning(
                "Task %s has no partition: tasks.max=%d is more than the %d partition(s) of its"
                " topics (%s), so %d task(s) stay idle; lower tasks.max or add partitions",
                self._task_id,
                self._tasks_max,
                partitions,
                ", ".join(sorted(consumer.subscription())),
                self._tasks_max - partitions,
            )

    def _c(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the consumer was not started")
        return self._consumer

    async def poll(
        self, timeout_ms: int, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]:
        """Records fetched since the last poll, by partition (waits up to ``timeout_ms``): as
        aiokafka decodes them (``daemon.kafka.records``: ``offset``, ``timestamp``,
        ``timestamp_type``, ``key``, ``value``, ``headers``; no topic nor partition).

        Raises ``OutOfRange`` when a fetch offset is not in its partition's log."""
        consumer = self._c()
        try:
            got = await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        except OffsetOutOfRangeError as exc:
            raise OutOfRange(_out_of_range(exc)) from None
        except NoOffsetForPartitionError as exc:
            self._reset_missing(exc)
            return {}
        if self._metrics is not None:
            self._report_lag(consumer)
        return {from_kafka(tp): records for tp, records in got.items() if records}

    def lags(self) -> dict[TopicPartition, int]:
        """``highwater - position`` of each assigned partition whose highwater and position
        are known (the highwater arrives with the partition's first fetch response)."""
        return _lags(self._c())

    def _report_lag(self, consumer: AIOKafkaConsumer) -> None:
        assert self._metrics is not None and self._task_id is not None
        try:
            lags = _lags(consumer)
            ends = _log_ends(consumer)
        except Exception as exc:  # metrics never fail a poll
            log.debug("consumer lag not available: %s", exc)
            return
        self._metrics.set_consumer_lags(self._task_id.connector, self._task_id.task, lags)
        # The task's freshness (``runtime/freshness.py``): lag against what the sink committed.
        self._metrics.set_log_ends(self._task_id.connector, self._task_id.task, ends)

    def _reset_missing(self, exc: NoOffsetForPartitionError) -> None:
        """``auto.offset.reset`` for a partition with no committed offset. Runs in the same step
        as ``getmany`` raised, so no seek came in between (a seek clears a pending error)."""
        kafka_tp = exc.args[0] if exc.args else None
        consumer = self._c()
        if not isinstance(kafka_tp, KafkaTP) or kafka_tp not in consumer.assignment():
            return  # revoked meanwhile
        tp = from_kafka(kafka_tp)
        if tp in self._held:
            return  # not opened yet: the sink may seek; if not, the error comes back
        if self.reset == "none":
            raise exc
        log.info("%s has no committed offset: auto.offset.reset=%s", tp, self.reset)
        # What ``seek_to_beginning``/``seek_to_end`` do, without awaiting the new position
        # (the next fetch waits for it).
        waiter = request_reset(
            consumer, [kafka_tp], "latest" if self.reset == "latest" else "earliest"
        )
        waiter.add_done_callback(lambda f: f.cancelled() or f.exception())

    def fetch_position(self, tp: TopicPartition) -> int | None:
        """The offset the next fetch of ``tp`` starts at, if known (never waits)."""
        state = fetch_state(self._c(), to_kafka(tp))
        return None if state is None else state.position

    async def log_bounds(
        self, tps: Collection[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Per partition, its log start and end (the next offset to be written)."""
        consumer = self._c()
        wanted = [to_kafka(tp) for tp in tps]
        starts = await consumer.beginning_offsets(wanted)
        ends = await consumer.end_offsets(wanted)
        return {from_kafka(tp): (int(starts[tp]), int(ends[tp])) for tp in wanted}

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(from_kafka(tp) for tp in self._c().assignment())

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._c().seek(to_kafka(tp), offset)

    def hold(self, tps: Collection[TopicPartition]) -> None:
        """Pause partitions until ``release`` (newly assigned, not opened yet)."""
        self._held.update(tps)
        if self._consumer is not None:
            self._consumer.pause(*map(to_kafka, tps))

    def release(self, tps: Collection[TopicPartition]) -> None:
        self._held.difference_update(tps)

    def set_paused(self, wanted: Collection[TopicPartition]) -> None:
        """Make exactly ``wanted`` (plus held partitions) paused among the assigned ones."""
        consumer = self._c()
        assigned = consumer.assignment()
        target = {to_kafka(tp) for tp in (set(wanted) | self._held)} & assigned
        now = set(consumer.paused())
        if target - now:
            consumer.pause(*(target - now))
        if (now & assigned) - target:
            consumer.resume(*((now & assigned) - target))

    async def committed_offsets(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """What the consumer group committed for ``tps`` (a request to its coordinator per
        partition); partitions without a committed offset are left out."""
        consumer = self._c()
        ordered = list(tps)
        try:
            async with asyncio.timeout(COMMITTED_TIMEOUT):
                found = await asyncio.gather(*(consumer.committed(to_kafka(tp)) for tp in ordered))
        except TimeoutError:
            raise TaskTimeout(
                f"the consumer group's committed offsets for {len(ordered)} partitions were not"
                f" read within {COMMITTED_TIMEOUT:g} s (is the group coordinator up?)"
            ) from None
        return {tp: o for tp, o in zip(ordered, found, strict=True) if o is not None and o >= 0}

    async def position(self, tp: TopicPartition) -> int:
        return int(await self._c().position(to_kafka(tp)))

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Commit ``offsets`` (next offsets to consume) of assigned partitions to the group,
        each with its ``metadata`` string if given (the dead-letter topic's read bound)."""
        consumer = self._c()
        assigned = consumer.assignment()
        extra = metadata or {}
        wanted = {
            to_kafka(tp): OffsetAndMetadata(offset, extra.get(tp, ""))
            for tp, offset in offsets.items()
            if to_kafka(tp) in assigned
        }
        if wanted:
            await consumer.commit(wanted)

    async def close(self) -> None:
        """Leave the group and close the connections."""
        if self._consumer is not None and not self._closing:
            self._closing = True
            if self._metrics is not None and self._task_id is not None:
                self._metrics.set_consumer_lags(self._task_id.connector, self._task_id.task, {})
            try:
                await self._consumer.stop()
            finally:
                self._forget_traffic()

    def _forget_traffic(self) -> None:
        traffic, self._traffic = self._traffic, None
        if traffic is not None:
            traffic.detach(client_of(self._consumer))
            if self._metrics is not None:
                self._metrics.forget_client(traffic)
            release(traffic)


def _out_of_range(exc: OffsetOutOfRangeError) -> dict[TopicPartition, int]:
    offsets = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return {from_kafka(tp): int(o) for tp, o in offsets.items()}


def _lags(consumer: AIOKafkaConsumer) -> dict[TopicPartition, int]:
    # The state consumer.highwater() reads; consumer.position() is not used because it waits
    # (for a reset or the committed offset) when a position is not known yet.
    out: dict[TopicPartition, int] = {}
    for tp, state in fetch_states(consumer).items():
        if state is None or state.highwater is None or state.position is None:
            continue
        out[from_kafka(tp)] = max(0, state.highwater - state.position)
    return out


def _log_ends(consumer: AIOKafkaConsumer) -> dict[TopicPartition, int | None]:
    """Every assigned partition's end (highwater), ``None`` until a fetch response brought it;
    read from the same state as ``_lags``."""
    return {
        from_kafka(tp): None if state is None else state.highwater
        for tp, state in fetch_states(consumer).items()
    }
