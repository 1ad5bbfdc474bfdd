"""``connectd distributed`` under systemd's notify protocol (a real process, the test's
NOTIFY_SOCKET): READY=1 only once the worker has joined its group and read the config log, and
STATUS= leads with the member's role, generation and share of tasks; SIGTERM: STOPPING=1, exit 0.
"""

from __future__ import annotations

import signal

import pytest
from support.cluster import ClusterFactory
from support.daemon import wait_until
from support.notify import Listener

pytestmark = pytest.mark.integration


async def test_ready_after_joining_and_status_names_the_role(
    cluster: ClusterFactory, listener: Listener
) -> None:
    c = await cluster(
        1,
        start=False,
        env={"NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "1000000"},
        **{"executor.pool.spares": "0"},
    )
    worker = c[0]
    await c.start()
    await wait_until(lambda: listener.stamps("READY=1"), 60, "READY=1")
    ready = next(x for x in listener.texts() if "READY=1" in x.split("\n"))
    log = worker.log()
    assert "Joined group" in log, log
    # The line that says the worker started is logged right before READY=1 is sent, after the
    # first assignment was applied.
    assert log.index("Joined group") < log.index("connectd distributed worker"), log
    assert "STATUS=leader, generation " in ready and "0 tasks here; 0 connectors" in ready, ready
    code, answer = await c.write(
        worker,
        "POST",
        "/connectors",
        {"name": "e", "config": {"connector.class": "EchoSink", "topics": "e", "tasks.max": "2"}},
    )
    assert code == 201, answer
    await wait_until(
        lambda: any("2 tasks here; 1 connectors, 2/2 tasks running" in t for t in listener.texts()),
        60,
        "STATUS= with the worker's share",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0, worker.log()
    assert listener.stamps("STOPPING=1"), listener.texts()
