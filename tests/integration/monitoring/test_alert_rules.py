"""The alert rules connectd ships (``monitoring/prometheus/connectd-alerts.yml``) on a real
Prometheus (Debian's package) scraping a real daemon, each condition provoked: a task that
FAILED, dead letters, a task that stalls. The rules' other conditions (a hung write killed, a
rebalance storm, lag, stale data) are Prometheus's own rule tests on synthetic series
(``promtool test rules``). A query of Connect's names as Strimzi's dashboard asks them returns
this worker's figures."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.daemon import ROOT, DaemonFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.prometheus import Prometheus, prometheus, tool  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration

RULES = ROOT / "monitoring" / "prometheus" / "connectd-alerts.yml"


def test_the_rules_load_and_pass_prometheus_rule_tests() -> None:
    check = subprocess.run(
        [str(tool("promtool")), "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert check.returncode == 0 and "SUCCESS: 8 rules found" in check.stdout, check
    test = subprocess.run(
        [str(tool("promtool")), "test", "rules", str(RULES.with_suffix(".test.yml"))],
        capture_output=True,
        text=True,
    )
    assert test.returncode == 0, test.stdout + test.stderr


async def test_alerts_fire_for_conditions_provoked_on_a_daemon(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    prometheus: Callable[..., Prometheus],  # noqa: F811
    tmp_path: Path,
) -> None:
    # The shipped rules, with every `for:` at 0 s: the conditions, not the waits, are tested.
    rules = tmp_path / "rules.yml"
    rules.write_text(re.sub(r"for: \d+[smh]", "for: 0s", RULES.read_text()))
    topic, bad_topic, dlq = [await kafka_topic(partitions=1) for _ in range(3)]
    await produce(kafka_bootstrap, topic, 20)
    props = worker_properties(kafka_bootstrap, tmp_path / "state", task_stall_warn_ms="2000")
    d = await run_daemon(props)
    assert d.herder is not None and d.rest_url is not None
    prom = prometheus([d.rest_url.removeprefix("http://")], [rules])
    await wait_until(lambda: prom.query("up == 1"), 30, "the daemon scraped")

    await d.herder.create_connector(
        "broken", {"connector.class": "support.failing_sinks:StartFailingSink", "topics": topic}
    )
    await d.herder.create_connector(
        "stuck", {"connector.class": "support.failing_sinks:NeverCommitSink", "topics": topic}
    )
    await d.herder.create_connector(
        "letters",
        {
            "connector.class": "EchoSink",
            "topics": bad_topic,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
        },
    )
    # Its dead-letter count scraped at 0 first: the rule fires on a rise, as on a real worker.
    zero = 'kafka_connect_task_error_deadletterqueue_produce_requests{connector="letters"} == 0'
    await wait_until(lambda: prom.query(zero), 30, "the dead-letter count scraped at 0")
    await produce(kafka_bootstrap, bad_topic, [(None, b"{not json")] * 3)

    def firing() -> dict[str, set[str]]:
        names: dict[str, set[str]] = {}
        for a in prom.alerts():
            names.setdefault(a["labels"]["alertname"], set()).add(a["labels"].get("connector", ""))
        return names

    wanted = {
        "ConnectdTaskFailed": "broken",
        "ConnectdTaskStalled": "stuck",
        "ConnectdDeadLetters": "letters",
    }
    seen = await wait_until(
        lambda: (f := firing()) and all(c in f.get(n, ()) for n, c in wanted.items()) and f,
        90,
        f"{sorted(wanted)} firing",
        interval=0.5,
    )
    assert "letters" not in seen.get("ConnectdTaskFailed", set())  # only the broken one
    # Strimzi's dashboard asks Connect's names: this worker's three connectors and tasks.
    [count] = prom.query("sum(kafka_connect_worker_connector_count)")
    assert float(count["value"][1]) == 3
    [failed] = prom.query('sum(kafka_connect_connector_task_status{status="failed"})')
    assert float(failed["value"][1]) == 1
