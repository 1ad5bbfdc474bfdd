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
- Kafka Connect's own names, as the Prometheus JMX exporter with Strimzi's Kafka Connect
  rules exports Connect's MBeans (so dashboards and alerts built on them work unchanged):
  per task ``{connector,task}`` ``kafka_connect_sink_task_sink_record_read_total``,
  ``kafka_connect_sink_task_sink_record_send_total``,
  ``kafka_connect_sink_task_offset_commit_completion_total``,
  ``kafka_connect_sink_task_offset_commit_seq_no``, ``kafka_connect_sink_task_partition_count``,
  ``kafka_connect_sink_task_sink_record_active_count``,
  the ``task-error-metrics`` group
  (``TASK_COUNTS``: ``kafka_connect_task_error_total_record_errors``, ...,
  ``kafka_connect_task_error_last_error_timestamp`` in ms); on scrape
  ``kafka_connect_connector_status{connector,status}`` and
  ``kafka_connect_connector_task_status{connector,task,status}`` (1, the state in lower case),
  ``kafka_connect_worker_connector_count``, ``kafka_connect_worker_task_count`` and per
  connector ``kafka_connect_worker_connector_{total,running,paused,failed,unassigned,
  restarting,destroyed}_task_count`` (``collectors.py``); on scrape, Connect's windowed figures
  (``sampled.py``): ``kafka_connect_sink_task_{sink_record_read,sink_record_send,
  offset_commit_completion,offset_commit_skip}_rate``, ``..._put_batch_{avg,max}_time_ms``,
  ``kafka_connect_connector_task_batch_size_{avg,max}``,
  ``kafka_connect_sink_task_sink_record_active_count_{avg,max}``,
  ``kafka_connect_connector_task_{running,pause}_ratio``,
  ``kafka_connect_connector_task_offset_commit_{avg,max}_time_ms`` and
  ``..._offset_commit_{success,failure}_percentage``, and the worker's
  ``kafka_connect_worker_{connector,task}_startup_*``; in distributed mode the
  ``kafka_connect_worker_rebalance_*`` group (``collectors.rebalance_families``); per task
  consumer ``{clientid}`` (``<client.id or connectd>-<connector>-<task>``), Kafka's
  ``consumer-metrics`` group: ``kafka_consumer_incoming_byte_total``,
  ``kafka_consumer_response_total``, ``kafka_consumer_connection_count``
  (``daemon.kafka.traffic``)
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
import time
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.kafka.traffic import ClientTraffic
from daemon.metrics.collectors import (
    ClientCollector,
    ClusterCollector,
    ClusterView,
    PoolCollector,
    PoolView,
    WorkerCollector,
)
from daemon.metrics.sampled import Startups, TaskWindows, WindowsCollector
from daemon.runtime.incarnation.progress import Marks
from daemon.runtime.model import Herder

