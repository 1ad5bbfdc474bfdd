"""The Grafana dashboard connectd ships (``monitoring/grafana/connectd.json``): Grafana's JSON
shape (panels, targets, the datasource and connector variables), and every panel's query run by
a real Prometheus (Debian's package) scraping a real ``connectd distributed`` worker that runs a
ParquetSink (Spark executors), an EchoSink whose bad records go to a dead-letter topic, and a
task restarted through REST: each query is valid PromQL and returns series, except the panel of
executor kills, which is empty until an executor is killed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cluster import (
    ClusterFactory,
    cluster,  # noqa: F401 (the fixture; conftest does not list it)
)
from support.daemon import ROOT, wait_until
from support.kafka import dead_letter_settings, produce
from support.kafka_fixtures import TopicFactory
from support.prometheus import Prometheus, prometheus  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration

DASHBOARD = ROOT / "monitoring" / "grafana" / "connectd.json"
#: Panels whose series only exist once the event they count happened.
EVENTS = {"Executor kills (last hour)"}


def _panels() -> list[dict[str, Any]]:
    document = json.loads(DASHBOARD.read_text())
    return [p for p in document["panels"] if p["type"] != "row"]


def _queries() -> dict[str, list[str]]:
    """Each panel's queries as Grafana sends them with the connector variable at All."""
    subst = {"$connector": ".*", "$__rate_interval": "1m"}
    out = {}
    for panel in _panels():
        exprs = []
        for target in panel["targets"]:
            expr = target["expr"]
            for var, value in subst.items():
                expr = expr.replace(var, value)
            exprs.append(expr)
        out[panel["title"]] = exprs
    return out


def test_the_dashboard_is_grafana_json_with_its_variables() -> None:
    document = json.loads(DASHBOARD.read_text())
    assert document["uid"] and document["title"] and document["schemaVersion"] >= 36
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["connector"]["includeAll"] and variables["connector"]["allValue"] == ".*"
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
    for panel in _panels():
        assert panel["type"] in ("stat", "timeseries"), panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["description"], panel["title"]
        assert panel["gridPos"]["x"] >= 0 and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
    assert set(_queries()) >= EVENTS


async def test_every_panel_query_returns_series_from_a_scraped_worker(
    kafka_topic: TopicFactory,
    cluster: ClusterFactory,  # noqa: F811
    prometheus: Callable[..., Prometheus],  # noqa: F811
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    topic, bad_topic, dlq = [await kafka_topic(partitions=1) for _ in range(3)]
    c = await cluster(1)
    w = c[0]
    sinks = {
        "table": {
            "connector.class": "ParquetSink",
            "topics": topic,
            "path": str(tmp_path / "table"),
            "flush.interval.ms": "1000",
        },
        "letters": {
            "connector.class": "EchoSink",
            "topics": bad_topic,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            **dead_letter_settings(dlq),
        },
    }
    for name, config in sinks.items():
        code, body = await c.write(w, "POST", "/connectors", {"name": name, "config": config})
        assert code == 201, body
    prom = prometheus([w.url.removeprefix("http://")])
    await wait_until(lambda: prom.query("up == 1"), 30, "the worker scraped")
    await produce(kafka_bootstrap, topic, 200)
    await produce(kafka_bootstrap, bad_topic, [(None, b"{not json")] * 3)
    code, body = w.try_rest("POST", "/connectors/letters/tasks/0/restart")
    assert code == 204, body

    queries = _queries()

    def empty() -> list[str]:
        return [
            title
            for title, exprs in queries.items()
            if title not in EVENTS and not all(prom.query(e) for e in exprs)
        ]

    await wait_until(lambda: not empty(), 180, "every panel with series", interval=1.0)
    for title in EVENTS:
        for expr in queries[title]:
            prom.query(expr)  # valid PromQL (an error answer raises)
