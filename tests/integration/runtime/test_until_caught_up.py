"""``connectd standalone --until-caught-up`` (issue 32 item 3), a real daemon process on a real
broker: it writes what the topic held at start into a ParquetSink table, stops cleanly and
exits 0; a second run continues where the first committed; a run killed outright (SIGKILL) in
the middle of a backlog leaves nothing twice, and the run after it catches up; a connector that
fails for good ends the run with exit 1, naming it."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
from pathlib import Path

import pytest
from support.daemon import DaemonProcess, ProcessFactory, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed, coordinates

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

FLAG = "--until-caught-up"


def _sink(topic: str, table: Path, **more: str) -> dict[str, str]:
    return {
        "name": "backfill",
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": "2",
        "path": str(table),
        "flush.interval.ms": "300",
        # Writes of 2,000 records at most, each a Spark job (0.3-0.6 s, where pyarrow takes
        # a few ms): a backlog takes many commits over seconds, so the kill below lands between
        # two of them (one write of everything the executor's start let pile up, or thirty
        # quick ones, would leave no middle to kill in).
        "flush.max.records": "2000",
        "write.engine": "spark",
        "consumer.override.max.poll.records": "500",
        **more,
    }


async def _exit_code(daemon: DaemonProcess, timeout: float) -> int:
    """The daemon's exit status, polled with a deadline (its log in the message if it hangs)."""
    deadline = time.monotonic() + timeout
    assert daemon.proc is not None
    while daemon.proc.poll() is None:
        assert time.monotonic() < deadline, f"still running after {timeout} s:\n{daemon.log()}"
        await asyncio.sleep(0.2)
    return int(daemon.proc.returncode)


def _each_once(table: Path, produced: int) -> None:
    rows = coordinates(table)
    twice = [c for c, n in collections.Counter(rows).items() if n > 1]
    assert not twice, twice[:5]
    assert len(rows) == produced


async def test_a_run_until_caught_up_stops_when_the_table_has_what_the_topic_held(
    daemon_process: ProcessFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=2)
    table = tmp_path / "table"
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    await produce(kafka_bootstrap, topic, [(None, b"a-%d" % i) for i in range(3_000)])

    first = daemon_process(worker, [_sink(topic, table)], wait=False, flags=[FLAG])
    assert await _exit_code(first, 180) == 0, first.log()
    assert "every connector is caught up (backfill)" in first.log()
    _each_once(table, 3_000)

    # More records, then a run killed outright while it works through them.
    await produce(kafka_bootstrap, topic, [(None, b"b-%d" % i) for i in range(30_000)])
    killed = daemon_process(worker, [_sink(topic, table)], wait=False, flags=[FLAG])
    deadline = time.monotonic() + 180
    while committed(table) <= 3_000:
        assert killed.proc is not None and killed.proc.poll() is None, killed.log()
        assert time.monotonic() < deadline, killed.log()
        await asyncio.sleep(0.05)
    killed.signal(signal.SIGKILL)
    killed.wait(30)
    in_between = committed(table)
    assert 3_000 < in_between < 33_000, in_between  # killed in the middle of the backlog

    # The next run continues from what was committed and ends once the table holds it all;
    # records produced after it started are not waited for.
    last = daemon_process(worker, [_sink(topic, table)], wait=False, flags=[FLAG])
    assert await _exit_code(last, 240) == 0, last.log()
    _each_once(table, 33_000)


async def test_a_connector_that_fails_for_good_ends_the_run_naming_it(
    daemon_process: ProcessFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, [(None, b"{not json")])
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    sink = _sink(
        topic,
        tmp_path / "table",
        **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        },
    )
    daemon = daemon_process(worker, [sink], wait=False, flags=[FLAG])
    assert await _exit_code(daemon, 180) == 1, daemon.log()
    assert "until caught up: connector backfill failed: task 0:" in daemon.log()


def test_until_caught_up_is_a_standalone_run(tmp_path: Path) -> None:
    """The flag on ``run`` with a distributed configuration: exit 78, naming the flag."""
    import subprocess
    import sys

    config = tmp_path / "connectd.toml"
    config.write_text(
        'mode = "distributed"\n[worker]\n"bootstrap.servers" = "127.0.0.1:1"\n'
        '"group.id" = "g"\n"config.storage.topic" = "c"\n"offset.storage.topic" = "o"\n'
        '"status.storage.topic" = "s"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "daemon", "run", "--config", str(config), FLAG],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 78, done.stderr
    assert "--until-caught-up" in done.stderr, done.stderr
