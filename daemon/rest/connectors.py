"""Connectors: list, create, read, configure (PUT/PATCH), delete — Connect's semantics.

Names: ``POST``'s ``name`` is trimmed; ``config.name`` is filled in when missing and must equal
the connector's name (the body's, or the path's for ``PUT``) exactly, else 400 with Connect's
message. A new name must be non-empty, without ``/`` or control characters, at most 249 bytes.
"""

from __future__ import annotations

from typing import cast

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from daemon.config.connector import ConnectorName
from daemon.errors import ConnectorNotFound
from daemon.rest import models as m
from daemon.rest.api import Query, Reply, Routes, body, query
from daemon.rest.context import STILL_STARTING, context
from daemon.rest.errors import RestError, bad_request, json_reply
from daemon.runtime.model import TargetState

routes = Routes("connectors")

_NAME = TypeAdapter(ConnectorName)
_E400 = Reply(400, "Invalid request or configuration", m.ErrorMessage)
_E404 = Reply(404, "No such connector", m.ErrorMessage)
_E409 = Reply(409, "The connector exists already", m.ErrorMessage)
_E503 = Reply(
    503, "The worker is still starting up (its connectors are not loaded)", m.ErrorMessage
)


def check_name(name: str) -> None:
    """400 unless ``name`` can name a connector (not empty, no ``/`` or control characters,
    at most 249 UTF-8 bytes)."""
    try:
        _NAME.validate_python(name)
    except ValidationError as exc:
        reason = exc.errors(include_url=False)[0]
        detail = reason.get("ctx", {}).get("error", reason["msg"])
        raise bad_request(
            f"Invalid connector name: {detail}; expected a non-empty name without '/' or"
            " control characters, at most 249 bytes"
        ) from None


def check_and_put_name(name: str, config: dict[str, str]) -> None:
    """Connect's rule: ``config.name`` must equal ``name``; filled in when missing."""
    included = config.get("name")
    if included is None:
        config["name"] = name
    elif included != name:
        raise bad_request(
            f"Connector name configuration ({included}) doesn't match connector name in the URL"
            f" ({name})"
        )


@routes.op(
    "GET",
    "/connectors",
    "Connector names; with expand=status and/or expand=info, their status and details",
    Reply(200, "Names, or details keyed by name", m.ConnectorList),
    _E400,
    _E503,
    query=(
        Query(
            "expand",
            "choice",
            (),
            "status and/or info; repeat the parameter for both",
            choices=("status", "info"),
            repeat=True,
        ),
    ),
)
async def list_connectors(request: web.Request) -> web.Response:
    ctx = context(request)
    if ctx.starting():  # an empty or partial list would be a wrong answer, not an early one
        raise RestError(503, STILL_STARTING)
    herder = ctx.herder
    expand = cast(tuple[str, ...], query(request, "expand"))
    names = herder.connector_names()
    if not expand:
        return json_reply(names)
    out: dict[str, dict[str, object]] = {}
    for name in names:
        try:
            entry: dict[str, object] = {}
            if "status" in expand:
                entry["status"] = herder.connector_status(name).to_json()
            if "info" in expand:
                entry["info"] = herder.connector_info(name).to_json()
        except ConnectorNotFound:  # deleted while we looked: leave it out, as Connect does
            continue
        out[name] = entry
    return json_reply(out)


@routes.op(
    "POST",
    "/connectors",
    "Create a connector",
    Reply(201, "Created", m.ConnectorInfo, headers=("Location",)),
    _E400,
    _E409,
    body=m.CreateConnectorRequest,
)
async def create_connector(request: web.Request) -> web.Response:
    ctx = context(request)
    req = body(request, m.CreateConnectorRequest)
    name = req.name.strip()
    check_name(name)
    config = dict(req.config)
    check_and_put_name(name, config)
    state = TargetState(req.initial_state) if req.initial_state else TargetState.RUNNING
    info = await ctx.call(ctx.herder.create_connector(name, config, state))
    return json_reply(
        info.to_json(), status=201, headers={"Location": connector_url(request, name)}
    )


def connector_url(request: web.Request, name: str) -> str:
    """The absolute URL of ``/connectors/{name}``, as JAX-RS's ``Response.created`` gives."""
    return str(request.url.with_path(f"/connectors/{name}").with_query(None))


@routes.op(
    "GET",
    "/connectors/{connector}",
    "A connector's name, configuration, tasks and type",
    Reply(200, "The connector", m.ConnectorInfo),
    _E404,
)
async def get_connector(request: web.Request) -> web.Response:
    name = request.match_info["connector"]
    return json_reply(context(request).herder.connector_info(name).to_json())


@routes.op(
    "GET",
    "/connectors/{connector}/config",
    "A connector's configuration (${...} references unresolved)",
    Reply(200, "The configuration", m.ConfigMap),
    _E404,
)
async def get_config(request: web.Request) -> web.Response:
    name = request.match_info["connector"]
    return json_reply(context(request).herder.connector_config(name))


@routes.op(
    "PUT",
    "/connectors/{connector}/config",
    "Create a connector, or replace its configuration (its tasks restart)",
    Reply(200, "Reconfigured", m.ConnectorInfo),
    Reply(201, "Created", m.ConnectorInfo, headers=("Location",)),
    _E400,
    body=m.ConnectorConfigBody,
    body_description="The whole configuration; config.name is filled in from the path.",
)
async def put_config(request: web.Request) -> web.Response:
    ctx = context(request)
    name = request.match_info["connector"]
    config = dict(body(request, m.ConnectorConfigBody).root)
    check_and_put_name(name, config)
    check_name(name)
    async with ctx.config_lock(name):
        created, info = await ctx.call(ctx.herder.put_connector_config(name, config))
    if created:
        headers = {"Location": connector_url(request, name)}
        return json_reply(info.to_json(), status=201, headers=headers)
    return json_reply(info.to_json())


@routes.op(
    "PATCH",
    "/connectors/{connector}/config",
    "Change some keys of a connector's configuration; a null value removes the key",
    Reply(200, "Reconfigured", m.ConnectorInfo),
    _E400,
    _E404,
    body=m.ConfigPatchBody,
)
async def patch_config(request: web.Request) -> web.Response:
    ctx = context(request)
    name = request.match_info["connector"]
    patch = body(request, m.ConfigPatchBody).root
    async with ctx.config_lock(name):  # read-modify-write: no concurrent PATCH may be lost
        config = dict(ctx.herder.connector_config(name))
        for key, value in patch.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        check_and_put_name(name, config)
        _, info = await ctx.call(ctx.herder.put_connector_config(name, config))
    return json_reply(info.to_json())


@routes.op(
    "DELETE",
    "/connectors/{connector}",
    "Delete a connector (its tasks stop first)",
    Reply(204, "Deleted"),
    _E404,
)
async def delete_connector(request: web.Request) -> web.Response:
    ctx = context(request)
    await ctx.call(ctx.herder.delete_connector(request.match_info["connector"]))
    return web.Response(status=204)
