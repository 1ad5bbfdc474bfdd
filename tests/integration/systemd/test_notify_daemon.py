"""``connectd standalone`` as a real process with ``NOTIFY_SOCKET`` / ``WATCHDOG_USEC`` pointing at
a datagram socket of the test, the way systemd runs it (Type=notify, WatchdogSec=1s):

- READY=1 arrives only once ``GET /health`` answers 200 (the REST API listens and the connector
  from the command line has started); the executors' JVMs start in the background, after it;
- WATCHDOG=1 arrives every WATCHDOG_USEC/2;
- STATUS= carries the record rate once records flow (``<r> records/s consumed`` here: EchoSink
  writes nothing; a sink that writes shows ``records/s written``);
- SIGHUP: RELOADING=1 (with MONOTONIC_USEC), then READY=1;
- SIGTERM: STOPPING=1, exit code 0.

The messages of the whole start-reload-stop cycle are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
import statistics
import time
from pathlib import Path

import pytest
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.notify import Listener, health

pytestmark = pytest.mark.integration

WATCHDOG_USEC = 1_000_000  # a ping every 0.5 s


async def test_notify_protocol_of_a_start_reload_stop_cycle(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    listener: Listener,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    connector = {"name": "echo", "connector.class": "EchoSink", "topics": topic}
    health_at_ready: list[int | None] = []
    url = worker["listeners"]
    listener.on_ready = lambda: health_at_ready.append(health(url))

    began = time.monotonic()
    p: DaemonProcess = daemon_process(
        worker,
        [connector],
        wait=False,
        env={"NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)},
    )
    polls: list[tuple[float, int | None]] = []  # (time the poll was sent, status)

    async def ready_seen() -> bool:
        assert p.proc is not None and p.proc.poll() is None, p.log()
        sent = time.monotonic()
        polls.append((sent, await asyncio.to_thread(health, url)))
        return bool(listener.stamps("READY=1"))

    await wait_until(ready_seen, timeout=90.0, what="READY=1", interval=0.02)
    # The listener's thread stamps READY first, then asks /health: wait for that answer.
    await wait_until(lambda: health_at_ready, timeout=15.0, what="/health asked at READY")
    ready_at = listener.stamps("READY=1")[0]
    first_200 = min((t for t, code in polls if code == 200), default=None)
    print(
        f"\nfirst /health 200 (poll sent) at {_rel(first_200, began)}, "
        f"READY=1 arrived at {_rel(ready_at, began)}; /health right after READY: {health_at_ready}"
    )
    # Asked on the listener's thread as soon as READY arrived: the REST API already answered.
    assert health_at_ready[0] == 200, (health_at_ready, p.log())
    # No poll sent after READY arrived ever failed to get a 200.
    assert all(code == 200 for t, code in polls if t > ready_at), polls
    ready_line = next(x for x in listener.texts() if "READY=1" in x)
    assert "STATUS=1 connectors, " in ready_line, ready_line

    # The watchdog: every 0.5 s, from the daemon's loop (executors' JVMs start meanwhile).
    window_start = time.monotonic()
    await wait_until(
        lambda: len([t for t in listener.stamps("WATCHDOG=1") if t > window_start]) >= 6,
        timeout=10.0,
        what="6 watchdog pings",
    )
    pings = [t for t in listener.stamps("WATCHDOG=1") if t > window_start]
    gaps = [b - a for a, b in itertools.pairwise(pings)]
    print(f"watchdog gaps (s): {[round(g, 3) for g in gaps]}")
    assert 0.4 <= statistics.median(gaps) <= 0.65, gaps
    assert max(gaps) < WATCHDOG_USEC / 1e6, gaps  # systemd's limit was never reached

    # Records flow: a STATUS= refresh (every 5 s) shows their rate.
    produced_at = time.monotonic()
    await produce(kafka_bootstrap, topic, 300)
    moving = re.compile(
        r"STATUS=1 connectors, 1/1 tasks running, 0 failed, [0-9.]*[1-9][0-9.]* "
        r"records/s (consumed|written)$"
    )
    rate_line = await wait_until(
        lambda: next((x for x in listener.texts(produced_at) if moving.match(x)), None),
        timeout=20.0,
        what="a STATUS= line with a record rate",
    )
    print(f"STATUS once records flow: {rate_line}")

    # SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1.
    hup = time.monotonic()
    p.signal(signal.SIGHUP)
    await wait_until(
        lambda: [t for t in listener.stamps("READY=1") if t > hup],
        timeout=30.0,
        what="READY=1 after the reload",
    )
    reload_texts = [x for x in listener.texts(hup) if not x.startswith(("WATCHDOG", "STATUS"))]
    assert reload_texts[0].split("\n")[0] == "RELOADING=1", reload_texts
    assert reload_texts[0].split("\n")[1].startswith("MONOTONIC_USEC="), reload_texts
    assert reload_texts[1].startswith("READY=1\nSTATUS="), reload_texts

    # SIGTERM: STOPPING=1 first, exit code 0.
    term = time.monotonic()
    p.signal(signal.SIGTERM)
    code = await asyncio.to_thread(p.wait, 60.0)
    stopped = time.monotonic()
    assert code == 0, p.log()
    after = [x for x in listener.texts(term) if not x.startswith(("WATCHDOG", "STATUS"))]
    assert after == ["STOPPING=1"], after
    print(f"SIGTERM to exit: {stopped - term:.2f} s; the messages of the cycle:")
    print(listener.transcript(began))


def _rel(t: float | None, began: float) -> str:
    return "never" if t is None else f"+{t - began:.3f} s"
