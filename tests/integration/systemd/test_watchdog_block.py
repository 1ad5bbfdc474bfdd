"""The watchdog's point, on a real daemon: a connector that blocks the event loop with a
synchronous sleep (``support.loop_blocker``) stops the WATCHDOG=1 pings within one interval, for
as long as it blocks — systemd, with ``WatchdogSec=`` equal to WATCHDOG_USEC, would kill and
restart the service — and the pings resume once the loop runs again.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
from pathlib import Path

import pytest
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.loop_blocker import read_marker
from support.notify import Listener

pytestmark = pytest.mark.integration

WATCHDOG_USEC = 1_000_000  # systemd's limit: 1 s; pings every 0.5 s
LIMIT = WATCHDOG_USEC / 1e6
INTERVAL = LIMIT / 2
BLOCK = 3.0  # seconds the connector blocks the loop


async def test_a_connector_blocking_the_loop_stops_the_watchdog(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    listener: Listener,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    marker = tmp_path / "block.json"
    connector = {
        "name": "blocker",
        "connector.class": "support.loop_blocker:LoopBlockerSink",
        "topics": topic,
        "block.seconds": str(BLOCK),
        "block.marker": str(marker),
    }
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    p = daemon_process(
        worker,
        [connector],
        wait=False,
        env={"NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": str(WATCHDOG_USEC)},
    )
    await wait_until(lambda: listener.stamps("READY=1"), 90.0, "READY=1")
    ready = listener.stamps("READY=1")[0]
    await wait_until(
        lambda: len([t for t in listener.stamps("WATCHDOG=1") if t > ready]) >= 4,
        10.0,
        "steady pings",
    )

    await produce(kafka_bootstrap, topic, 1)  # the task's first put blocks the loop
    done = await wait_until(lambda: "end" in (m := read_marker(marker)) and m, 60.0, "the block")
    start, end = done["start"], done["end"]
    # The pings after the block: the loop runs again.
    await wait_until(
        lambda: len([t for t in listener.stamps("WATCHDOG=1") if t > end]) >= 3,
        10.0,
        "pings after the block",
    )
    pings = listener.stamps("WATCHDOG=1")
    before = [t for t in pings if t <= start + 0.05]  # a ping sent just before may land late
    after = [t for t in pings if t > start + 0.05]
    last, resumed = before[-1], after[0]
    print(
        f"\nblocked {end - start:.3f} s; last ping {start - last:.3f} s before the block, "
        f"next {resumed - end:.3f} s after it; silence {resumed - last:.3f} s "
        f"(systemd's limit {LIMIT} s)"
    )
    # Up to the block the pings were regular: the last one came within an interval of it.
    assert start - last <= INTERVAL + 0.1, (start, last)
    # Nothing during the block, so systemd's deadline (last + WatchdogSec) passed inside it.
    assert not [t for t in pings if start + 0.05 < t < end], (start, end, pings)
    assert last + LIMIT < end
    assert resumed - last > LIMIT
    # Once the loop runs again the pings resume at once and at their rate.
    assert resumed - end <= 0.2, (end, resumed)
    gaps = [b - a for a, b in itertools.pairwise(after[:4])]
    assert all(0.35 <= g <= 0.7 for g in gaps[1:]), gaps

    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60.0) == 0, p.log()
