"""Connect's cross-origin and configured headers on REST answers (``daemon.config.httpheaders``
says what each setting means), and Jersey's automatic ``OPTIONS``."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler
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


def install_response_headers(
    app: web.Application,
    cors: Cors | None,
    rules: tuple[HeaderRule, ...],
    skip: Callable[[web.Request], bool] | None = None,
) -> None:
    """Add ``cors``'s and ``rules``' headers to every answer ``app`` gives (errors and HEAD
    answers too: at ``on_response_prepare``, just before the headers go out), except to the
    requests ``skip`` names (an admin listener's: Connect adds none there)."""
    if cors is None and not rules:
        return

    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        if skip is not None and skip(request):
            return
        extra = cors_headers(cors, request) if cors is not None else CIMultiDict[str]()
        _decorate(response, extra, rules)

    app.on_response_prepare.append(on_prepare)


def _decorate(
    response: web.StreamResponse, extra: CIMultiDict[str], rules: tuple[HeaderRule, ...]
) -> None:
    headers = response.headers
    app_set = frozenset(k.lower() for k in headers)
    for name, value in extra.items():
        headers.add(name, value)
    now = time.time()
    for rule in rules:  # before the API's own headers in Jetty: the API's win over a set
        try:
            value = rule.rendered(now)
        except (ValueError, OverflowError, OSError):  # a date past what a calendar holds
            continue
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
