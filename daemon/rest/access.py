"""The access log: one line per request with method, path, status and duration.

Never the body, the query string, headers or credentials: the path is logged in its encoded
form (so a name with a newline cannot forge a log line) and the query is left out.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from daemon.rest.front.protocol import SNAPSHOT_PATH

log = logging.getLogger("connectd.rest.access")


@web.middleware
async def access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path == SNAPSHOT_PATH:
        return await handler(request)  # the REST front's own polling (10 per second): not logged
    start = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    except asyncio.CancelledError:
        status = 499  # the client went away (nginx's convention)
        raise
    finally:
        if log.isEnabledFor(logging.INFO):
            log.info(
                "%s %s %d %.1fms",
                request.method,
                request.rel_url.raw_path,
                status,
                (time.perf_counter() - start) * 1000,
            )
