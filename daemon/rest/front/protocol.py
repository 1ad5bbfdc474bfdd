"""Everything that passes between the daemon (the parent, ``FrontedRestServer``) and the REST
front process (the child), in one place.

- ``Spec``: what the parent tells the child at start, as one JSON line on the child's stdin (the
  key's password travels here, never in argv or the environment); closing that stdin tells the
  child to stop.
- The back socket: the child passes requests to the worker's app on a Unix socket in a 0700
  directory, with ``FORWARDED_PROTO`` naming its client's scheme (``forwarded_scheme``).
- The snapshot: the worker answers ``GET SNAPSHOT_PATH`` on the back socket (``snapshot_route``)
  with every connector's status as ``GET /connectors/{c}/status`` would answer it, numbered by a
  counter that only grows; the child keeps it in its ``Mirror``. The route checks a per-start
  secret (``TOKEN_HEADER``) the child sends, and the child drops that header from clients'
  requests, so no client reaches the snapshot past authentication.
"""

from __future__ import annotations

import hmac
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from daemon.errors import ConnectorNotFound
from daemon.rest.errors import compact_json, error_response
from daemon.rest.settings import TlsSettings
from daemon.runtime.model import Herder, status_workers
from daemon.tlsprotocols import TlsProtocols

SNAPSHOT_PATH = "/_connectd/snapshot"
TOKEN_HEADER = "X-Connectd-Front-Token"
FORWARDED_PROTO = "X-Forwarded-Proto"
"""Set by the front to the scheme its client used (the worker's ``Location`` headers name it)."""
ACCESS_LOGGER = "connectd.rest.access"
ADMIN_HEADER = "X-Connectd-Admin-Listener"
"""Set by the REST front process on what it relays from an admin listener (and dropped from
what clients send), so the worker knows where a request came in."""
ADMIN_SCHEME = "admin+"
"""Prefixes the scheme of an admin listener's socket in ``Spec.listeners``."""


@web.middleware
async def forwarded_scheme(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Behind the front: the request's scheme is the one the front's client used."""
    proto = request.headers.get(FORWARDED_PROTO)
    if proto in ("http", "https") and proto != request.scheme:
        request = request.clone(scheme=proto)
    return await handler(request)


def snapshot_route(herder: Herder, token: str) -> web.RouteDef:
    """The back's ``GET SNAPSHOT_PATH``: ``{"seq", "access_log", "connectors": {name: status}}``
    (``access_log``: whether request lines are logged at the worker's current levels).

    ``seq`` grows only when the content changes; a request whose ``If-None-Match`` names the
    current ``seq`` gets 304 and no body (most refreshes: states change rarely)."""
    last = _Last()

    async def snapshot(request: web.Request) -> web.Response:
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return error_response(404, "HTTP 404 Not Found")
        statuses: dict[str, Any] = {}
        # Distributed mode: a connector with work on other workers is answered by the worker
        # itself, which asks those workers for their live fields (``live_status``).
        here = getattr(herder, "worker_id", "") if hasattr(herder, "live_status") else None
        for name in herder.connector_names():
            try:
                doc = herder.connector_status(name).to_json()
            except ConnectorNotFound:  # deleted between the two calls: not in this snapshot
                continue
            if here is not None and status_workers(doc) - {here}:
                continue
            statuses[name] = doc
        access = logging.getLogger(ACCESS_LOGGER).isEnabledFor(logging.INFO)
        content = compact_json({"access_log": access, "connectors": statuses})
        if content != last.content:
            last.seq, last.content = last.seq + 1, content
        seq = last.seq
        if request.headers.get("If-None-Match") == str(seq):
            return web.Response(status=304)
        return web.Response(text=f'{{"seq":{seq},{content[1:]}', content_type="application/json")

    return web.get(SNAPSHOT_PATH, snapshot)


@dataclass
class _Last:
    seq: int = 0
    content: str = ""


@dataclass(frozen=True)
class Spec:
    """What the parent tells the front (one JSON object on stdin)."""

    listeners: list[tuple[int, str]]
    """(inherited file descriptor, scheme) per listening socket."""
    back: str
    token: str
    max_body_bytes: int
    request_timeout: float
    shutdown_timeout: float
    refresh_interval: float
    log_level: str
    log_format: str
    credentials_file: str | None = None
    tls: dict[str, Any] | None = None
    cors_origins: str = ""
    cors_methods: str = ""
    header_config: str = ""
    """The CORS and response-header settings (``RestSettings``): the front adds them."""

    @classmethod
    def from_json(cls, line: bytes) -> Spec:
        data = json.loads(line)
        data["listeners"] = [(int(fd), str(scheme)) for fd, scheme in data["listeners"]]
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @staticmethod
    def tls_json(tls: TlsSettings | None) -> dict[str, Any] | None:
        """``tls`` as the spec carries it (file paths, the key's password)."""
        if tls is None:
            return None
        return {
            "keystore_location": str(tls.keystore_location),
            "key_password": tls.key_password,
            "truststore_location": (
                str(tls.truststore_location) if tls.truststore_location else None
            ),
            "client_auth": tls.client_auth,
            "keystore_type": tls.keystore_type,
            "keystore_password": tls.keystore_password,
            "truststore_type": tls.truststore_type,
            "truststore_password": tls.truststore_password,
            "prefix": tls.prefix,
            "versions": list(tls.protocols.versions),
            "ciphers": tls.protocols.ciphers,
        }

    def tls_settings(self) -> TlsSettings | None:
        if self.tls is None:
            return None
        t = self.tls
        return TlsSettings(
            keystore_location=Path(t["keystore_location"]),
            key_password=t.get("key_password"),
            truststore_location=(
                Path(t["truststore_location"]) if t.get("truststore_location") else None
            ),
            client_auth=t.get("client_auth", "none"),
            keystore_type=t.get("keystore_type", "PEM"),
            keystore_password=t.get("keystore_password"),
            truststore_type=t.get("truststore_type", "PEM"),
            truststore_password=t.get("truststore_password"),
            protocols=TlsProtocols(tuple(t["versions"]), t.get("ciphers")),
            prefix=t["prefix"],
        )
