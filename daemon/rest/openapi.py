"""The OpenAPI 3.1 document served at ``GET /openapi.json``, generated from the operations.

Paths, parameters and answers come from the ``Operation`` declarations the router serves;
schemas come from the pydantic models that validate request bodies and describe answers. Every
operation also documents a ``default`` answer with Connect's error body, since any of them can
answer 401, 406, 413, 415 or 500.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import daemon
from daemon.rest import models as m
from daemon.rest.api import JSON, Operation, Query

_REF = "#/components/schemas/{model}"
_PARAM = re.compile(r"{(\w+)}")
_PATH_PARAMS: dict[str, dict[str, Any]] = {
    "connector": {"type": "string", "minLength": 1},
    "task": {"type": "integer"},
    "plugin": {"type": "string", "minLength": 1},
    "logger": {"type": "string", "minLength": 1},
}
_EXAMPLES: dict[str, object] = {
    "connector": "sink-hang-connector",
    "task": 0,
    "plugin": "HangSink",
    "logger": "connectd",
}
_DESCRIPTIONS = {
    "connector": "The connector's name",
    "task": "The task's number",
    "plugin": "A plugin's class name or alias",
    "logger": "A logger's name, or root",
}


def _query_param(q: Query) -> dict[str, Any]:
    item: dict[str, Any] = (
        {"type": "boolean"} if q.kind == "bool" else {"type": "string", "enum": list(q.choices)}
    )
    schema: dict[str, Any] = {"type": "array", "items": item} if q.repeat else item
    if not q.repeat:
        schema["default"] = q.default
    param: dict[str, Any] = {
        "name": q.name,
        "in": "query",
        "required": False,
        "description": q.description,
        "schema": schema,
    }
    if q.repeat:
        param |= {"style": "form", "explode": True}
    return param


def _connector_links(operations: list[Operation]) -> dict[str, Any]:
    """Links from a created connector to every operation on it (its first task for task
    paths), so clients and fuzzers can follow a creation to the resource."""
    links = {}
    for op in operations:
        if not op.path.startswith("/connectors/{connector}"):
            continue
        params = {"connector": "$response.body#/name"}
        if "{task}" in op.path:
            params["task"] = "$response.body#/tasks/0/task"
        links[op.handler.__name__] = {"operationId": op.handler.__name__, "parameters": params}
    return links


def build(operations: list[Operation], *, basic_auth: bool) -> dict[str, Any]:
    """The document for ``operations``; with ``basic_auth``, every non-public operation
    requires HTTP basic credentials."""
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {
        (m.ErrorMessage, "serialization"): None
    }
    for op in operations:
        if op.body is not None:
            wanted[(op.body, "validation")] = None
        for reply in op.replies:
            if reply.model is not None:
                wanted[(reply.model, "serialization")] = None
    refs, top = models_json_schema(list(wanted), ref_template=_REF)
    error_ref = refs[(m.ErrorMessage, "serialization")]

    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        responses: dict[str, Any] = {}
        for reply in op.replies:
            entry: dict[str, Any] = {"description": reply.description}
            schema = refs[(reply.model, "serialization")] if reply.model else reply.schema
            if schema is not None:
                entry["content"] = {reply.content_type: {"schema": dict(schema)}}
            if reply.headers:
                entry["headers"] = {h: {"schema": {"type": "string"}} for h in reply.headers}
            if reply.status == 201 and reply.model is m.ConnectorInfo:
                entry["links"] = _connector_links(operations)
            responses[str(reply.status)] = entry
        responses["default"] = {
            "description": "An error, in Connect's shape",
            "content": {JSON: {"schema": error_ref}},
        }
        operation: dict[str, Any] = {
            "operationId": op.handler.__name__,
            "summary": op.summary,
            "tags": [op.tag],
            "responses": responses,
        }
        params = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": _DESCRIPTIONS.get(name, name),
                "schema": _PATH_PARAMS.get(name, {"type": "string"}),
                "example": _EXAMPLES.get(name),
            }
            for name in _PARAM.findall(op.path)
        ]
        params += [_query_param(q) for q in op.query]
        if params:
            operation["parameters"] = params
        if op.body is not None:
            operation["requestBody"] = {
                "required": True,
                "description": op.body_description or (op.body.__doc__ or "").strip(),
                "content": {JSON: {"schema": refs[(op.body, "validation")]}},
            }
        if basic_auth and op.public:
            operation["security"] = []
        paths.setdefault(op.path, {})[op.method.lower()] = operation

    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "connectd REST API",
            "version": daemon.__version__,
            "description": (
                "Kafka Connect's REST API (4.x), served by connectd, plus /metrics, "
                "/openapi.json and connectd's fields in task statuses."
            ),
        },
        "paths": paths,
        "components": {"schemas": top.get("$defs", {})},
    }
    if basic_auth:
        document["components"]["securitySchemes"] = {
            "basicAuth": {"type": "http", "scheme": "basic"}
        }
        document["security"] = [{"basicAuth": []}]
    return document
