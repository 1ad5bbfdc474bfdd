"""The middlewares that give REST answers Connect's cross-origin and configured headers
(``daemon.config.httpheaders`` says what each setting means), and Jersey's ``OPTIONS``."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from multidict import CIMultiDict

from daemon.config.httpheaders import Cors, HeaderRule


def cors_headers(cors: Cors, request: web.Request) -> CIMultiDict[str]:
    """The cross-origin headers ``request``'s answer carries."""
    out: CIMultiDict[str] = CIMultiDict(Vary="Origin")
    origin = request.headers.get("Origin")
    if origin is None or not cors.allows(origin):
        return out
    out["Access-Control-Allow-Origin"] = origin
    if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
        out["Access-Control-Allow-Methods"] = cors.methods
        out["Access-Control-Allow-Headers"] = "Content-Type"
        out["Access-Control-Max-Age"] = "60"
    return out


def response_headers(
    cors: Cors | None,
    rules: tuple[HeaderRule, ...],
    skip: Callable[[web.Request], bool] | None = None,
) -> Middleware:
    """A middleware adding ``cors``'s and ``rules``' headers to every answer (errors too),
    except to requests ``skip`` names (an admin listener's: Connect adds none there)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if skip is not None and skip(request):
            return await handler(request)
        extra = cors_headers(cors, request) if cors is not None else CIMultiDict[str]()
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            _decorate(exc, extra, rules)
            raise
        _decorate(response, extra, rules)
        return response

    return middleware


def _decorate(
    response: web.StreamResponse, extra: CIMultiDict[str], rules: tuple[HeaderRule, ...]
) -> None:
    if response.prepared:  # streamed already: nothing can be added
        return
    headers = response.headers
    app_set = frozenset(k.lower() for k in headers)
    for name, value in extra.items():
        headers.add(name, value)
    now = time.time()
    for rule in rules:  # before the API's own headers in Jetty: the API's win over a set
        value = rule.rendered(now)
        if rule.action.startswith("add"):
            headers.add(rule.name, value)
        elif rule.name.lower() not in app_set:
            headers[rule.name] = value


@web.middleware
async def automatic_options(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``OPTIONS`` on any path of the API answered as Jersey does for Connect: 200, the path's
    methods in ``Allow`` and, as text, in the body (a preflight is answered so)."""
    if request.method == "OPTIONS":
        refused = request.match_info.http_exception
        if isinstance(refused, web.HTTPMethodNotAllowed):
            methods = [*sorted(refused.allowed_methods - {"OPTIONS"}), "OPTIONS"]
            return web.Response(
                text=", ".join(methods),
                content_type="text/plain",
                headers={"Allow": ",".join(methods)},
            )
    return await handler(request)
