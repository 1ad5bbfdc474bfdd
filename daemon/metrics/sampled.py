"""Kafka Connect's windowed task metrics (``-rate``, ``-avg``, ``-max``, ``-percentage``),
computed as Kafka's metrics library (kafka-clients 4.1, ``SampledStat`` and its ``Rate``,
``Avg``, ``Max``) computes them with Connect's defaults, and exported on scrape under the names
Strimzi's JMX exporter rules give Connect's MBeans. A conformance test runs Kafka's own classes
on the same clock and values (``tests/conformance/connect/Stats.java``).

How Kafka's ``SampledStat`` works: values go into samples of ``metrics.sample.window.ms`` (30
s) each, a ring of ``metrics.num.samples`` (2) plus one overlapping; a sample whose last event
is older than the samples' whole span (60 s) is reset to start empty at the time it is read.
``Rate`` divides the samples' sum by the time since the oldest sample started, padded to at
least ``(samples - 1)`` whole windows (a burst reads as a rate over at least 30 s), and reading
a rate with no sample starts one. ``Avg`` and ``Max`` are over the values the samples hold, NaN
without any.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

WINDOW = 30.0  # metrics.sample.window.ms
SAMPLES = 2  # metrics.num.samples


class _Sample:
    __slots__ = ("count", "last_event", "start", "value")

    def __init__(self, now: int, initial: float) -> None:
        self.reset(now, initial)

    def reset(self, now: int, initial: float) -> None:
        self.start = self.last_event = now
        self.count = 0
        self.value = initial


class SampledStat:
    """One of Kafka's sampled stats: ``kind`` ``sum`` (what ``Rate`` divides), ``avg`` or
    ``max``, on ``clock`` (seconds)."""

    def __init__(
        self,
        kind: str,
        clock: Callable[[], float] = time.monotonic,
        window: float = WINDOW,
        samples: int = SAMPLES,
    ) -> None:
        self.kind = kind
        self.clock = clock
        self.window = round(window * 1000)  # milliseconds, as Kafka counts: no float edges
        self.samples = samples
        self._initial = -math.inf if kind == "max" else 0.0
        self._ring: list[_Sample] = []
        self._current = 0

    def _now(self) -> int:
        return round(self.clock() * 1000)

    def record(self, value: float = 1.0) -> None:
        now = self._now()
        sample = self._current_sample(now)
        if now - sample.start >= self.window:
            sample = self._advance(now)
        sample.value = max(sample.value, value) if self.kind == "max" else sample.value + value
        sample.count += 1
        sample.last_event = now

    def _current_sample(self, now: int) -> _Sample:
        if not self._ring:
            self._ring.append(_Sample(now, self._initial))
        return self._ring[self._current]

    def _advance(self, now: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)  # one overlapping sample
        if self._current >= len(self._ring):
            self._ring.append(_Sample(now, self._initial))
        else:
            self._ring[self._current].reset(now, self._initial)
        return self._ring[self._current]

    def _purge(self, now: int) -> None:
        for sample in self._ring:
            if now - sample.last_event >= self.samples * self.window:
                sample.reset(now, self._initial)

    def value(self) -> float:
        """The stat over its samples: their sum, average or maximum (NaN without values)."""
        self._purge(self._now())
        count = sum(s.count for s in self._ring)
        if self.kind == "sum":
            return sum(s.value for s in self._ring)
        if count == 0:
            return math.nan
        if self.kind == "max":
            return max(s.value for s in self._ring)
        return sum(s.value for s in self._ring) / count

    def rate(self) -> float:
        """Kafka's ``Rate`` of a ``sum`` stat: per second."""
        total = self.value()
        now = self._now()
        self._purge(now)
        if not self._ring:
            self._ring.append(_Sample(now, self._initial))
        elapsed = now - min(s.start for s in self._ring)
        full = int(elapsed // self.window)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window
        return total / (max(elapsed, 1) / 1000)


class Sampled:
    """The stats Connect keeps of one sensor: a rate, or an average and a maximum. They are
    made at the first record or read (a task that never feeds a sensor, such as one whose
    start fails, carries none of them: fewer objects for each full garbage collection to walk);
    made then, they are what they would have been from the start, since a stat has no state
    before its first sample."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stats: tuple[SampledStat, SampledStat, SampledStat] | None = None

    def _made(self) -> tuple[SampledStat, SampledStat, SampledStat]:
        if self._stats is None:
            clock = self._clock
            self._stats = (
                SampledStat("sum", clock),
                SampledStat("avg", clock),
                SampledStat("max", clock),
            )
        return self._stats

    def record(self, value: float = 1.0) -> None:
        for stat in self._made():
            stat.record(value)

    def rate(self) -> float:
        return self._made()[0].rate()

    def avg(self) -> float:
        return self._made()[1].value()

    def max(self) -> float:
        return self._made()[2].value()

    def percentage(self) -> float:
        """Of values 1 (yes) and 0 (no): the share of yes (Connect's ``-percentage``)."""
        return self._made()[1].value()


class StateTimes:
    """Connect's ``StateTracker``: the share of an incarnation's life spent in a state, since
    it started (a restart starts anew)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.restart()

    def restart(self) -> None:
        self._began = self._since = self._clock()
        self._state = "unassigned"
        self._spent: dict[str, float] = {}

    def enter(self, state: str) -> None:
        now = self._clock()
        self._spent[self._state] = self._spent.get(self._state, 0.0) + now - self._since
        self._state, self._since = state, now

    def ratio(self, state: str) -> float:
        now = self._clock()
        spent = self._spent.get(state, 0.0) + (now - self._since if state == self._state else 0)
        return spent / (now - self._began) if now > self._began else 0.0


@dataclass
class TaskWindows:
    """One task's windowed figures (each fed by a ``Metrics.record_*`` call)."""

    clock: Callable[[], float] = time.monotonic
    read: Sampled = field(init=False)
    send: Sampled = field(init=False)
    commits: Sampled = field(init=False)
    put_ms: Sampled = field(init=False)
    batch: Sampled = field(init=False)
    commit_ms: Sampled = field(init=False)
    commit_ok: Sampled = field(init=False)
    active: Sampled = field(init=False)
    states: StateTimes = field(init=False)

    def __post_init__(self) -> None:
        names = ("read", "send", "commits", "put_ms", "batch", "commit_ms", "commit_ok", "active")
        for name in names:
            setattr(self, name, Sampled(self.clock))
        self.states = StateTimes(self.clock)


#: (exported name, Connect's attribute and meaning, how it is read from ``TaskWindows``).
_GAUGES: tuple[tuple[str, str, Callable[[TaskWindows], float]], ...] = (
    (
        "kafka_connect_sink_task_sink_record_read_rate",
        "sink-record-read-rate: records read from Kafka per second.",
        lambda w: w.read.rate(),
    ),
    (
        "kafka_connect_sink_task_sink_record_send_rate",
        "sink-record-send-rate: records sent to the task's put per second (after the"
        " transformations; errant ones left out).",
        lambda w: w.send.rate(),
    ),
    (
        "kafka_connect_sink_task_offset_commit_completion_rate",
        "offset-commit-completion-rate: the task's completed commits per second.",
        lambda w: w.commits.rate(),
    ),
    (
        "kafka_connect_sink_task_offset_commit_skip_rate",
        "offset-commit-skip-rate: commits skipped per second (connectd commits one at a"
        " time, so none is ever skipped: 0).",
        lambda w: 0.0,
    ),
    (
        "kafka_connect_sink_task_put_batch_avg_time_ms",
        "put-batch-avg-time-ms: the average time a put of a batch took.",
        lambda w: w.put_ms.avg(),
    ),
    (
        "kafka_connect_sink_task_put_batch_max_time_ms",
        "put-batch-max-time-ms: the longest time a put of a batch took.",
        lambda w: w.put_ms.max(),
    ),
    (
        "kafka_connect_sink_task_sink_record_active_count_avg",
        "sink-record-active-count-avg: the average of the records delivered and not yet"
        " committed, as of each put and commit.",
        lambda w: w.active.avg(),
    ),
    (
        "kafka_connect_sink_task_sink_record_active_count_max",
        "sink-record-active-count-max: the most records delivered and not yet committed, as of"
        " each put and commit.",
        lambda w: w.active.max(),
    ),
    (
        "kafka_connect_connector_task_running_ratio",
        "running-ratio: the share of the task's life (since its incarnation started) spent"
        " running.",
        lambda w: w.states.ratio("running"),
    ),
    (
        "kafka_connect_connector_task_pause_ratio",
        "pause-ratio: the share of the task's life (since its incarnation started) spent paused.",
        lambda w: w.states.ratio("paused"),
    ),
    (
        "kafka_connect_connector_task_batch_size_avg",
        "batch-size-avg: the average number of records in the batches the task put.",
        lambda w: w.batch.avg(),
    ),
    (
        "kafka_connect_connector_task_batch_size_max",
        "batch-size-max: the most records in one batch the task put.",
        lambda w: w.batch.max(),
    ),
    (
        "kafka_connect_connector_task_offset_commit_avg_time_ms",
        "offset-commit-avg-time-ms: the average time a commit (pre_commit) took.",
        lambda w: w.commit_ms.avg(),
    ),
    (
        "kafka_connect_connector_task_offset_commit_max_time_ms",
        "offset-commit-max-time-ms: the longest time a commit (pre_commit) took.",
        lambda w: w.commit_ms.max(),
    ),
    (
        "kafka_connect_connector_task_offset_commit_success_percentage",
        "offset-commit-success-percentage: the share of commits that succeeded (0 to 1).",
        lambda w: w.commit_ok.percentage(),
    ),
    (
        "kafka_connect_connector_task_offset_commit_failure_percentage",
        "offset-commit-failure-percentage: the share of commits that failed (0 to 1).",
        lambda w: 1.0 - w.commit_ok.percentage(),
    ),
)


@dataclass
class Startups:
    """Connect's worker-metrics startup figures for connectors or tasks (``kind``)."""

    kind: str
    clock: Callable[[], float] = time.monotonic
    attempts: int = 0
    successes: int = 0
    results: Sampled = field(init=False)

    def __post_init__(self) -> None:
        self.results = Sampled(self.clock)

    def record(self, ok: bool) -> None:
        self.attempts += 1
        self.successes += ok
        self.results.record(1.0 if ok else 0.0)

    def families(self) -> Iterator[Metric]:
        kind = self.kind
        figures = (
            ("attempts_total", "attempts", float(self.attempts)),
            ("success_total", "successful starts", float(self.successes)),
            ("failure_total", "failed starts", float(self.attempts - self.successes)),
            ("success_percentage", "the share of starts that succeeded (0 to 1)",
             self.results.percentage()),
            ("failure_percentage", "the share of starts that failed (0 to 1)",
             1.0 - self.results.percentage()),
        )  # fmt: skip
        for suffix, meaning, value in figures:
            attribute = f"{kind}-startup-{suffix.replace('_', '-')}"
            yield GaugeMetricFamily(
                f"kafka_connect_worker_{kind}_startup_{suffix}",
                f"Connect's worker-metrics {attribute}: {kind} {meaning} on this worker.",
                value=value,
            )


class WindowsCollector:
    """Exports every task's ``TaskWindows`` and the worker's ``Startups`` on scrape (a
    prometheus-client collector)."""

    def __init__(
        self, windows: dict[tuple[str, str], TaskWindows], startups: tuple[Startups, ...]
    ) -> None:
        self._windows = windows
        self._startups = startups

    def describe(self) -> Iterator[Metric]:
        return iter(())  # families depend on the tasks: described by collect at scrape

    def collect(self) -> Iterator[Metric]:
        labels = ["connector", "task"]
        families = [(GaugeMetricFamily(n, d, labels=labels), get) for n, d, get in _GAUGES]
        skips = CounterMetricFamily(
            "kafka_connect_sink_task_offset_commit_skip",
            "offset-commit-skip-total: commits skipped (none: connectd commits one at a time).",
            labels=labels,
        )
        for key, windows in sorted(self._windows.items()):
            for family, get in families:
                family.add_metric(list(key), get(windows))
            skips.add_metric(list(key), 0.0)
        for family, _ in families:
            yield family
        yield skips
        for startups in self._startups:
            yield from startups.families()
