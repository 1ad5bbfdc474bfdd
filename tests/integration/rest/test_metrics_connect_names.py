"""Kafka Connect's metrics under Connect's names (issue 35 item 1, a first part): a real daemon,
real broker, records with bad JSON among them under ``errors.tolerance=all`` with a dead-letter
topic, and a sink whose ``put`` raises ``RetriableError`` twice. The scrape (over HTTP, parsed as
Prometheus text) carries the series that the Prometheus JMX exporter with Strimzi's Kafka
Connect rules makes of Connect's MBeans: ``kafka_connect_sink_task_*``,
``kafka_connect_task_error_*``, ``kafka_connect_connector_status``,
``kafka_connect_connector_task_status`` and ``kafka_connect_worker_*``, with the counts the
test caused."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.prometheus import Samples, samples

pytestmark = pytest.mark.integration

GOOD, BAD = 24, 6


def commits(samples: Samples, connector: str) -> float | None:
    name = "kafka_connect_sink_task_offset_commit_completion_total"
    return _value(samples, name, connector=connector)


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    found = [v for have, v in samples.get(name, []) if labels.items() <= have.items()]
    return sum(found) if found else None


async def test_connect_named_metrics_count_what_the_tasks_did(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    dlq = await kafka_topic(partitions=1)
    records = [(None, b'{"n": %d}' % i) for i in range(GOOD)]
    records += [(None, b"{not json %d" % i) for i in range(BAD)]
    await produce(kafka_bootstrap, topic, records)
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"))
    assert d.rest_url is not None
    echo = {
        "connector.class": "EchoSink",
        "topics": topic,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
    }
    flaky = {
        "connector.class": "support.failing_sinks:FlakySink",
        "topics": topic,
        "fail.puts": "2",
        "retry.wait.ms": "100",
    }
    async with aiohttp.ClientSession(d.rest_url) as http:
        for name, config in (("echo", echo), ("flaky-metrics", flaky)):
            async with http.post("/connectors", json={"name": name, "config": config}) as r:
                assert r.status == 201, await r.text()

        async def scrape() -> Samples:
            async with http.get("/metrics") as r:
                assert r.status == 200
                return samples(await r.text())

        async def settled() -> Samples | None:
            s = await scrape()
            done = (
                _value(s, "kafka_connect_sink_task_sink_record_read_total", connector="echo")
                == GOOD + BAD
                and _value(s, "kafka_connect_task_error_total_retries", connector="flaky-metrics")
                == 2
                and (commits(s, "echo") or 0) > 0
                and (commits(s, "flaky-metrics") or 0) > 0
                # the put after the two retries (a commit may come before it)
                and _value(
                    s, "kafka_connect_sink_task_sink_record_send_total", connector="flaky-metrics"
                )
                == GOOD + BAD
            )
            return s if done else None

        s = await wait_until(settled, 60, "every record read, both retries, commits of both")

    task = {"connector": "echo", "task": "0"}
    assert _value(s, "kafka_connect_sink_task_sink_record_send_total", **task) == GOOD
    errors = {
        "total_record_errors": BAD,
        "total_record_failures": BAD,
        "total_records_skipped": BAD,
        "total_errors_logged": BAD,
        "total_retries": 0,
        "deadletterqueue_produce_requests": BAD,
        "deadletterqueue_produce_failures": 0,  # present at 0, as Connect's attribute is
    }
    for attribute, expected in errors.items():
        assert _value(s, f"kafka_connect_task_error_{attribute}", **task) == expected, attribute
    last = _value(s, "kafka_connect_task_error_last_error_timestamp", **task)
    assert last is not None and abs(last / 1000 - time.time()) < 120
    seq = _value(s, "kafka_connect_sink_task_offset_commit_seq_no", **task)
    completed = _value(s, "kafka_connect_sink_task_offset_commit_completion_total", **task)
    assert seq is not None and seq >= 1 and completed == seq

    assert _value(s, "kafka_connect_sink_task_partition_count", **task) == 1
    # Everything the echo task read was delivered and committed: none active.
    assert _value(s, "kafka_connect_sink_task_sink_record_active_count", **task) == 0

    flaky_task = {"connector": "flaky-metrics", "task": "0"}
    assert _value(s, "kafka_connect_task_error_total_retries", **flaky_task) == 2
    assert _value(s, "kafka_connect_sink_task_sink_record_send_total", **flaky_task) == GOOD + BAD

    # State, as a Connect worker's MBeans give it: one series per connector and task, value 1.
    for name in ("echo", "flaky-metrics"):
        assert _value(s, "kafka_connect_connector_status", connector=name, status="running") == 1
        assert _value(s, "kafka_connect_connector_status", connector=name) == 1
        running = {"connector": name, "task": "0", "status": "running"}
        assert _value(s, "kafka_connect_connector_task_status", **running) == 1
        per = {"connector": name}
        assert _value(s, "kafka_connect_worker_connector_total_task_count", **per) == 1
        assert _value(s, "kafka_connect_worker_connector_running_task_count", **per) == 1
        assert _value(s, "kafka_connect_worker_connector_failed_task_count", **per) == 0
    assert _value(s, "kafka_connect_worker_connector_count") == 2
    assert _value(s, "kafka_connect_worker_task_count") == 2

    # Connect's windowed figures (Kafka's SampledStat: two samples of 30 s), per task.
    records_per_s = (GOOD + BAD) / 30  # read within the first window: the sum over >= 30 s
    read_rate = _value(s, "kafka_connect_sink_task_sink_record_read_rate", **task)
    assert read_rate is not None and 0 < read_rate <= records_per_s + 1e-9
    send_rate = _value(s, "kafka_connect_sink_task_sink_record_send_rate", **task)
    assert send_rate is not None and 0 < send_rate <= GOOD / 30 + 1e-9
    commit_rate = _value(s, "kafka_connect_sink_task_offset_commit_completion_rate", **task)
    assert commit_rate is not None and commit_rate > 0
    assert _value(s, "kafka_connect_sink_task_offset_commit_skip_rate", **task) == 0
    assert _value(s, "kafka_connect_sink_task_offset_commit_skip_total", **task) == 0
    batch_avg = _value(s, "kafka_connect_connector_task_batch_size_avg", **task)
    batch_max = _value(s, "kafka_connect_connector_task_batch_size_max", **task)
    assert batch_avg is not None and batch_max is not None and 0 < batch_avg <= batch_max <= GOOD
    put_avg = _value(s, "kafka_connect_sink_task_put_batch_avg_time_ms", **task)
    put_max = _value(s, "kafka_connect_sink_task_put_batch_max_time_ms", **task)
    assert put_avg is not None and put_max is not None and 0 <= put_avg <= put_max < 60_000
    commit_avg = _value(s, "kafka_connect_connector_task_offset_commit_avg_time_ms", **task)
    commit_max = _value(s, "kafka_connect_connector_task_offset_commit_max_time_ms", **task)
    assert commit_avg is not None and commit_max is not None and 0 <= commit_avg <= commit_max
    success = "kafka_connect_connector_task_offset_commit_success_percentage"
    assert _value(s, success, **task) == 1
    assert _value(s, "kafka_connect_connector_task_offset_commit_failure_percentage", **task) == 0
    # The flaky task's two failed puts are retried, not counted as puts.
    flaky_batches = _value(s, "kafka_connect_connector_task_batch_size_max", **flaky_task)
    assert flaky_batches is not None and flaky_batches <= GOOD + BAD

    # The worker's startups: both connectors and both tasks started once, without failure.
    for kind in ("connector", "task"):
        attempts = _value(s, f"kafka_connect_worker_{kind}_startup_attempts_total")
        assert attempts == 2, kind
        assert _value(s, f"kafka_connect_worker_{kind}_startup_success_total") == 2
        assert _value(s, f"kafka_connect_worker_{kind}_startup_failure_total") == 0
        assert _value(s, f"kafka_connect_worker_{kind}_startup_success_percentage") == 1
        assert _value(s, f"kafka_connect_worker_{kind}_startup_failure_percentage") == 0
    running = _value(s, "kafka_connect_connector_task_running_ratio", **task)
    assert running is not None and 0 < running <= 1
    assert _value(s, "kafka_connect_connector_task_pause_ratio", **task) == 0
    active_avg = _value(s, "kafka_connect_sink_task_sink_record_active_count_avg", **task)
    active_max = _value(s, "kafka_connect_sink_task_sink_record_active_count_max", **task)
    assert active_avg is not None and active_max is not None
    assert 0 <= active_avg <= active_max <= GOOD + BAD
