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
  ``runtime/slot/freshness.py``) ``connectd_partition_committed_offset``,
  ``connectd_partition_log_end_offset``, ``connectd_partition_commit_lag_records``,
  ``connectd_partition_last_commit_timestamp_seconds``,
  ``connectd_partition_committed_event_timestamp_seconds``; ``connectd_executor_pool_started``
  (0 until the pool starts: ``executor.pool.start``), ``connectd_executors{state}``,
  ``connectd_executor_writes_aside`` (``executor/queue.py``),
  ``connectd_executor_rss_bytes{executor}``, ``connectd_executor_deaths_total``,
  ``connectd_executor_recycles_total``,
  ``connectd_executor_start_failures_total``, ``connectd_executor_writes_total``
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.metrics.collectors import (
    ClusterCollector,
    ClusterView,
    PoolCollector,
    PoolView,
    WorkerCollector,
)
from daemon.runtime.model import Herder

WRITE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


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
    # (``runtime/slot/freshness.py``) and read from the task status on scrape, like the states:
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
        self._watch(herder, WorkerCollector(herder))

    def watch_cluster(self, member: ClusterView) -> None:
        """Export distributed mode's group figures on every scrape (idempotent)."""
        self._watch(member, ClusterCollector(member))

    def watch_pool(self, pool: PoolView) -> None:
        """Export the executor pool's state on every scrape (idempotent)."""
        self._watch(pool, PoolCollector(pool))

    def _watch(self, source: object, collector: Collector) -> None:
        key = (id(source), type(collector))  # a distributed worker is watched twice
        if key not in self._watched:
            self._watched[key] = collector
            self.registry.register(collector)

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The exposition for a scrape, in the format ``accept`` asks for (text by default)."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type
