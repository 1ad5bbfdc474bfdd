"""Is the Spark master there? The start-up check behind exit code 69 for cluster masters.

With ``executor.spark.master=spark://HOST:PORT`` every executor registers an application with
that master. A master that is down does not fail an executor's start at once: Spark's client
retries its registration for a minute, then gives up, and the pool starts the next executor to
meet the same fate, while the daemon looks healthy. So before the pool starts, the daemon
connects to the master (any of them, for ``spark://h1:p1,h2:p2``), retrying until the executor
start timeout (``executor.start.timeout.ms``); past it, ``ServiceUnavailable`` naming
``executor.spark.master`` (the CLI exits 69, and systemd's ``Restart=on-failure`` tries again
later). ``local`` masters need nothing; ``yarn`` is reached through Hadoop's own configuration,
which this check does not read, so it is not probed. A standalone master that answers must also
run the installed pyspark's Spark line (``check_master_line``, from its web UI): a driver of
another line fails the same slow way (measured here: pyspark 4.1 against 3.5 and 4.0 masters,
64 s and 63 s, then "All masters are unresponsive! Giving up."), so that is exit 69 too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from daemon.errors import ServiceUnavailable

log = logging.getLogger("connectd.spark")

ATTEMPT_TIMEOUT = 5.0
BACKOFF_INITIAL, BACKOFF_MAX = 0.2, 2.0


#: A standalone master's web UI port unless the operator names its URL
#: (``executor.spark.master.ui.url``): Spark's default ``spark.master.ui.port``.
DEFAULT_MASTER_UI_PORT = 8080


def master_ui_urls(master: str, configured: Sequence[str] = ()) -> list[str]:
    """Where a ``spark://`` master's web UI is: ``configured``, or port 8080 of each host the
    master URL names (``master_addresses``); nothing for other masters (local, yarn, k8s)."""
    if configured:
        return list(configured)
    if not master.startswith("spark://"):
        return []
    return [
        f"http://{f'[{host}]' if ':' in host else host}:{DEFAULT_MASTER_UI_PORT}/"
        for host, _ in master_addresses(master)
    ]


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs a master URL names; empty when there is nothing to probe."""
    if master.startswith("spark://"):
        out = []
        for part in master.removeprefix("spark://").split(","):
            host, _, port = part.strip().rstrip("/").rpartition(":")
            out.append((host.strip("[]") or part, int(port) if port.isdigit() else 7077))
        return out
    if master.startswith("k8s://"):
        url = urlsplit(master.removeprefix("k8s://"))
        if url.hostname:
            return [(url.hostname, url.port or (443 if url.scheme != "http" else 80))]
    return []


async def _probe(host: str, port: int, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        _, writer = await asyncio.open_connection(host, port)
    writer.close()
    await writer.wait_closed()


async def wait_for_master(master: str, deadline: float) -> None:
    """Return once a master of ``master`` accepts a connection; ``ServiceUnavailable`` naming
    ``executor.spark.master``, the deadline and the last error after ``deadline`` seconds."""
    addresses = master_addresses(master)
    if not addresses:
        return
    started = time.monotonic()
    end = started + deadline
    backoff = BACKOFF_INITIAL
    last, attempts = "no attempt made", 0
    while True:
        for host, port in addresses:
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            attempts += 1
            try:
                await _probe(host, port, min(ATTEMPT_TIMEOUT, remaining))
            except (OSError, TimeoutError) as exc:
                last = f"{host}:{port}: {type(exc).__name__}: {exc}".rstrip(": ")
                if attempts == 1:
                    log.warning(
                        "Spark master not reachable yet (%s); retrying executor.spark.master=%s"
                        " for up to %g s (executor.start.timeout.ms)",
                        last,
                        master,
                        deadline,
                    )
                continue
            log.info(
                "Spark master reachable at %s:%d after %.2f s",
                host,
                port,
                time.monotonic() - started,
            )
            return
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise ServiceUnavailable(
                f"Spark master unreachable: executor.spark.master={master} did not accept a "
                f"connection within {deadline:g} s (executor.start.timeout.ms="
                f"{int(deadline * 1000)}; {attempts} attempt(s), last: {last}). Start the "
                "master, or fix executor.spark.master (a local[*] master needs no cluster)."
            )
        await asyncio.sleep(min(backoff, remaining))
        backoff = min(backoff * 2, BACKOFF_MAX)


async def check_master_line(master: str, ui_urls: Sequence[str] = ()) -> None:
    """Once the master answers: ``SparkLineMismatch`` (exit 69) when its web UI shows another
    Spark line than the installed pyspark's; a warning when no UI could be read (the
    executors then meet a mismatch as Spark's registration failure, a minute later)."""
    from daemon import sparklines as lines

    urls = master_ui_urls(master, ui_urls)
    if not urls:
        return
    version, url, failures = await asyncio.to_thread(lines.read_master_version, urls)
    if not version:
        log.warning(
            "could not read the Spark version of executor.spark.master=%s from its web UI (%s):"
            " its Spark line is not checked; set executor.spark.master.ui.url to the master's"
            " web UI",
            master,
            "; ".join(failures),
        )
        return
    error = lines.mismatch(master, version, url)
    if error is not None:
        raise error
    log.info("Spark master %s runs Spark %s, the line of this pyspark", master, version)
