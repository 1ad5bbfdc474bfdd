"""``/admin/loggers``: read and change Python log levels at run time, in Connect's terms."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from daemon.logs.levels import parse_level
from daemon.rest import models as m
from daemon.rest.api import Query, Reply, Routes, body, query
from daemon.rest.context import context
from daemon.rest.errors import bad_request, error_response, json_reply, not_found
from daemon.rest.front.protocol import ADMIN_HEADER
from daemon.runtime.distributed.herder import DistributedHerder

routes = Routes("admin")


@routes.op(
    "GET",
    "/admin/loggers",
    "The root logger and every logger whose level is set explicitly",
    Reply(200, "Levels by logger name", m.LoggerLevels),
)
async def list_loggers(request: web.Request) -> web.Response:
    return json_reply(context(request).loggers.all_levels())


@routes.op(
    "GET",
    "/admin/loggers/{logger}",
    "One logger's (effective) level",
    Reply(200, "The level", m.LoggerLevel),
    Reply(404, "No such logger", m.ErrorMessage),
)
async def get_logger(request: web.Request) -> web.Response:
    name = request.match_info["logger"]
    level = context(request).loggers.level(name)
    if level is None:
        raise not_found(f"Logger {name} not found.")
    return json_reply(level)


@routes.op(
    "PUT",
    "/admin/loggers/{logger}",
    "Set the level of a logger and of every logger below it (root: all of them)",
    Reply(200, "The loggers changed (scope=worker)", m.LoggerNames),
    Reply(
        204,
        "Changed (scope=cluster: written to the config topic, and every worker of the cluster"
        " applies it when it reads it; in standalone mode, this worker is the cluster)",
    ),
    Reply(400, "No level given, or an invalid scope", m.ErrorMessage),
    Reply(404, "Not a log level (Connect's status for this case)", m.ErrorMessage),
    body=m.LoggerLevelBody,
    query=(Query("scope", "choice", "worker", "worker or cluster", choices=("worker", "cluster")),),
)
async def set_logger(request: web.Request) -> web.Response:
    text = body(request, m.LoggerLevelBody).level
    if not text:
        raise bad_request("Desired 'level' parameter was not specified in request.")
    level = parse_level(text)
    if level is None:
        raise not_found(f"invalid log level '{text}'.")
    ctx = context(request)
    if query(request, "scope") == "cluster" and isinstance(ctx.herder, DistributedHerder):
        # Every worker applies it when it reads it from the config topic, as in Connect.
        await ctx.call(ctx.herder.set_cluster_logger_level(request.match_info["logger"], text))
        return web.Response(status=204)
    changed = ctx.loggers.set_level(request.match_info["logger"], level)
    if query(request, "scope") == "cluster":
        return web.Response(status=204)
    return json_reply(changed)


# ---- admin.listeners ----

ADMIN_PORTS = web.AppKey("admin_ports", set[tuple[str, int]])
"""The (address, port) of each admin listener socket the app is served on directly
(``RestServer``)."""


def is_admin_path(path: str) -> bool:
    return path == "/admin" or path.startswith("/admin/")


TRUSTS_FRONT = web.AppKey("trusts_front", bool)
"""The app is served behind the REST front process (which alone sets ``ADMIN_HEADER``)."""


def on_admin(request: web.Request) -> bool:
    """Whether ``request`` came in on an admin listener: as the REST front process says (it
    drops the header from what clients send), or by the socket it arrived on."""
    if request.app.get(TRUSTS_FRONT):
        return request.headers.get(ADMIN_HEADER) == "1"
    sockets = request.app.get(ADMIN_PORTS)
    if not sockets or request.transport is None:
        return False
    sockname = request.transport.get_extra_info("sockname")
    return bool(sockname) and tuple(sockname[:2]) in sockets


@web.middleware
async def admin_split(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With separate admin listeners (Connect's ``admin.listeners`` URLs): ``/admin`` only on
    them, and nothing else on them; the rest is Jersey's 404, as Connect answers."""
    if on_admin(request) != is_admin_path(request.path):
        return error_response(404, "HTTP 404 Not Found")
    return await handler(request)
