"""`GET /`, `GET /health` (Connect's); `GET /metrics`, `GET /openapi.json` (connectd's)."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from aiohttp import web

import daemon
from daemon.rest import models as m
from daemon.rest.api import Reply, Routes
from daemon.rest.context import HealthReporting, context
from daemon.rest.errors import json_reply

routes = Routes("worker")

HEALTHY = "Worker has completed startup and is ready to handle requests."
STARTING = "Worker is still starting up."
UNHEALTHY = "Worker was unable to handle this request and may be unable to handle other requests."


@functools.cache
def commit_id() -> str:
    """The source checkout's commit (16 hex digits, as Connect shows), or ``unknown``."""
    git = Path(daemon.__file__).resolve().parent.parent / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            ref_file = git / ref
            if ref_file.exists():
                head = ref_file.read_text().strip()
            else:
                packed = (git / "packed-refs").read_text().splitlines()
                head = next(line.split()[0] for line in packed if line.endswith(" " + ref))
        return head[:16] if len(head) >= 16 else "unknown"
    except (OSError, StopIteration, IndexError):
        return "unknown"


@routes.op(
    "GET",
    "/",
    "This worker's version and its Kafka cluster's id",
    Reply(200, "Worker information", m.ServerInfo),
)
async def server_info(request: web.Request) -> web.Response:
    ctx = context(request)
    return json_reply(
        {
            "version": daemon.__version__,
            "commit": commit_id(),
            "kafka_cluster_id": await ctx.cluster_id(),
        }
    )


@routes.op(
    "GET",
    "/health",
    "Whether the worker is ready and live (open even with authentication on)",
    Reply(200, "Healthy", m.WorkerStatus),
    Reply(500, "Unhealthy", m.WorkerStatus),
    Reply(503, "Still starting, or a task stalled (health.stalled.unhealthy=true)", m.WorkerStatus),
    public=True,
)
async def health(request: web.Request) -> web.Response:
    ctx = context(request)
    herder = ctx.herder
    if not isinstance(herder, HealthReporting):
        return _health(200, "healthy", HEALTHY)
    try:
        async with asyncio.timeout(ctx.settings.health_timeout):
            await asyncio.shield(herder.health_check())
    except TimeoutError:
        if not herder.is_ready():
            return _health(503, "starting", STARTING)
        return _health(500, "unhealthy", UNHEALTHY)
    except Exception as exc:  # the hook reports a failure with a message
        state, status, text = (
            ("unhealthy", 500, UNHEALTHY) if herder.is_ready() else ("starting", 503, STARTING)
        )
        return _health(status, state, f"{text} {exc}")
    if not herder.is_ready():
        return _health(503, "starting", STARTING)
    stalled = herder.stalled_tasks()
    if not stalled:
        return _health(200, "healthy", HEALTHY)
    named = "; ".join(f"{c}-{t} (no commit since {s.since}, lag {s.lag})" for c, t, s in stalled)
    listed = [{"connector": c, "task": t, "since": s.since, "lag": s.lag} for c, t, s in stalled]
    if ctx.settings.health_stalled_unhealthy:
        return _health(
            503, "unhealthy", f"Tasks stalled (health.stalled.unhealthy=true): {named}", listed
        )
    return _health(200, "healthy", f"{HEALTHY} Tasks stalled: {named}", listed)


def _health(
    status: int, state: str, message: str, stalled: list[dict[str, Any]] | None = None
) -> web.Response:
    body: dict[str, Any] = {"status": state, "message": message}
    if stalled:
        body["stalled"] = stalled
    return json_reply(body, status=status)


@routes.op(
    "GET",
    "/metrics",
    "Prometheus metrics (connectd)",
    Reply(200, "Prometheus text exposition", content_type="text/plain", schema={"type": "string"}),
)
async def metrics(request: web.Request) -> web.Response:
    body, content_type = context(request).metrics.render(request.headers.get("Accept"))
    return web.Response(body=body, headers={"Content-Type": content_type})


@routes.op(
    "GET",
    "/openapi.json",
    "This API's OpenAPI 3.1 document (connectd)",
    Reply(200, "The OpenAPI document", schema={"type": "object"}),
)
async def openapi(request: web.Request) -> web.Response:
    document = context(request).openapi
    if document is None:
        raise web.HTTPNotFound()
    return json_reply(document)
