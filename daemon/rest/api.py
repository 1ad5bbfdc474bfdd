"""Operations: one declaration per endpoint, read by the router and by the OpenAPI generator.

An ``Operation`` names its method, path, body model, query parameters and answers. The wrapper
that ``register`` installs checks, before the handler runs, everything the declaration promises:
``Accept`` (406), ``Content-Type`` (415), the body's size (413), JSON syntax, object-ness and
model (400), and query values (400, e.g. ``includeTasks=maybe``). Handlers then read the parsed
values with ``body(request, Model)`` and ``query(request, name)``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_origin

from aiohttp import web
from pydantic import BaseModel, RootModel, ValidationError

from daemon.rest.errors import RestError, bad_request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
M = TypeVar("M", bound=BaseModel)


def request_key(name: str) -> Any:
    """A request-storage key: a ``web.RequestKey`` where aiohttp has them (3.14+; plain
    strings draw a warning there), else the name."""
    maker = getattr(web, "RequestKey", None)
    return name if maker is None else maker(name, object)


_BODY = request_key("connectd.body")
_QUERY = request_key("connectd.query")
USER = request_key("connectd.user")
JSON = "application/json"


@dataclass(frozen=True)
class Query:
    """A query parameter: ``bool`` (true/false, any case) or one of ``choices``."""

    name: str
    kind: Literal["bool", "choice"]
    default: Any
    description: str = ""
    choices: tuple[str, ...] = ()
    repeat: bool = False


@dataclass(frozen=True)
class Reply:
    """One documented answer: its body's ``model`` (or a raw JSON ``schema``); neither: no body."""

    status: int
    description: str
    model: type[BaseModel] | None = None
    content_type: str = JSON
    headers: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = None

    @property
    def has_body(self) -> bool:
        return self.model is not None or self.schema is not None


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    body: type[BaseModel] | None = None
    body_description: str = ""
    query: tuple[Query, ...] = ()
    replies: tuple[Reply, ...] = ()
    public: bool = False
    """Answered without credentials even when basic auth is on (only ``/health``)."""

    @property
    def produces_json(self) -> bool:
        return all(r.content_type == JSON for r in self.replies if r.has_body)


@dataclass
class Routes:
    """A module's operations, declared with the ``op`` decorator."""

    tag: str
    operations: list[Operation] = field(default_factory=list)

    def op(
        self,
        method: str,
        path: str,
        summary: str,
        *replies: Reply,
        body: type[BaseModel] | None = None,
        body_description: str = "",
        query: tuple[Query, ...] = (),
        public: bool = False,
    ) -> Callable[[Handler], Handler]:
        def declare(handler: Handler) -> Handler:
            self.operations.append(
                Operation(
                    method,
                    path,
                    handler,
                    summary,
                    self.tag,
                    body,
                    body_description,
                    query,
                    replies,
                    public,
                )
            )
            return handler

        return declare


def body(request: web.Request, model: type[M]) -> M:
    """The request's body, validated by the operation's declared ``model``."""
    value = request[_BODY]
    if not isinstance(value, model):
        raise TypeError(f"the operation's body is {type(value).__name__}, not {model.__name__}")
    return value


def query(request: web.Request, name: str) -> Any:
    """A declared query parameter's parsed value (its default when absent)."""
    return request[_QUERY][name]


def register(router: web.UrlDispatcher, operations: list[Operation], max_body: int) -> None:
    """Add every operation, each path also with a trailing ``/`` (Jersey answers both)."""
    for op in operations:
        handler = _wrap(op, max_body)
        paths = [op.path] if op.path == "/" else [op.path, op.path + "/"]
        for path in paths:
            route_path = path.replace("{task}", "{task:-?[0-9]+}")
            if op.method == "GET":
                router.add_get(route_path, handler)
            else:
                router.add_route(op.method, route_path, handler)


def _wrap(op: Operation, max_body: int) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        if op.produces_json:
            _check_accept(request)
        if op.body is not None:
            request[_BODY] = _validate(op.body, await _read_json(request, max_body))
        request[_QUERY] = {q.name: _parse_query(request, q) for q in op.query}
        return await op.handler(request)

    handle.__name__ = op.handler.__name__
    return handle


def accepts_json(accept: str | None) -> bool:
    """Whether an ``Accept`` header (or its absence) lets the answer be JSON."""
    if not accept:
        return True
    for item in accept.split(","):
        media = item.split(";", 1)[0].strip().lower()
        if media in ("*/*", "application/*", JSON, "") or media.endswith("+json"):
            return True
    return False


def _check_accept(request: web.Request) -> None:
    if not accepts_json(request.headers.get("Accept")):
        raise RestError(406, "HTTP 406 Not Acceptable")


async def _read_json(request: web.Request, max_body: int) -> object:
    length = request.content_length
    if length is not None and length > max_body:
        raise _too_large(max_body)
    if not request.body_exists:
        raise bad_request("The request has no body; expected a JSON object")
    if request.content_type != JSON and not request.content_type.endswith("+json"):
        raise RestError(415, "HTTP 415 Unsupported Media Type")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(max_body) from None
    if not raw.strip():
        raise bad_request("The request body is empty; expected a JSON object")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        detail = (
            f"{exc.msg} (line {exc.lineno} column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else str(exc) or "nested too deeply"
        )
        raise bad_request(f"The request body is not valid JSON: {detail}") from None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _too_large(max_body: int) -> RestError:
    return RestError(
        413,
        f"The request body is larger than {max_body} bytes (rest.request.max.bytes)",
    )


def _validate(model: type[M], document: object) -> M:
    if _takes_array(model):
        if not isinstance(document, list):
            raise bad_request("The request body is not a JSON array")
    elif not isinstance(document, dict):
        raise bad_request("The request body is not a JSON object")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise bad_request("Invalid request body: " + _describe(exc)) from None


def _takes_array(model: type[BaseModel]) -> bool:
    """A body model whose document is a JSON array (a ``RootModel`` of a list)."""
    if not issubclass(model, RootModel):
        return False
    return get_origin(model.model_fields["root"].annotation) is list


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        ctx = err.get("ctx") or {}
        if err["type"] == "value_error" and "error" in ctx:
            message = str(ctx["error"])
        elif err["type"] == "extra_forbidden":
            message = "unrecognized field"
        elif err["type"] == "missing":
            message = "required field is missing"
        else:
            message = err["msg"]
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def _parse_query(request: web.Request, q: Query) -> Any:
    values = request.query.getall(q.name, [])
    if not values:
        return q.default
    if q.kind == "bool":
        text = values[0].strip().lower()
        if text not in ("true", "false"):
            raise bad_request(
                f"Invalid value {values[0]!r} for query parameter {q.name}; expected true or false"
            )
        return text == "true"
    for value in values:
        if value not in q.choices:
            raise bad_request(
                f"Invalid value {value!r} for query parameter {q.name};"
                f" expected {' or '.join(q.choices)}"
            )
    return tuple(values) if q.repeat else values[0]
