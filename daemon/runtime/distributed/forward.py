"""REST requests one worker sends another: config writes to the leader, task calls to the worker
that runs the task (Connect's ``RestClient`` / ``HerderRequestHandler`` forwarding).

A forwarded request carries ``X-Connectd-Forwarded: 1``; the worker that receives it never
forwards it again (``FORWARDED`` is set for its handling): if it is not, or no longer, the right
worker it answers 409, and the first worker passes that on, instead of two workers bouncing a
request between them during a rebalance. Every forward runs under a deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

import aiohttp

from daemon.errors import RemoteError

HEADER = "X-Connectd-Forwarded"

#: True while this worker handles a request another worker forwarded to it.
FORWARDED: contextvars.ContextVar[bool] = contextvars.ContextVar("forwarded", default=False)

#: A create sent again after the leader it was forwarded to died without an answer: if the
#: connector exists with exactly this configuration, that first attempt was applied.
RETRY_HEADER = "X-Connectd-Retried"
RETRIED: contextvars.ContextVar[bool] = contextvars.ContextVar("retried", default=False)

#: Connect's message when no leader is known (``HerderRequestHandler``), with its status 409.
NO_LEADER = (
    "Cannot complete request momentarily due to no known leader URL, likely because a "
    "rebalance was underway."
)


class Forwarder:
    """Sends forwarded requests; one ``aiohttp`` session per worker, closed with ``close``."""

    def __init__(self, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self._headers = {HEADER: "1", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None

    async def request(
        self, method: str, base_url: str, path: str, body: Any = None, *, retried: bool = False
    ) -> tuple[int, Any]:
        """``(status, parsed JSON or None)`` of a 2xx answer; ``RemoteError`` with the other
        worker's status and message for any other, or when it cannot be reached in time
        (then ``answered`` is False: the request may or may not have been applied)."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        url = base_url.rstrip("/") + path
        headers = {**self._headers, RETRY_HEADER: "1"} if retried else self._headers
        try:
            async with asyncio.timeout(self.timeout):
                async with self._session.request(
                    method, url, json=body, headers=headers
                ) as response:
                    text = await response.text()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            reason = "no answer in time" if isinstance(exc, TimeoutError) else repr(exc)
            error = RemoteError(
                f"Forwarding {method} {path} to {base_url} failed ({reason}); retry: the"
                " cluster may be rebalancing",
                status=409 if isinstance(exc, aiohttp.ClientConnectionError) else 500,
            )
            error.answered = False
            raise error from None
        parsed = _json(text)
        if 200 <= response.status < 300:
            return response.status, parsed
        message = parsed.get("message") if isinstance(parsed, dict) else None
        error = RemoteError(str(message or text or response.reason), status=response.status)
        # The other worker's REST front could not reach its own worker (it died under the
        # request): the request may or may not have been applied, as if unreachable.
        error.answered = response.status not in (502, 504)
        raise error

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _json(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
