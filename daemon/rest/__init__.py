"""Kafka Connect's REST API on aiohttp: same paths, shapes, status codes and error bodies.

``create_app(worker, settings=...)`` builds the application over any ``Herder``;
``RestServer(app, settings)`` serves it on the configured listeners (``FrontedRestServer``
from a child process that answers status itself, as the daemon does by default);
``passwd_main`` is the
``connectd passwd FILE USER`` command.
"""

from __future__ import annotations

from daemon.rest.app import create_app, operations
from daemon.rest.auth import passwd_main
from daemon.rest.context import ClusterIdentified, HealthReporting
from daemon.rest.front.parent import FrontedRestServer
from daemon.rest.server import Bound, RestServer
from daemon.rest.settings import RestSettings, TlsSettings

__all__ = [
    "Bound",
    "ClusterIdentified",
    "FrontedRestServer",
    "HealthReporting",
    "RestServer",
    "RestSettings",
    "TlsSettings",
    "create_app",
    "operations",
    "passwd_main",
]
