"""A Kafka client's network figures, as Kafka's clients keep them in their ``consumer-metrics``
group: bytes and responses received (``incoming-byte-total``, ``response-total``) and live
connections (``connection-count``).

aiokafka keeps no such figures. Each connection reads a response's 4-byte size, then its bytes,
and hands them to ``AIOKafkaConnection._handle_frame`` (conn.py L508-531; SASL frames too);
``install`` wraps that method once so that a frame of a tracked client id (the connection's
``_client_id``, conn.py L149) adds its size + 4 to that id's ``ClientTraffic``: one dict lookup
and two adds per response, whatever the records in it. Connections are counted when asked,
from the client's ``_conns`` (client.py L155), those ``connected()``: the bootstrap, each
broker and the group coordinator's, as Kafka counts them. Bytes are counted as Kafka's
selector counts them, after TLS.

Counts are per client id, as Kafka's metrics are: two clients of one id in a process share
one (Kafka's JMX gives them one MBean). An id is counted while some ``track`` of it is not yet
``release``d; counting starts again from 0 when it is tracked anew (Prometheus reads that as a
counter reset, as it reads a Connect task's new consumer).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from dataclasses import dataclass, field
from typing import Any

from aiokafka.conn import AIOKafkaConnection


@dataclass(eq=False, slots=True)
class ClientTraffic:
    """One client id's figures, and its clients (``AIOKafkaClient``s, held weakly: several
    when consumers share an id, e.g. a connector's ``consumer.override.client.id``)."""

    client_id: str
    bytes_in: int = 0
    responses: int = 0
    users: int = 0
    _clients: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet, repr=False)

    def attach(self, client: object | None) -> None:
        """A client whose connections ``connections`` counts (an object that cannot be
        referenced weakly is not an ``AIOKafkaClient``, and counts none)."""
        with contextlib.suppress(TypeError):
            self._clients.add(client)

    def detach(self, client: object | None) -> None:
        with contextlib.suppress(TypeError):
            self._clients.discard(client)

    def connections(self) -> int:
        """Live connections of the attached clients (0 before one is attached)."""
        total = 0
        for client in list(self._clients):
            conns = getattr(client, "_conns", None)
            if isinstance(conns, dict):
                total += sum(1 for conn in list(conns.values()) if conn.connected())
        return total


_tracked: dict[str, ClientTraffic] = {}


def track(client_id: str) -> ClientTraffic:
    """Count ``client_id``'s traffic from now on (before its client connects, so that the
    first responses count); each call needs one ``release``."""
    install()
    traffic = _tracked.get(client_id)
    if traffic is None:
        traffic = _tracked[client_id] = ClientTraffic(client_id)
    traffic.users += 1
    return traffic


def release(traffic: ClientTraffic) -> None:
    """One ``track`` of ``traffic``'s id is over; the last one stops its counting."""
    traffic.users -= 1
    if traffic.users <= 0 and _tracked.get(traffic.client_id) is traffic:
        del _tracked[traffic.client_id]


def install() -> None:
    """Wrap ``AIOKafkaConnection._handle_frame`` to count frames (once per process)."""
    handle = AIOKafkaConnection._handle_frame
    if getattr(handle, "_connectd_counts", False):
        return

    @functools.wraps(handle)
    def handle_frame(self: AIOKafkaConnection, resp: bytes) -> None:
        traffic = _tracked.get(self._client_id)
        if traffic is not None:
            traffic.bytes_in += len(resp) + 4
            traffic.responses += 1
        handle(self, resp)

    handle_frame._connectd_counts = True  # type: ignore[attr-defined]
    AIOKafkaConnection._handle_frame = handle_frame
