"""connectd's Prometheus metrics, served at ``GET /metrics``.

One ``Metrics`` per daemon, with a ``CollectorRegistry`` of its own: nothing is registered in
prometheus-client's global registry, so several daemons (or tests) in one process never clash.

The runtime calls the recording methods as things happen (cheap: a dict lookup and an add, safe
from the event loop). State that already lives elsewhere — connector and task states, the
executor pool — is not copied into gauges: ``watch_worker`` and ``watch_pool`` add collectors
that read it when Prometheus scrapes, so it can never go stale.

Names (counters get ``_total`` on export):

- ``connectd_records_consumed_total{connector,task}`` (records delivered to the sink's ``put``),
  ``connectd_records_written_total{...}`` (rows of the batches that executor calls took and
  finished without error)
- ``connectd_write_seconds{connector,task}`` (histogram of one successful executor call:
  hand-off, Spark write, result)
- ``connectd_executor_kills_total{reason}`` (``write deadline``, ``write cancelled``,
  ``task stop``), ``connectd_task_restarts_total{connector,task,cause}``
- ``connectd_event_loop_lag_seconds`` (histogram) and ``connectd_event_loop_lag_last_seconds``
- ``connectd_consumer_lag_records{connector,task,topic,partition}``
- ``connectd_offsets_skipped_total{connector,topic,partition}`` (offsets deleted by retention
  before they were consumed, skipped under ``errors.offset.out.of.range=earliest``)
- on scrape: ``connectd_connector_state{connector,state}``, ``connectd_task_state{...,state}``,
  ``connectd_task_incarnation``, ``connectd_task_auto_restarts``, ``connectd_task_stalled``,
  per task and partition (``{connector,task,topic,partition}``, from the task's freshness:
  ``runtime/freshness.py``) ``connectd_partition_committed_offset``,
  ``connectd_partition_log_end_offset``, ``connectd_partition_commit_lag_records``,
  ``connectd_partition_last_commit_timestamp_seconds``,
  ``connectd_partition_committed_event_timestamp_seconds``; ``connectd_executor_pool_started``
  (0 until the pool starts: ``executor.pool.start``), ``connectd_executors{state}``,
  ``connectd_executor_rss_bytes{executor}``, ``connectd_executor_deaths_total``,
  ``connectd_executor_recycles_total``,
  ``connectd_executor_start_failures_total``, ``connectd_executor_writes_total``
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.errors import ConnectdError
from daemon.executor.info import ExecutorInfo, PoolStatus
from daemon.runtime.model import Herder, PartitionFreshness, State

WRITE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ClusterView(Protocol):
    """A distributed worker: ``cluster()`` has ``generation``, ``leader``, ``rebalances``,
    ``rebalance_seconds``, ``connectors``, ``tasks`` (this member's share), ``config_lag``."""

    def cluster(self) -> Mapping[str, Any]: ...


class PoolView(Protocol):
    """What the pool collector reads (``daemon.executor.ExecutorPool`` has both)."""

    def status(self) -> PoolStatus: ...

    def snapshot(self) -> list[ExecutorInfo]: ...


class Metrics:
    """The daemon's metrics. Recording methods never raise and never block."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        task = ["connector", "task"]
        self.records_consumed = Counter(
            "connectd_records_consumed",
            "Records fetched from Kafka and delivered to the task's put().",
            task,
            registry=r,
        )
        self.records_written = Counter(
            "connectd_records_written",
            "Rows handed to an executor in calls that finished without error (a sink's write;"
            " its commit may come later).",
            task,
            registry=r,
        )
        self.write_seconds = Histogram(
            "connectd_write_seconds",
            "Duration of one successful executor call of a task: hand-off, Spark write, result.",
            task,
            buckets=WRITE_BUCKETS,
            registry=r,
        )
        self.executor_kills = Counter(
            "connectd_executor_kills",
            "Executor process trees killed: write deadline, write cancelled (e.g. by a callback"
            " deadline), task stop (the stop sequence).",
            ["reason"],
            registry=r,
        )
        self.task_restarts = Counter(
            "connectd_task_restarts",
            "Task incarnations ended and replaced (REST, auto-restart, reconfiguration).",
            [*task, "cause"],
            registry=r,
        )
        self.connector_restarts = Counter(
            "connectd_connector_restarts",
            "Connectors restarted (REST, auto-restart).",
            ["connector", "cause"],
            registry=r,
        )
        self.event_loop_lag = Histogram(
            "connectd_event_loop_lag_seconds",
            "How late the event loop ran a timer: time it was blocked.",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.event_loop_lag_last = Gauge(
            "connectd_event_loop_lag_last_seconds", "The latest event-loop lag sample.", registry=r
        )
        self.consumer_lag = Gauge(
            "connectd_consumer_lag_records",
            "Records between a partition's end (highwater) and the task's position, after the"
            " task's latest poll.",
            [*task, "topic", "partition"],
            registry=r,
        )
        self.offsets_skipped = Counter(
            "connectd_offsets_skipped",
            "Offsets never delivered to the sink: deleted by retention before the task consumed"
            " them, skipped because errors.offset.out.of.range=earliest.",
            ["connector", "topic", "partition"],
            registry=r,
        )
        self._lag_labels: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self._watched: dict[tuple[int, type[Collector]], Collector] = {}
        self._consumed_total = 0
        self._written_total = 0

    # -- recording (called by the runtime) --------------------------------------------------

    def record_consumed(self, connector: str, task: int, count: int) -> None:
        self.records_consumed.labels(connector, str(task)).inc(count)
        self._consumed_total += count

    def record_written(self, connector: str, task: int, count: int, seconds: float) -> None:
        """One committed write of ``count`` records that took ``seconds``."""
        self.records_written.labels(connector, str(task)).inc(count)
        self._written_total += count
        self.write_seconds.labels(connector, str(task)).observe(seconds)

    def totals(self) -> tuple[int, int]:
        """Records consumed and written since start, over every task (deleted ones too): a
        rate is the difference of two readings over their interval (systemd STATUS=)."""
        return self._consumed_total, self._written_total

    def executor_killed(self, reason: str) -> None:
        self.executor_kills.labels(reason).inc()

    def connector_restarted(self, connector: str, cause: str) -> None:
        self.connector_restarts.labels(connector, cause).inc()

    def task_restarted(self, connector: str, task: int, cause: str) -> None:
        self.task_restarts.labels(connector, str(task), cause).inc()

    def record_offsets_skipped(
        self, connector: str, task: int, tp: TopicPartition, count: int
    ) -> None:
        # Labelled by partition, not task: the loss belongs to the data, whichever task
        # (and incarnation) owned the partition when it was found.
        if count > 0:
            self.offsets_skipped.labels(connector, tp.topic, str(tp.partition)).inc(count)

    # Freshness (committed offsets, log ends, event times) is kept per task by the runtime
    # (``runtime/freshness.py``) and read from the task status on scrape, like the states:
    # these three only make ``Metrics`` a complete ``TaskMetrics``.

    def record_delivering(
        self,
        connector: str,
        task: int,
        ranges: Sequence[OffsetRange],
        polled: Mapping[TopicPartition, Sequence[Any]],
    ) -> None:
        pass

    def record_committed(
        self, connector: str, task: int, offsets: Mapping[TopicPartition, int]
    ) -> None:
        pass

    def set_log_ends(
        self, connector: str, task: int, ends: Mapping[TopicPartition, int | None]
    ) -> None:
        pass

    def set_consumer_lags(
        self, connector: str, task: int, lags: Mapping[TopicPartition, int]
    ) -> None:
        """The task's lag for exactly these partitions: series of partitions not in ``lags``
        (revoked, or the consumer closed with ``{}``) are dropped."""
        key = (connector, str(task))
        now = {(tp.topic, str(tp.partition)): lag for tp, lag in lags.items()}
        before = self._lag_labels.get(key, set())
        for topic, partition in before - now.keys():
            with contextlib.suppress(KeyError):
                self.consumer_lag.remove(*key, topic, partition)
        for (topic, partition), lag in now.items():
            self.consumer_lag.labels(*key, topic, partition).set(lag)
        if now:
            self._lag_labels[key] = set(now)
        else:
            self._lag_labels.pop(key, None)

    def forget_task(self, connector: str, task: int) -> None:
        """Drop a task's series (its connector was deleted or shrank): no stale lag."""
        key = (connector, str(task))
        for topic, partition in self._lag_labels.pop(key, set()):
            with contextlib.suppress(KeyError):
                self.consumer_lag.remove(*key, topic, partition)
        for metric in (self.records_consumed, self.records_written, self.write_seconds):
            with contextlib.suppress(KeyError):
                metric.remove(*key)

    def observe_loop_lag(self, seconds: float) -> None:
        """One event-loop lag sample: ``LoopLag(on_sample=metrics.observe_loop_lag)``."""
        lag = max(0.0, seconds)
        self.event_loop_lag.observe(lag)
        self.event_loop_lag_last.set(lag)

    # -- state read on scrape ---------------------------------------------------------------

    def watch_worker(self, herder: Herder) -> None:
        """Export the worker's connector and task states on every scrape (idempotent)."""
        self._watch(herder, _WorkerCollector(herder))

    def watch_cluster(self, member: ClusterView) -> None:
        """Export distributed mode's group figures on every scrape (idempotent)."""
        self._watch(member, _ClusterCollector(member))

    def watch_pool(self, pool: PoolView) -> None:
        """Export the executor pool's state on every scrape (idempotent)."""
        self._watch(pool, _PoolCollector(pool))

    def _watch(self, source: object, collector: Collector) -> None:
        key = (id(source), type(collector))  # a distributed worker is watched twice
        if key not in self._watched:
            self._watched[key] = collector
            self.registry.register(collector)

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The exposition for a scrape, in the format ``accept`` asks for (text by default)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class _WorkerCollector(Collector):
    def __init__(self, herder: Herder) -> None:
        self._herder = herder

    def describe(self) -> Iterable[Metric]:
        return []  # contents depend on the connectors; no fixed description

    def collect(self) -> Iterator[Metric]:
        connector_state = GaugeMetricFamily(
            "connectd_connector_state",
            "1 for the connector's current state, 0 for the others.",
            labels=["connector", "state"],
        )
        task_state = GaugeMetricFamily(
            "connectd_task_state",
            "1 for the task's current state, 0 for the others.",
            labels=["connector", "task", "state"],
        )
        incarnation = GaugeMetricFamily(
            "connectd_task_incarnation",
            "The epoch of the task's live incarnation.",
            labels=["connector", "task"],
        )
        restarts = GaugeMetricFamily(
            "connectd_task_auto_restarts",
            "Automatic restarts counted by the restart policy.",
            labels=["connector", "task"],
        )
        stalled = GaugeMetricFamily(
            "connectd_task_stalled",
            "1 while the task is RUNNING with lag above 0 and no commit for task.stall.warn.ms.",
            labels=["connector", "task"],
        )
        fresh = _FreshnessFamilies()
        for name in self._herder.connector_names():
            try:
                status = self._herder.connector_status(name)
            except ConnectdError:  # deleted while we looked
                continue
            for state in State:
                connector_state.add_metric([name, state.value], float(status.state is state))
            for t in status.tasks:
                labels = [name, str(t.id)]
                for state in State:
                    task_state.add_metric([*labels, state.value], float(t.state is state))
                if t.incarnation is not None:
                    incarnation.add_metric(labels, t.incarnation)
                if t.auto_restart is not None:
                    restarts.add_metric(labels, t.auto_restart.count)
                stalled.add_metric(labels, float(t.stalled is not None))
                for p in t.freshness:
                    fresh.add(labels, p)
        yield from (connector_state, task_state, incarnation, restarts, stalled)
        yield from fresh.families()


class _FreshnessFamilies:
    """Per task and partition: what the sink committed against the partition's log."""

    def __init__(self) -> None:
        labels = ["connector", "task", "topic", "partition"]
        self.committed = GaugeMetricFamily(
            "connectd_partition_committed_offset",
            "The next offset the task's sink committed (pre_commit), per partition.",
            labels=labels,
        )
        self.log_end = GaugeMetricFamily(
            "connectd_partition_log_end_offset",
            "The partition's end (highwater) at the task's latest poll.",
            labels=labels,
        )
        self.lag = GaugeMetricFamily(
            "connectd_partition_commit_lag_records",
            "Records in the partition not committed by the sink yet: log end - committed.",
            labels=labels,
        )
        self.last_commit = GaugeMetricFamily(
            "connectd_partition_last_commit_timestamp_seconds",
            "When the task's committed offset last advanced (Unix time).",
            labels=labels,
        )
        self.event_time = GaugeMetricFamily(
            "connectd_partition_committed_event_timestamp_seconds",
            "kafka_timestamp of the newest committed record (Unix time): how fresh the sink's"
            " data is.",
            labels=labels,
        )

    def add(self, task: list[str], p: PartitionFreshness) -> None:
        labels = [*task, p.topic, str(p.partition)]
        for family, value in (
            (self.committed, p.committed),
            (self.log_end, p.log_end),
            (self.lag, p.lag),
            (self.last_commit, p.last_commit),
            (self.event_time, p.event_time),
        ):
            if value is not None:  # unknown yet: no sample rather than a made-up one
                family.add_metric(labels, value)

    def families(self) -> Iterator[Metric]:
        yield from (self.committed, self.log_end, self.lag, self.last_commit, self.event_time)


class _PoolCollector(Collector):
    def __init__(self, pool: PoolView) -> None:
        self._pool = pool

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        status = self._pool.status()
        yield GaugeMetricFamily(
            "connectd_executor_pool_started",
            "1 once the executor pool has started; 0 while nothing needed an executor yet"
            " (executor.pool.start).",
            value=1.0 if status.started else 0.0,
        )
        executors = GaugeMetricFamily(
            "connectd_executors", "Executor processes by state.", labels=["state"]
        )
        for state, count in (
            ("starting", status.starting),
            ("idle", status.idle),
            ("busy", status.busy),
            ("stopping", status.stopping),
        ):
            executors.add_metric([state], count)
        yield executors
        for name, help_text, value in (
            ("connectd_executor_deaths", "Executors that died on their own.", status.deaths),
            (
                "connectd_executor_recycles",
                "Executors replaced after a failed write.",
                status.recycles,
            ),
            (
                "connectd_executor_start_failures",
                "Executors whose SparkSession never became ready.",
                status.start_failures,
            ),
            ("connectd_executor_writes", "Writes the pool completed.", status.writes_done),
        ):
            yield CounterMetricFamily(name, help_text, value=value)
        rss = GaugeMetricFamily(
            "connectd_executor_rss_bytes",
            "Resident memory of an executor's whole process tree (JVM included).",
            labels=["executor"],
        )
        for info in self._pool.snapshot():
            if info.rss_bytes is not None:
                rss.add_metric([str(info.id)], info.rss_bytes)
        yield rss


class _ClusterCollector(Collector):
    def __init__(self, member: ClusterView) -> None:
        self._member = member

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        c = self._member.cluster()
        for name, help_text, value in (
            (
                "connectd_cluster_generation",
                "The group generation this member joined.",
                "generation",
            ),
            ("connectd_cluster_leader", "1 if this member leads the group.", "leader"),
            ("connectd_cluster_connectors", "Connectors assigned to this member.", "connectors"),
            ("connectd_cluster_tasks", "Tasks assigned to this member.", "tasks"),
            (
                "connectd_cluster_config_lag",
                "Config-log records read but not yet applied to the work here.",
                "config_lag",
            ),
        ):
            yield GaugeMetricFamily(name, help_text, value=float(c[value]))
        yield CounterMetricFamily(
            "connectd_cluster_rebalances", "Rebalances this member completed.", c["rebalances"]
        )
        yield CounterMetricFamily(
            "connectd_cluster_rebalance_seconds",
            "Time spent applying rebalances (stopping and starting work).",
            c["rebalance_seconds"],
        )
