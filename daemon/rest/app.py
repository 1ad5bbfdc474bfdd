"""``create_app``: Kafka Connect's REST API over a ``Herder``, as an aiohttp application.

Middlewares, outermost first: the access log, Connect's error mapping, 503 instead of 404 for a
connector asked for before the connectors are loaded, basic authentication (when a credentials
file is configured), Jersey's automatic ``OPTIONS`` answer. Each operation then checks its own
request (see ``daemon.rest.api``) before its handler calls the worker. The CORS and configured
response headers are added as each answer is prepared (here unless the REST front process
serves the listeners: it adds them to its own answers).
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Middleware

from daemon.connectors.api import ConnectorRegistry, default_registry
from daemon.metrics import Metrics
from daemon.rest import admin, connectors, control, offsets, plugins, root
from daemon.rest.access import access_log
from daemon.rest.admin import ADMIN_PORTS, TRUSTS_FRONT, admin_split, on_admin
from daemon.rest.api import Operation, register
from daemon.rest.auth import BasicAuth
from daemon.rest.context import CONTEXT, RestContext, forwarded_request, not_loaded_yet
from daemon.rest.errors import error_middleware
from daemon.rest.front.protocol import SNAPSHOT_PATH, forwarded_scheme, snapshot_route
from daemon.rest.headers import automatic_options, install_response_headers
from daemon.rest.openapi import build
from daemon.rest.settings import RestSettings
from daemon.runtime.model import Herder


def operations() -> list[Operation]:
    """Every endpoint, in the order the OpenAPI document lists them."""
    return [
        *root.routes.operations,
        *connectors.routes.operations,
        *control.routes.operations,
        *offsets.routes.operations,
        *plugins.routes.operations,
        *admin.routes.operations,
    ]


def create_app(
    herder: Herder,
    *,
    settings: RestSettings | None = None,
    metrics: Metrics | None = None,
    registry: ConnectorRegistry | None = None,
    front_token: str | None = None,
) -> web.Application:
    """The REST API of ``worker``.

    ``metrics`` (a new ``Metrics`` if omitted) is served at ``/metrics`` and starts watching
    the worker's states; ``registry`` (the process's ``default_registry`` if omitted) answers
    ``/connector-plugins``. ``front_token``: the app is served behind the REST front process
    (``FrontedRestServer``), which may read the status snapshot with this secret and tells the
    client's scheme in ``X-Forwarded-Proto``. Raises ``ConfigError`` for unusable settings (an
    https listener without a key store, an unreadable credentials file).
    """
    settings = settings or RestSettings()
    settings.check()
    metrics = metrics or Metrics()
    metrics.watch_worker(herder)
    ops = operations()
    auth = BasicAuth(settings.credentials_file) if settings.credentials_file else None
    if not settings.admin_endpoints:  # admin.listeners empty: /admin is an unknown path
        ops = [op for op in ops if op not in admin.routes.operations]
    middlewares: list[Middleware] = [
        access_log,
        error_middleware,
        not_loaded_yet,
        forwarded_request,
    ]
    if front_token is not None:
        middlewares.insert(0, forwarded_scheme)
    if auth is not None:
        public = [path for op in ops if op.public for path in (op.path, op.path + "/")]
        if front_token is not None:
            public.append(SNAPSHOT_PATH)  # the front's own: guarded by its token instead
        middlewares.append(auth.middleware(public))
    if settings.separate_admin:
        middlewares.append(admin_split)
    ports: set[tuple[str, int]] = set()  # the admin sockets' (RestServer adds them as it binds)
    middlewares.append(automatic_options)
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_body_bytes)
    if front_token is None:  # behind the front process, the front adds them to its answers
        install_response_headers(app, settings.cors(), settings.header_rules(), skip=on_admin)
    app[TRUSTS_FRONT] = front_token is not None
    register(app.router, ops, settings.max_body_bytes)
    if front_token is not None:
        app.router.add_routes([snapshot_route(herder, front_token)])
    ctx = RestContext(herder, settings, registry or default_registry, metrics)
    ctx.openapi = build(ops, basic_auth=auth is not None)
    app[CONTEXT] = ctx
    app[ADMIN_PORTS] = ports
    return app
