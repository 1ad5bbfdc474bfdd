"""Running connectors: status, tasks, restart, pause / resume / stop, active topics.

``POST /connectors/{c}/tasks/{t}/restart`` answers only once the old incarnation is reaped and
the new one started (``Herder.restart_task``); if the old one cannot be reaped the answer is
500 with the worker's ``StopFailed`` message and no second incarnation exists.
"""

from __future__ import annotations

from aiohttp import web

from daemon.rest import models as m
from daemon.rest.api import Query, Reply, Routes, body, query
from daemon.rest.context import context
from daemon.rest.errors import RestError, json_reply

routes = Routes("connectors")

_E400 = Reply(400, "Invalid query parameter", m.ErrorMessage)
_E404 = Reply(404, "No such connector", m.ErrorMessage)
_E404_TASK = Reply(404, "No such connector or task", m.ErrorMessage)
_E403 = Reply(403, "Topic tracking (or its reset) is disabled", m.ErrorMessage)
_E500 = Reply(500, "The worker failed, e.g. an old incarnation could not be reaped", m.ErrorMessage)


def _task(request: web.Request) -> int:
    return int(request.match_info["task"])


@routes.op(
    "GET",
    "/connectors/{connector}/status",
    "The states of a connector and its tasks",
    Reply(200, "The status", m.ConnectorStateInfo),
    _E404,
)
async def connector_status(request: web.Request) -> web.Response:
    name = request.match_info["connector"]
    herder = context(request).herder
    doc = herder.connector_status(name).to_json()
    live = getattr(herder, "live_status", None)  # distributed mode: the owners' live fields
    return json_reply(await live(name, doc) if live is not None else doc)


@routes.op(
    "GET",
    "/connectors/{connector}/tasks",
    "A connector's tasks and their configurations",
    Reply(200, "The tasks", m.TaskInfoList),
    _E404,
)
async def task_configs(request: web.Request) -> web.Response:
    infos = context(request).herder.task_infos(request.match_info["connector"])
    return json_reply([info.to_json() for info in infos])


@routes.op(
    "POST",
    "/connectors/{connector}/tasks",
    "Between workers (distributed mode): the task configurations the worker running the"
    " connector generated, for the leader to write to the config log",
    Reply(204, "Written, or the config log had them already"),
    Reply(400, "Standalone mode takes no task configurations from outside", m.ErrorMessage),
    _E404,
    Reply(409, "This worker is not the leader and none is known, or the connector is STOPPED"),
    body=m.TaskConfigsBody,
)
async def put_task_configs(request: web.Request) -> web.Response:
    ctx = context(request)
    configs = [dict(c) for c in body(request, m.TaskConfigsBody).root]
    await ctx.call(ctx.herder.put_task_configs(request.match_info["connector"], configs))
    return web.Response(status=204)


@routes.op(
    "GET",
    "/connectors/{connector}/tasks/{task}/status",
    "One task's state",
    Reply(200, "The task's state", m.TaskState),
    _E404_TASK,
)
async def task_status(request: web.Request) -> web.Response:
    herder = context(request).herder
    name, task = request.match_info["connector"], _task(request)
    doc = herder.task_status(name, task).to_json()
    live = getattr(herder, "live_task_status", None)  # distributed mode: the owner's view
    return json_reply(await live(name, task, doc) if live is not None else doc)


@routes.op(
    "POST",
    "/connectors/{connector}/restart",
    "Restart a connector; with includeTasks/onlyFailed also (failed) tasks",
    Reply(202, "Restarting: the status shows RESTARTING", m.ConnectorStateInfo),
    Reply(204, "Connector restarted (includeTasks and onlyFailed both false)"),
    _E400,
    _E404,
    _E500,
    query=(
        Query("includeTasks", "bool", False, "Also restart the connector's tasks"),
        Query("onlyFailed", "bool", False, "Only restart what is FAILED"),
    ),
)
async def restart_connector(request: web.Request) -> web.Response:
    ctx = context(request)
    name = request.match_info["connector"]
    include_tasks: bool = query(request, "includeTasks")
    only_failed: bool = query(request, "onlyFailed")
    if not include_tasks and not only_failed:
        await ctx.call(ctx.herder.restart_connector(name))
        return web.Response(status=204)
    status = await ctx.call(
        ctx.herder.restart_connector(name, include_tasks=include_tasks, only_failed=only_failed)
    )
    return json_reply(status.to_json(), status=202)


@routes.op(
    "POST",
    "/connectors/{connector}/tasks/{task}/restart",
    "Restart a task: the old incarnation is stopped, killed if need be and reaped first",
    Reply(204, "The new incarnation runs"),
    _E404_TASK,
    _E500,
)
async def restart_task(request: web.Request) -> web.Response:
    ctx = context(request)
    await ctx.call(ctx.herder.restart_task(request.match_info["connector"], _task(request)))
    return web.Response(status=204)


@routes.op(
    "PUT",
    "/connectors/{connector}/pause",
    "Pause a connector and its tasks",
    Reply(202, "Pausing"),
    _E404,
)
async def pause(request: web.Request) -> web.Response:
    ctx = context(request)
    await ctx.call(ctx.herder.pause_connector(request.match_info["connector"]))
    return web.Response(status=202)


@routes.op(
    "PUT",
    "/connectors/{connector}/resume",
    "Resume a paused or stopped connector",
    Reply(202, "Resuming"),
    _E404,
)
async def resume(request: web.Request) -> web.Response:
    ctx = context(request)
    await ctx.call(ctx.herder.resume_connector(request.match_info["connector"]))
    return web.Response(status=202)


@routes.op(
    "PUT",
    "/connectors/{connector}/stop",
    "Stop a connector: its tasks end, its configuration and offsets stay",
    Reply(204, "Stopped"),
    _E404,
    _E500,
)
async def stop(request: web.Request) -> web.Response:
    ctx = context(request)
    await ctx.call(ctx.herder.stop_connector(request.match_info["connector"]))
    return web.Response(status=204)


@routes.op(
    "GET",
    "/connectors/{connector}/topics",
    "Topics the connector has consumed from since the last reset",
    Reply(200, "The topics, keyed by the connector's name", m.ActiveTopicsByConnector),
    _E403,
    _E404,
)
async def topics(request: web.Request) -> web.Response:
    ctx = context(request)
    if not ctx.settings.topic_tracking:
        raise RestError(403, "Topic tracking is disabled.")
    name = request.match_info["connector"]
    return json_reply({name: {"topics": ctx.herder.topics(name)}})


@routes.op(
    "PUT",
    "/connectors/{connector}/topics/reset",
    "Forget the connector's active topics",
    Reply(202, "Reset"),
    _E403,
    _E404,
)
async def reset_topics(request: web.Request) -> web.Response:
    ctx = context(request)
    if not ctx.settings.topic_tracking:
        raise RestError(403, "Topic tracking is disabled.")
    if not ctx.settings.topic_tracking_reset:
        raise RestError(403, "Topic tracking reset is disabled.")
    await ctx.call(ctx.herder.reset_topics(request.match_info["connector"]))
    return web.Response(status=202)
