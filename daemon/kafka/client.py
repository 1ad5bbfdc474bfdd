"""aiokafka's clients beyond their public API: a consumer's ``AIOKafkaClient``, the client's
connections and when each last answered, its request timeout, and a request sent to one node
through the admin client (what this relies on: the package docstring).

The connection reads are for the broker-outage filter, which runs inside aiokafka's logging and
metadata code: they look before they touch and answer "unknown" rather than raise.
"""

from __future__ import annotations

from typing import Any


def client_of(consumer: object) -> object | None:
    """``consumer``'s (an ``AIOKafkaConsumer``'s) ``AIOKafkaClient``, if it has one."""
    return getattr(consumer, "_client", None)


def answered_since(client: object, node: str | None, addr: str | None, since: float) -> bool:
    """Whether ``client`` holds a live connection to the broker ``node`` (its id) or ``addr``
    (``host:port``) made or answered after ``since`` (``time.monotonic()``). aiokafka keeps its
    connections in ``_conns`` (``(node_id, group)`` -> connection) and stamps each with
    ``time.monotonic()`` when made and on every answer (``_last_action``)."""
    conns = getattr(client, "_conns", None)
    if not isinstance(conns, dict):
        return False
    for conn_id, conn in list(conns.items()):
        conn_node = conn_id[0] if isinstance(conn_id, tuple) else conn_id
        conn_addr = f"{getattr(conn, 'host', None)}:{getattr(conn, 'port', None)}"
        if str(conn_node) != node and conn_addr != addr:
            continue
        stamp = getattr(conn, "_last_action", None)
        if isinstance(stamp, float) and stamp > since and conn.connected():
            return True
    return False


def request_timeout(client: object) -> float:
    """``client``'s request timeout (s), which bounds one connection attempt; 0 if unknown."""
    timeout = getattr(client, "_request_timeout_ms", None)
    return timeout / 1000 if isinstance(timeout, int | float) else 0.0


async def send_to_node(admin: Any, node: int, request: Any) -> Any:
    """Send ``request`` to broker ``node`` through ``admin`` (an ``AIOKafkaAdminClient``) and
    return its answer: for requests the admin client has no call for (``DeleteGroups``)."""
    return await admin._send_request_to_node(node, request)
