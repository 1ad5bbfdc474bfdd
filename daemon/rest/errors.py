"""Connect's error mapping: every error answer is ``{"error_code": N, "message": "..."}``.

The status is Connect's for the case: 404 for an unknown connector, task, plugin, logger or
route; 409 for a connector that exists; 400 for a bad configuration or request; 405 for a method
a path does not have (with ``Allow``); 500 for a worker failure, including a task whose old
incarnation could not be reaped (``StopFailed``). aiohttp's own errors (413 for a body over the
cap, 404/405 from the router) get the same body shape, with Jersey's ``HTTP 404 Not Found`` text.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

from aiohttp import web
from aiohttp.typedefs import Handler

from daemon.errors import (
    ConfigError,
    Conflict,
    ConnectorExists,
    ConnectorNotFound,
    InvalidConfig,
    StopFailed,
    TaskNotFound,
)

log = logging.getLogger("connectd.rest")

VALIDATE_HINT = (
    "You can also find the above list of errors at the endpoint "
    "`/connector-plugins/{connectorType}/config/validate`"
)


class RestError(Exception):
    """An error answer chosen by a handler: its status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def bad_request(message: str) -> RestError:
    return RestError(400, message)


def not_found(message: str) -> RestError:
    return RestError(404, message)


def compact_json(data: object) -> str:
    """JSON as Connect writes it: no spaces, UTF-8 text (not ``\\u`` escapes)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def json_reply(
    data: object, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response(data, status=status, headers=headers, dumps=compact_json)


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    """Connect's error body with ``status``."""
    return json_reply({"error_code": status, "message": message}, status=status, headers=headers)


def invalid_config_message(exc: InvalidConfig) -> str:
    """Connect's 400 text for an invalid connector configuration, one line per error."""
    errors = [p for p in exc.problems if p.is_error] or list(exc.problems)
    lines = "\n".join(str(p) for p in errors)
    return (
        f"Connector configuration is invalid and contains the following {len(errors)} error(s):"
        f"\n{lines}\n{VALIDATE_HINT}"
    )


def status_of(exc: Exception) -> tuple[int, str]:
    """The status and message Connect answers with for ``exc``."""
    if isinstance(exc, RestError):
        return exc.status, exc.message
    if isinstance(exc, ConnectorNotFound | TaskNotFound):
        return 404, str(exc)
    if isinstance(exc, ConnectorExists):
        return 409, str(exc)
    if isinstance(exc, InvalidConfig):
        return 400, invalid_config_message(exc)
    if isinstance(exc, Conflict):
        return exc.status, str(exc)
    if isinstance(exc, StopFailed):
        return 500, str(exc)
    if isinstance(exc, ConfigError):
        return 400, str(exc)
    if isinstance(exc, TimeoutError):
        return 500, "Request timed out"
    return 500, str(exc) or type(exc).__name__


def _http_exception_response(exc: web.HTTPException) -> web.Response:
    default_text = f"{exc.status}: {exc.reason}"
    message = f"HTTP {exc.status} {exc.reason}" if exc.text in (None, default_text) else exc.text
    headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "www-authenticate")}
    return error_response(exc.status, message or exc.reason, headers)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure below into Connect's error body; log the unexpected ones."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _http_exception_response(exc)
    except asyncio.CancelledError:
        raise
    except RestError as exc:
        return error_response(exc.status, exc.message, exc.headers)
    except Exception as exc:
        status, message = status_of(exc)
        if status >= 500 and not isinstance(exc, StopFailed | TimeoutError):
            log.error("%s %s failed", request.method, request.rel_url.raw_path, exc_info=exc)
        return error_response(status, message)
