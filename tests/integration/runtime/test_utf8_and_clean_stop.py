"""``connectd standalone`` as a real process with a ParquetSink on the session broker:

- issue 13, item 9: keys and values that are not UTF-8 under ``StringConverter`` are decoded as
  Connect's ``StringConverter`` decodes them (U+FFFD for the bad bytes) and land in the table
  with the good records; the task stays RUNNING;
- issue 13, item 14: on SIGTERM, the pool logs no WARNING about the executors it closes on
  purpose, and starts no executor once the shutdown began, not even to replace the executor of
  a task whose stop had to kill it (a HangSink task blocked in its write, next to the
  ParquetSink: the one WARNING-worthy event, and the only one warned about).

One daemon serves both: a JVM start is the expensive part of each.
"""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.kafka import produce
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration

NAME = "utf8-sink"
RECORDS = [
    (b"k0", b"plain"),
    (b"k\xff1", b"caf\xc3\xa9 bad \xc3\x28 end"),  # a bad key; a bad sequence amid good text
    (b"k2", b"\xfe\xff"),
    (None, b"last"),
]
EXPECTED = [
    ("k0", "plain"),
    ("k\ufffd1", "caf\u00e9 bad \ufffd( end"),
    ("k2", "\ufffd\ufffd"),
    (None, "last"),
]
HANG = "hang-sink"
BLOCKED = re.compile(rf"Starting to block in executor pid \d+ for task {HANG}-0")
STARTED = re.compile(r"executor \d+ started: pid \d+")


def _table_rows(table: Path) -> list[tuple[str | None, str | None]]:
    if not table.is_dir():
        return []
    dataset = ds.dataset(table, format="parquet")
    if not dataset.files:
        return []
    t = dataset.to_table(columns=["kafka_offset", "key", "value"])
    got = sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))
    return [(key, value) for _, key, value in got]


async def test_invalid_utf8_is_replaced_and_a_clean_stop_kills_nothing_loudly(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=1)
    table = tmp_path / "table"
    # Two executors, no spare: the HangSink holds one for good, the ParquetSink writes on the other.
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"executor.pool.size": "2", "executor.pool.spares": "0"},
    )
    sink = {
        "name": NAME,
        "connector.class": "ParquetSink",
        "tasks.max": "1",
        "topics": topic,
        "path": str(table),
        "flush.max.records": "100",
        "flush.interval.ms": "300",
    }
    hang = {"name": HANG, "connector.class": "HangSink", "tasks.max": "1", "topics": topic}
    p = daemon_process(worker, [sink, hang])
    await produce(kafka_bootstrap, topic, RECORDS)

    def landed() -> list[tuple[str | None, str | None]]:
        code, status = p.rest("GET", f"/connectors/{NAME}/status")
        tasks = status["tasks"] if code == 200 else []
        assert not tasks or tasks[0]["state"] != "FAILED", tasks[0].get("trace")
        rows = _table_rows(table)
        return rows if len(rows) >= len(RECORDS) else []

    assert await wait_until(landed, 180, "the records in the table") == EXPECTED
    await wait_until(
        lambda: BLOCKED.search(p.log_path.read_text(errors="replace")),
        120,
        "the HangSink task blocked in its executor",
    )
    code, status = p.rest("GET", f"/connectors/{NAME}/status")
    assert code == 200 and status["tasks"][0]["state"] == "RUNNING", status

    p.signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 60) == 0, p.log()
    log = p.log_path.read_text(errors="replace")
    assert "connectd stopped" in log, log[-3000:]
    shutdown = log[log.index("connectd is shutting down") :]
    loud = [
        line
        for line in shutdown.splitlines()
        if "WARNING" in line and "executor" in line and HANG not in line
    ]
    assert not loud, "a clean stop warned about executors:\n" + "\n".join(loud)
    assert not STARTED.search(shutdown), (
        "an executor was started during the shutdown:\n" + (shutdown[-3000:])
    )
