"""Strimzi's Kafka Connect Grafana dashboard against connectd: the dashboard's queries of
Connect's own metrics, as written in strimzi/strimzi-kafka-operator's
``packaging/examples/metrics/grafana-dashboards/strimzi-kafka-connect.json`` (its variables
filled in), run by a real Prometheus scraping a real daemon. The labels Strimzi's pod monitor
adds (``strimzi_io_kind``, ``strimzi_io_cluster``, ``namespace``) are the scrape's static
labels here. Each query is valid PromQL and returns series once the state it shows exists (a
paused connector, a failed task), and the consumer panels once the tasks' consumers read. Not
served by connectd: the dashboard's JVM, container and producer panels (``jvm_*``,
``container_*``, ``kafka_producer_*``: Connect's producers are source connectors')."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory
from support.prometheus import Prometheus, prometheus  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration

SELECT = 'strimzi_io_kind=~"KafkaConnect.*",strimzi_io_cluster="my-connect"'
NS = f'namespace="kafka",{SELECT}'
#: The dashboard's queries of Connect's metrics, with $kubernetes_namespace = kafka and
#: $strimzi_connect_cluster_name = my-connect.
QUERIES = {
    "Number of Connectors": f"sum(kafka_connect_worker_connector_count{{{SELECT}}})",
    "Number of Tasks": f"sum(kafka_connect_worker_task_count{{{SELECT}}})",
    "[paused] tasks": (
        f"sum(kafka_connect_worker_connector_paused_task_count{{{NS}}}) by (connector) != 0"
    ),
    "[failed] tasks": (
        f"sum(kafka_connect_worker_connector_failed_task_count{{{NS}}}) by (connector) != 0"
    ),
    "[unassigned] tasks": (
        f"sum(kafka_connect_worker_connector_unassigned_task_count{{{NS}}}) by (connector) != 0"
    ),
    "[destroyed] tasks": (
        f"sum(kafka_connect_worker_connector_destroyed_task_count{{{NS}}}) by (connector) != 0"
    ),
    "running": f"sum(kafka_connect_worker_connector_running_task_count{{{SELECT}}})",
    "paused": f"sum(kafka_connect_worker_connector_paused_task_count{{{SELECT}}})",
    "failed": f"sum(kafka_connect_worker_connector_failed_task_count{{{SELECT}}})",
    "unassigned": f"sum(kafka_connect_worker_connector_unassigned_task_count{{{SELECT}}})",
    "destroyed": f"sum(kafka_connect_worker_connector_destroyed_task_count{{{SELECT}}})",
    "Connector Status": (
        f"count by (status, connector) (kafka_connect_connector_status{{{SELECT}}})"
    ),
    "Connector Task Status": (
        f"count by (connector, task, status) (kafka_connect_connector_task_status{{{SELECT}}})"
    ),
    # Kafka's consumer-metrics group of the tasks' consumers.
    "(Sink/Consumers) Incoming bytes per second": (
        f"sum(rate(kafka_consumer_incoming_byte_total{{{SELECT}}}[1m])) by (kubernetes_pod_name)"
    ),
    "#consumer connections": f"sum(kafka_consumer_connection_count{{{SELECT}}})",
}
#: Empty unless a worker has such tasks, on Connect as here.
RARE = {"[unassigned] tasks", "[destroyed] tasks"}


async def test_strimzis_connect_queries_return_series_from_connectd(
    run_daemon: DaemonFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    prometheus: Callable[..., Prometheus],  # noqa: F811
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    d = await run_daemon(worker_properties(kafka_bootstrap, tmp_path / "state"))
    assert d.rest_url is not None
    connectors = {
        "running": {"connector.class": "EchoSink", "topics": topic},
        "paused": {"connector.class": "EchoSink", "topics": topic},
        "failing": {"connector.class": "support.failing_sinks:StartFailingSink", "topics": topic},
    }
    async with aiohttp.ClientSession(d.rest_url) as http:
        for name, config in connectors.items():
            async with http.post("/connectors", json={"name": name, "config": config}) as r:
                assert r.status == 201, await r.text()
        async with http.put("/connectors/paused/pause") as r:
            assert r.status == 202, await r.text()
    labels = {"strimzi_io_kind": "KafkaConnect", "strimzi_io_cluster": "my-connect"}
    prom = prometheus([d.rest_url.removeprefix("http://")], labels={**labels, "namespace": "kafka"})

    def empty() -> list[str]:
        return [title for title, q in QUERIES.items() if title not in RARE and not prom.query(q)]

    await wait_until(lambda: not empty(), 120, "every Connect panel with series", interval=1.0)
    for title in RARE:
        prom.query(QUERIES[title])  # valid PromQL (an error answer raises)

    def value(title: str) -> dict[str, float]:
        return {
            r["metric"].get("connector", ""): float(r["value"][1])
            for r in prom.query(QUERIES[title])
        }

    assert value("Number of Connectors") == {"": 3.0}
    assert value("[paused] tasks") == {"paused": 1.0}
    assert value("[failed] tasks") == {"failing": 1.0}
    statuses = {(r["metric"]["connector"], r["metric"]["status"]) for r in prom.query(
        QUERIES["Connector Status"])}  # fmt: skip
    assert statuses == {("running", "running"), ("paused", "paused"), ("failing", "running")}

    def consumer_figures() -> tuple[float, float]:
        rate = prom.query(QUERIES["(Sink/Consumers) Incoming bytes per second"])
        conns = prom.query(QUERIES["#consumer connections"])
        return (
            float(rate[0]["value"][1]) if rate else 0.0,
            float(conns[0]["value"][1]) if conns else 0.0,
        )

    # The running and the paused task's consumers fetch and heartbeat: bytes come in.
    await wait_until(
        lambda: min(consumer_figures()) > 0, 60, "consumer bytes and connections", interval=1.0
    )
    _, connections = consumer_figures()
    assert connections >= 2, connections  # at least a broker's and the coordinator's
