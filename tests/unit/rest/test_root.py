"""``GET /``, ``/health`` (Connect's bodies and statuses), ``/metrics``, ``/openapi.json``."""

from __future__ import annotations

import re

from pydantic import BaseModel
from support.fake_worker import Client, FakeWorker, local_settings, serving_client

import daemon
from daemon.metrics import Metrics
from daemon.rest import models as m
from daemon.rest import operations

CONNECT_4_ENDPOINTS = {
    ("/", "get"),
    ("/health", "get"),
    ("/connectors", "get"),
    ("/connectors", "post"),
    ("/connectors/{connector}", "get"),
    ("/connectors/{connector}", "delete"),
    ("/connectors/{connector}/config", "get"),
    ("/connectors/{connector}/config", "put"),
    ("/connectors/{connector}/config", "patch"),
    ("/connectors/{connector}/status", "get"),
    ("/connectors/{connector}/restart", "post"),
    ("/connectors/{connector}/pause", "put"),
    ("/connectors/{connector}/resume", "put"),
    ("/connectors/{connector}/stop", "put"),
    ("/connectors/{connector}/tasks", "get"),
    ("/connectors/{connector}/tasks/{task}/status", "get"),
    ("/connectors/{connector}/tasks/{task}/restart", "post"),
    ("/connectors/{connector}/topics", "get"),
    ("/connectors/{connector}/topics/reset", "put"),
    ("/connectors/{connector}/offsets", "get"),
    ("/connectors/{connector}/offsets", "patch"),
    ("/connectors/{connector}/offsets", "delete"),
    ("/connector-plugins", "get"),
    ("/connector-plugins/{plugin}/config", "get"),
    ("/connector-plugins/{plugin}/config/validate", "put"),
    ("/admin/loggers", "get"),
    ("/admin/loggers/{logger}", "get"),
    ("/admin/loggers/{logger}", "put"),
}
"""Kafka Connect 4.x's public REST endpoints (internal worker-to-worker ones excluded)."""

CONNECT_4_INTERNAL = {("/connectors/{connector}/tasks", "post")}
"""Connect 4.x's worker-to-worker endpoints connectd serves (``/fence`` is for sources only)."""


async def test_root_shows_version_commit_cluster(client: Client) -> None:
    answer = await client.get("/")
    assert answer.status == 200
    assert set(answer.json) == {"version", "commit", "kafka_cluster_id"}
    assert answer.json["version"] == daemon.__version__
    assert answer.json["kafka_cluster_id"] == "fake-cluster-id"
    assert answer.json["commit"] == "unknown" or re.fullmatch(
        r"[0-9a-f]{16}", answer.json["commit"]
    )


async def test_health_healthy(client: Client) -> None:
    answer = await client.get("/health")
    assert answer.status == 200
    assert answer.json == {
        "status": "healthy",
        "message": "Worker has completed startup and is ready to handle requests.",
    }


async def test_health_starting_is_503(worker: FakeWorker) -> None:
    worker.ready = False
    async with serving_client(worker, local_settings(health_timeout=0.05)) as client:
        answer = await client.get("/health")
        assert answer.status == 503
        assert answer.json == {"status": "starting", "message": "Worker is still starting up."}


async def test_health_unhealthy_is_500(worker: FakeWorker) -> None:
    worker.healthy = False
    async with serving_client(worker, local_settings(health_timeout=0.05)) as client:
        answer = await client.get("/health")
        assert answer.status == 500
        assert answer.json["status"] == "unhealthy"
        assert answer.json["message"].startswith("Worker was unable to handle this request")


async def test_metrics_exposition(worker: FakeWorker) -> None:
    metrics = Metrics()
    metrics.record_consumed("sink", 0, 5)
    metrics.record_written("sink", 0, 5, 0.02)
    async with serving_client(worker, metrics=metrics) as client:
        await client.create("sink")
        answer = await client.get("/metrics")
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.text
        assert 'connectd_records_consumed_total{connector="sink",task="0"} 5.0' in text
        assert 'connectd_write_seconds_count{connector="sink",task="0"} 1.0' in text
        assert 'connectd_connector_state{connector="sink",state="RUNNING"} 1.0' in text
        assert 'connectd_task_state{connector="sink",state="RUNNING",task="0"} 1.0' in text
        assert "connectd_task_incarnation" in text
        openmetrics = await client.get(
            "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        assert openmetrics.headers["Content-Type"].startswith("application/openmetrics-text")
        assert openmetrics.text.rstrip().endswith("# EOF")


async def test_openapi_document_lists_every_operation(client: Client) -> None:
    answer = await client.get("/openapi.json")
    assert answer.status == 200
    document = answer.json
    assert document["openapi"].startswith("3.1")
    declared = {(op.path, op.method.lower()) for op in operations()}
    documented = {(p, m) for p, ops in document["paths"].items() for m in ops}
    assert declared == documented
    own = {("/metrics", "get"), ("/openapi.json", "get")}
    assert declared == CONNECT_4_ENDPOINTS | CONNECT_4_INTERNAL | own
    assert "security" not in document  # no auth configured
    create = document["paths"]["/connectors"]["post"]
    ref = create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert schema["required"] == ["name", "config"]
    assert schema["additionalProperties"] is False


def _fields(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


async def test_answer_models_name_every_field_the_worker_sends(
    client: Client, worker: FakeWorker
) -> None:
    """The OpenAPI answer models and ``daemon.runtime.model``'s JSON stay in step."""
    await client.create("c", tasks_max=2)
    worker.fail_task("c", 1, "Traceback ...")
    status = (await client.get("/connectors/c/status")).json
    assert set(status) == _fields(m.ConnectorStateInfo)
    assert set(status["connector"]) <= _fields(m.ConnectorState)
    for task in status["tasks"]:
        assert set(task) <= _fields(m.TaskState)
        m.TaskState.model_validate(task)
    m.ConnectorStateInfo.model_validate(status)
    info = (await client.get("/connectors/c")).json
    assert set(info) == _fields(m.ConnectorInfo)
    m.ConnectorInfo.model_validate(info)
    for task_info in (await client.get("/connectors/c/tasks")).json:
        assert set(task_info) == _fields(m.TaskInfo)
    plugins = (await client.get("/connector-plugins")).json
    assert all(set(p) == _fields(m.PluginInfo) for p in plugins)
    assert set((await client.get("/")).json) == _fields(m.ServerInfo)
