"""Issue 13, item 11: a broker outage does not flood the log.

A dedicated broker (its own port; the session's broker is shared and never stopped) serves a
daemon's EchoSink task. The broker is stopped for a few seconds, then started again on the same
port: aiokafka's line per failed connection attempt (``Unable connect to node with id 1``,
about 7,600 in a 68 s outage with 3 tasks before) becomes one line when the broker becomes
unreachable, a summary per interval (shortened to 2 s here), and one line when it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka.errors import TopicAlreadyExistsError
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import KafkaBroker, create_topic, kafkactl
from support.spark import ThreadedPool

from daemon.kafka.outages import BrokerOutageFilter
from daemon.runtime.model import State

pytestmark = pytest.mark.integration

OUTAGE_S = 4.0
EVERY_S = 1.0


@pytest.fixture
def short_summaries() -> Iterator[Callable[[BrokerOutageFilter], None]]:
    """Puts a daemon's outage filter on aiokafka's loggers, as ``Daemon.run`` (the CLI's) does
    and an embedded daemon does not, with a short summary interval; takes it off afterwards."""
    installed: list[BrokerOutageFilter] = []

    def install(outages: BrokerOutageFilter) -> None:
        outages.every = EVERY_S
        outages.install()
        installed.append(outages)

    yield install
    for outages in installed:
        outages.remove()


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_a_broker_outage_logs_a_line_a_summary_and_its_end(
    run_daemon: DaemonFactory,
    own_broker: KafkaBroker,
    plain_pool: ThreadedPool,
    short_summaries: Callable[[BrokerOutageFilter], None],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    bootstrap = own_broker.bootstrap
    await create_topic(bootstrap, "outage", 1)
    props = worker_properties(bootstrap, tmp_path / "state")
    echo = {"name": "echo", "connector.class": "EchoSink", "tasks.max": "1", "topics": "outage"}
    d = await run_daemon(props, connectors=[echo], executors=plain_pool)
    short_summaries(d.outages)  # the filter its task's consumer watches its client with
    assert d.herder is not None
    worker = d.herder
    await wait_until(
        lambda: (
            worker.task_status("echo", 0).state is State.RUNNING
            and _lines(caplog, "Partitions assigned")
        ),
        60,
        "the task consuming",
    )

    assert own_broker.run_dir is not None and own_broker.port is not None
    kafkactl.down(own_broker.run_dir)
    began = time.monotonic()
    await wait_until(lambda: _lines(caplog, "is unreachable"), 30, "the outage's first line")
    # The outage lasts OUTAGE_S by design (this is its length, not a synchronisation).
    await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - began)))
    # The old broker's side of its connections lingers in TIME_WAIT: kafkactl checks the port
    # as the JVM binds it (SO_REUSEADDR), so `up` on the same port works at once (issue 33).
    restarted = kafkactl.up(
        own_broker.port, own_broker.version, own_broker.run_dir, die_with_parent=True
    )
    own_broker.pid = int(restarted.pid)
    # The restarted broker's storage is new: the topic is made again (unless a client's
    # metadata request made it first, as the broker auto-creates topics).
    with contextlib.suppress(TopicAlreadyExistsError):
        await create_topic(bootstrap, "outage", 1)
    await wait_until(lambda: _lines(caplog, "reachable again"), 60, "the line saying it is back")

    raw = _lines(caplog, "Unable connect to")
    assert not raw, f"{len(raw)} raw aiokafka lines, e.g. {raw[:3]}"
    assert len(_lines(caplog, "is unreachable")) == 1, _lines(caplog, "is unreachable")
    summaries = _lines(caplog, "still unreachable")
    assert 1 <= len(summaries) <= OUTAGE_S / EVERY_S + 2, summaries
    assert "connection attempts" in summaries[0]
    (back,) = _lines(caplog, "reachable again")
    assert back.startswith("Kafka broker node 1 is reachable again after"), back
