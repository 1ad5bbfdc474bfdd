"""The collectors ``Metrics`` adds for state that lives elsewhere: read when Prometheus scrapes,
never copied into gauges, so they cannot go stale (connector and task states and freshness from
the herder, the executor pool's status, a distributed member's share)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from daemon.errors import ConnectdError
from daemon.executor.info import ExecutorInfo, PoolStatus
from daemon.kafka.traffic import ClientTraffic
from daemon.metrics.sampled import Sampled
from daemon.runtime.model import ConnectorStatus, Herder, PartitionFreshness, State


class ClusterView(Protocol):
    """A distributed worker: ``cluster()`` has ``generation``, ``leader``, ``rebalances``,
    ``rebalance_seconds``, ``connectors``, ``tasks`` (this member's share), ``config_lag``."""

    def cluster(self) -> Mapping[str, Any]: ...


class PoolView(Protocol):
    """What the pool collector reads (``daemon.executor.ExecutorPool`` has both)."""

    def status(self) -> PoolStatus: ...

    def snapshot(self) -> list[ExecutorInfo]: ...


class WorkerCollector(Collector):
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
        connect = _ConnectFamilies(self._herder.worker_id)
        for name in self._herder.connector_names():
            try:
                status = self._herder.connector_status(name)
            except ConnectdError:  # deleted while we looked
                continue
            connect.add(status)
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
        yield from connect.families()


#: Connect's per-connector task counts of a worker (``connect-worker-metrics``), by state.
_TASK_COUNTS = {
    "running": State.RUNNING,
    "paused": State.PAUSED,
    "failed": State.FAILED,
    "unassigned": State.UNASSIGNED,
    "restarting": State.RESTARTING,
}


class _ConnectFamilies:
    """Kafka Connect's state metrics under the names Strimzi's JMX exporter rules give its
    MBeans: what this worker runs, as a Connect worker reports it (in distributed mode, the
    connectors and tasks whose status names this worker)."""

    def __init__(self, worker_id: str) -> None:
        self._worker_id = worker_id
        self.connector_status = GaugeMetricFamily(
            "kafka_connect_connector_status",
            "Connect's connector-metrics status: 1 for the connector's state (lower case).",
            labels=["connector", "status"],
        )
        self.task_status = GaugeMetricFamily(
            "kafka_connect_connector_task_status",
            "Connect's connector-task-metrics status: 1 for the task's state (lower case).",
            labels=["connector", "task", "status"],
        )
        self.partition_count = GaugeMetricFamily(
            "kafka_connect_sink_task_partition_count",
            "Connect's sink-task-metrics partition-count: partitions assigned to the task (as"
            " of its latest poll).",
            labels=["connector", "task"],
        )
        self.active_count = GaugeMetricFamily(
            "kafka_connect_sink_task_sink_record_active_count",
            "Connect's sink-task-metrics sink-record-active-count: records read from Kafka and"
            " delivered to the sink, not yet committed by it.",
            labels=["connector", "task"],
        )
        self.connectors = 0
        self.tasks = 0
        self.per_connector = {
            kind: GaugeMetricFamily(
                f"kafka_connect_worker_connector_{kind}_task_count",
                f"Connect's connector-{kind}-task-count of this worker.",
                labels=["connector"],
            )
            for kind in ("total", *_TASK_COUNTS, "destroyed")
        }

    def _here(self, worker_id: str) -> bool:
        return not self._worker_id or worker_id == self._worker_id

    def add(self, status: ConnectorStatus) -> None:
        name = status.name
        if self._here(status.worker_id):
            self.connectors += 1
            self.connector_status.add_metric([name, status.state.value.lower()], 1.0)
        mine = [t for t in status.tasks if self._here(t.worker_id)]
        for t in mine:
            self.task_status.add_metric([name, str(t.id), t.state.value.lower()], 1.0)
            if t.state is State.RUNNING or t.state is State.PAUSED:
                self.partition_count.add_metric([name, str(t.id)], len(t.freshness))
                active = [p.active for p in t.freshness if p.active is not None]
                self.active_count.add_metric([name, str(t.id)], sum(active))
        self.tasks += len(mine)
        if not mine and not self._here(status.worker_id):
            return
        self.per_connector["total"].add_metric([name], len(mine))
        for kind, state in _TASK_COUNTS.items():
            count = sum(1 for t in mine if t.state is state)
            self.per_connector[kind].add_metric([name], count)
        self.per_connector["destroyed"].add_metric([name], 0)

    def families(self) -> Iterator[Metric]:
        yield self.connector_status
        yield self.task_status
        yield self.partition_count
        yield self.active_count
        yield GaugeMetricFamily(
            "kafka_connect_worker_connector_count",
            "Connect's connector-count: connectors run in this worker.",
            value=self.connectors,
        )
        yield GaugeMetricFamily(
            "kafka_connect_worker_task_count",
            "Connect's task-count: tasks run in this worker.",
            value=self.tasks,
        )
        yield from self.per_connector.values()


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


class ClientCollector(Collector):
    """Kafka's ``consumer-metrics`` group of each task's consumer, as Strimzi's rules export it
    (``kafka.consumer<type=consumer-metrics, client-id=…>``: ``-total`` attributes as counters,
    ``-count`` ones as gauges, the client id as ``clientid``): what the Strimzi dashboard's
    "Incoming bytes per second" and "Connection count" panels read."""

    def __init__(self, clients: Mapping[str, ClientTraffic]) -> None:
        self._clients = clients

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        label = ["clientid"]
        received = CounterMetricFamily(
            "kafka_consumer_incoming_byte",
            "Kafka's incoming-byte-total: bytes read off all sockets of a task's consumer.",
            labels=label,
        )
        responses = CounterMetricFamily(
            "kafka_consumer_response",
            "Kafka's response-total: responses a task's consumer received.",
            labels=label,
        )
        connections = GaugeMetricFamily(
            "kafka_consumer_connection_count",
            "Kafka's connection-count: a task's consumer's live connections.",
            labels=label,
        )
        for client_id, traffic in list(self._clients.items()):
            if traffic.users <= 0:  # released by a consumer that had no metrics: gone
                continue
            received.add_metric([client_id], traffic.bytes_in)
            responses.add_metric([client_id], traffic.responses)
            connections.add_metric([client_id], traffic.connections())
        yield from (received, responses, connections)


class PoolCollector(Collector):
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
        yield GaugeMetricFamily(
            "connectd_executor_writes_aside",
            "Writes that ran past executor.write.overdue.ms while another connector's write"
            " waited, and stepped aside (each holds its executor until it ends or its deadline).",
            value=status.aside,
        )
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


class ClusterCollector(Collector):
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
        yield from rebalance_families(c)


def rebalance_families(c: Mapping[str, Any], now: float | None = None) -> Iterator[Metric]:
    """Connect's ``connect-worker-rebalance-metrics`` under Strimzi's names, from a member's
    ``cluster()``: its ``rebalance_log`` of (monotonic end, seconds) replayed into Kafka's
    sampled stats at their own times."""
    now = time.monotonic() if now is None else now
    log: Sequence[tuple[float, float]] = c.get("rebalance_log", ())
    clock = [now]
    durations = Sampled(lambda: clock[0])
    for ended, seconds in log:
        clock[0] = ended
        durations.record(seconds * 1000)
    clock[0] = now
    since = (now - log[-1][0]) * 1000 if log else math.inf
    prefix = "kafka_connect_worker_rebalance_"
    for name, meaning, value in (
        ("completed_rebalances_total", "rebalances this worker completed",
         float(c["rebalances"])),
        ("epoch", "the group generation this worker joined", float(c["generation"])),
        ("rebalancing", "1 while this worker applies an assignment", float(c["rebalancing"])),
        ("rebalance_avg_time_ms", "the average time a rebalance took (stopping and starting"
         " work)", durations.avg()),
        ("rebalance_max_time_ms", "the longest time a rebalance took", durations.max()),
        ("time_since_last_rebalance_ms", "time since this worker's last rebalance ended (+Inf"
         " before the first)", since),
    ):  # fmt: skip
        attribute = name.replace("_", "-")
        yield GaugeMetricFamily(prefix + name, f"Connect's {attribute}: {meaning}.", value=value)
