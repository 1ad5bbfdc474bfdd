"""Is Kafka there? The start-up check behind exit code 69.

A daemon whose brokers cannot be reached would start every task only to see each one fail on
its first fetch, and under systemd it would look healthy. Instead the daemon asks the brokers
of ``bootstrap.servers`` for cluster metadata before it starts anything (no executor, no REST
listener), retrying until ``startup.kafka.timeout.ms``; past it, ``ServiceUnavailable`` (the
CLI exits 69, and systemd's ``Restart=on-failure`` tries again later).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from daemon.errors import ServiceUnavailable

log = logging.getLogger("connectd.kafka")

#: Bound on one attempt at one broker (connect, authenticate, metadata round trip).
ATTEMPT_TIMEOUT = 5.0
#: Pause between rounds over every broker, doubling up to the maximum.
BACKOFF_INITIAL, BACKOFF_MAX = 0.2, 2.0


async def _probe(host: str, port: int, settings: dict[str, Any], timeout: float) -> int:
    """One metadata request to one broker; the number of brokers in its answer."""
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    async with asyncio.timeout(timeout):
        conn = await create_conn(
            host,
            port,
            client_id="connectd-startup-check",
            request_timeout_ms=int(timeout * 1000),
            **settings,
        )
        try:
            metadata = await conn.send(MetadataRequest([]))
        finally:
            conn.close()
    return len(getattr(metadata, "brokers", ()))


async def wait_for_kafka(
    bootstrap: Sequence[str], deadline: float, settings: dict[str, Any] | None = None
) -> None:
    """Return once a broker of ``bootstrap`` answers a metadata request; ``ServiceUnavailable``
    naming the servers, the deadline and the last error once ``deadline`` seconds have passed.

    ``settings``: aiokafka connection arguments (security protocol, SASL, SSL context).
    """
    from aiokafka.conn import collect_hosts

    hosts = collect_hosts(list(bootstrap))
    servers = ",".join(bootstrap)
    started = time.monotonic()
    end = started + deadline
    backoff = BACKOFF_INITIAL
    last = "no attempt made"
    attempts = 0
    while True:
        for host, port, _ in hosts:
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            attempts += 1
            bound = min(ATTEMPT_TIMEOUT, remaining)
            try:
                brokers = await _probe(host, port, dict(settings or {}), bound)
            except Exception as exc:  # whatever failed, the broker is not usable yet
                if isinstance(exc, TimeoutError) and bound < ATTEMPT_TIMEOUT and attempts > 1:
                    continue  # cut short by the deadline: the previous error says more
                last = f"{host}:{port}: {type(exc).__name__}: {exc}".rstrip(": ")
                if attempts == 1:
                    log.warning(
                        "Kafka not reachable yet (%s); retrying bootstrap.servers=%s for up to "
                        "%g s (startup.kafka.timeout.ms)",
                        last,
                        servers,
                        deadline,
                    )
                else:
                    log.debug("Kafka startup check: %s", last)
                continue
            log.info(
                "Kafka reachable at %s:%d (%d broker(s)) after %.2f s",
                host,
                port,
                brokers,
                time.monotonic() - started,
            )
            return
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise ServiceUnavailable(
                f"Kafka unreachable: no broker of bootstrap.servers={servers} answered within "
                f"{deadline:g} s (startup.kafka.timeout.ms={int(deadline * 1000)}; {attempts} "
                f"attempt(s), last: {last}). Check that the brokers run and bootstrap.servers "
                "and the security settings are right, or raise startup.kafka.timeout.ms."
            )
        await asyncio.sleep(min(backoff, remaining))
        backoff = min(backoff * 2, BACKOFF_MAX)