#: Connect's per-task counters that the runtime adds to (``record_task_counts``): keyword →
#: (the exported name, its help). Strimzi's rules export the ``task-error-metrics`` group as
#: gauges named ``kafka_connect_task_error_<attribute>``, and ``-total`` attributes of
#: ``sink-task-metrics`` as counters.
TASK_COUNTS: dict[str, tuple[str, str]] = {
    "sink_record_send": (
        "kafka_connect_sink_task_sink_record_send",
        "Connect's sink-record-send-total: records output from the transformations and sent"
        " to the task's put (errant ones left out).",
    ),
    "total_record_errors": (
        "kafka_connect_task_error_total_record_errors",
        "Connect's total-record-errors: records that failed a stage (converter, transform,"
        " the sink's refusal).",
    ),
    "total_record_failures": (
        "kafka_connect_task_error_total_record_failures",
        "Connect's total-record-failures: failed attempts at a record's stage.",
    ),
    "total_records_skipped": (
        "kafka_connect_task_error_total_records_skipped",
        "Connect's total-records-skipped: errant records skipped under errors.tolerance=all.",
    ),
    "total_errors_logged": (
        "kafka_connect_task_error_total_errors_logged",
        "Connect's total-errors-logged: errant records logged (errors.log.enable).",
    ),
    "total_retries": (
        "kafka_connect_task_error_total_retries",
        "Connect's total-retries: failed delivery steps retried.",
    ),
    "deadletterqueue_produce_requests": (
        "kafka_connect_task_error_deadletterqueue_produce_requests",
        "Connect's deadletterqueue-produce-requests: dead letters produced.",
    ),
    "deadletterqueue_produce_failures": (
        "kafka_connect_task_error_deadletterqueue_produce_failures",
        "Connect's deadletterqueue-produce-failures: dead letters whose produce failed.",
    ),
}
#: Of ``TASK_COUNTS``: the ones that say a record had an error (``last-error-timestamp``).
_ERRORS = frozenset({"total_record_errors", "deadletterqueue_produce_failures"})

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
        self.connect_read = Counter(
            "kafka_connect_sink_task_sink_record_read",
            "Connect's sink-record-read-total: records read from Kafka by the task.",
            task,
            registry=r,
        )
        self.connect_commits = Counter(
            "kafka_connect_sink_task_offset_commit_completion",
            "Connect's offset-commit-completion-total: the task's commits (pre_commit returned).",
            task,
            registry=r,
        )
        self.connect_commit_seq = Gauge(
            "kafka_connect_sink_task_offset_commit_seq_no",
            "Connect's offset-commit-seq-no: the sequence number of the task's last commit.",
            task,
            registry=r,
        )
        self.task_counts: dict[str, Counter | Gauge] = {
            key: (Counter if key == "sink_record_send" else Gauge)(name, doc, task, registry=r)
            for key, (name, doc) in TASK_COUNTS.items()
        }
        self.last_error = Gauge(
            "kafka_connect_task_error_last_error_timestamp",
            "Connect's last-error-timestamp: when the task last saw an errant record (epoch ms).",
            task,
            registry=r,
        )
        self.windows: dict[tuple[str, str], TaskWindows] = {}
        self.startups = (Startups("connector"), Startups("task"))
        r.register(WindowsCollector(self.windows, self.startups))
        self._counted: set[tuple[str, str]] = set()  # tasks with their TASK_COUNTS series
        self._lag_labels: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self._watched: dict[tuple[int, type[Collector]], Collector] = {}
        self._clients: dict[str, ClientTraffic] = {}
        r.register(ClientCollector(self._clients))
        self._consumed_total = 0
        self._written_total = 0

    # -- recording (called by the runtime) --------------------------------------------------

    def _windows(self, connector: str, task: int) -> TaskWindows:
        key = (connector, str(task))
        windows = self.windows.get(key)
        if windows is None:
            windows = self.windows[key] = TaskWindows()
        return windows

    def record_consumed(self, connector: str, task: int, count: int) -> None:
        self.records_consumed.labels(connector, str(task)).inc(count)
        self.connect_read.labels(connector, str(task)).inc(count)
        self._windows(connector, task).read.record(count)
        self._consumed_total += count

    def record_put(self, connector: str, task: int, records: int, seconds: float) -> None:
        """One ``put`` of a batch of ``records`` that returned after ``seconds``."""
        windows = self._windows(connector, task)
        windows.put_ms.record(seconds * 1000)
        windows.batch.record(records)

    def record_commit_attempt(self, connector: str, task: int, seconds: float, ok: bool) -> None:
        """One ``pre_commit`` that succeeded (``ok``) or failed after ``seconds``."""
        windows = self._windows(connector, task)
        windows.commit_ms.record(seconds * 1000)
        windows.commit_ok.record(1.0 if ok else 0.0)

    def record_active(self, connector: str, task: int, count: int) -> None:
        """The task's records delivered and not yet committed, after a put or a commit."""
        self._windows(connector, task).active.record(count)

    def record_task_state(self, connector: str, task: int, state: str) -> None:
        """``started``, ``running``, ``paused`` or ``stopped``: Connect's state ratios."""
        windows = self._windows(connector, task)
        if state == "started":
            windows.states.restart()
        else:
            windows.states.enter(state)

    def record_startup(self, kind: str, ok: bool) -> None:
        """A connector's or a task's (``kind``) start on this worker, and how it went."""
        self.startups[0 if kind == "connector" else 1].record(ok)

    def record_task_counts(self, connector: str, task: int, **counts: int) -> None:
        labels = (connector, str(task))
        if labels not in self._counted:  # every series from the task's start, at 0 (as
            self._counted.add(labels)  # Connect's MBean attributes): rates see the first rise
            for metric in self.task_counts.values():
                metric.labels(*labels)
        for key, count in counts.items():
            if count:
                self.task_counts[key].labels(*labels).inc(count)
        if counts.get("sink_record_send"):
            self._windows(connector, task).send.record(counts["sink_record_send"])
        if any(counts.get(key) for key in _ERRORS):
            self.last_error.labels(*labels).set(int(time.time() * 1000))

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
    # of these three, only ``record_committed`` counts something here (Connect's commits).

    def record_delivering(
        self,
        connector: str,
        task: int,
        ranges: Sequence[OffsetRange],
        marks: Marks,
    ) -> None:
        pass

    def record_committed(
        self, connector: str, task: int, offsets: Mapping[TopicPartition, int]
    ) -> None:
        self.connect_commits.labels(connector, str(task)).inc()
        self.connect_commit_seq.labels(connector, str(task)).inc()
        self._windows(connector, task).commits.record()

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

    def watch_client(self, traffic: ClientTraffic) -> None:
        self._clients[traffic.client_id] = traffic

    def forget_client(self, traffic: ClientTraffic) -> None:
        if self._clients.get(traffic.client_id) is traffic and traffic.users <= 1:
            del self._clients[traffic.client_id]

    def forget_task(self, connector: str, task: int) -> None:
        """Drop a task's series (its connector was deleted or shrank): no stale lag."""
        key = (connector, str(task))
        self._counted.discard(key)
        self.windows.pop(key, None)
        for topic, partition in self._lag_labels.pop(key, set()):
            with contextlib.suppress(KeyError):
                self.consumer_lag.remove(*key, topic, partition)
        connect = (self.connect_read, self.connect_commits, self.connect_commit_seq)
        for metric in (
            self.records_consumed,
            self.records_written,
            self.write_seconds,
            *connect,
            *self.task_counts.values(),
            self.last_error,
        ):
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
