"""Issue 29: many connectors on one worker (real broker, real Spark executors, the daemon's own
pool at the default size: one executor and one spare).

Twenty ParquetSink connectors with two tasks each share the pool:

- **Throughput**: once warm, 100 new records per topic are in all twenty tables within 10 s.
  Small writes are written by pyarrow inside the executor (``write.engine=auto``), so forty
  tasks do not queue behind forty Spark jobs' fixed cost.
- **Isolation**: a HangSink's write then blocks its executor forever. It steps aside once it is
  overdue and another connector's write waits (``executor/queue.py``): the waiting writes take
  the spare at once and the pool starts one more executor. So every other connector's records
  reach its table within its flush interval + 5 s while the hang lasts (plus
  ``executor.write.overdue.ms`` for records that arrive as the hang begins: until then, the
  hung write may be a healthy slow one); the hang is still killed at its write deadline and
  reaped before its task's next write is leased; every table holds each record exactly once.
- **A connector's limit**: the HangSink has two tasks and ``executor.writes.max`` at its
  default (the pool's size, 1), counting its write that stepped aside: its second task's write
  waits for the first one's executor, never takes the spare meant for the others.
- ``DELETE`` of the hung connector works while its tasks hang.
"""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka_fixtures import TopicFactory
from support.tables import committed, coordinates

from daemon.executor import ExecutorPool
from daemon.executor.info import PoolEventKind

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SINKS = 20
TASKS = 2
FLUSH_S = 1.0
OVERDUE_S = 2.0  # executor.write.overdue.ms's default
WRITE_TIMEOUT_S = 30.0
#: The issue's bound for 100 new records per topic in all twenty tables, once warm.
THROUGHPUT_BOUND_S = 10.0


async def produce_all(bootstrap: str, topics: list[str], n: int) -> None:
    """``n`` records into each topic (key None: spread over its partitions), one producer,
    every record acknowledged."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, value=b"value-%d" % i) for topic in topics for i in range(n)
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def audit(table: Path, produced: int) -> None:
    """Every record once: each partition's offsets 0..n-1, no row twice, ``produced`` in all."""
    rows = coordinates(table)
    assert len(rows) == len(set(rows)) == produced, table
    offsets: dict[int, list[int]] = collections.defaultdict(list)
    for partition, offset in rows:
        offsets[partition].append(offset)
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(len(seen))), (table, partition)


async def test_twenty_connectors_share_the_pool_and_a_hung_one_holds_none_back(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topics = [await kafka_topic(partitions=TASKS) for _ in range(SINKS)]
    hang_topic = await kafka_topic(partitions=2)  # HangSink blocks at its first put, records or not
    props = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "executor.pool.spares": "1",  # the default pool, which test daemons otherwise trim
            "executor.pool.start": "eager",
            # Sessions from the start: the HangSink added later needs Spark, and under on-demand
            # its arrival would replace every executor at once (a JVM start that every
            # connector's writes wait for), which is not what this test measures.
            "executor.spark.session": "always",
            "task.write.timeout.ms": str(int(WRITE_TIMEOUT_S * 1000)),
        },
    )
    tables = [tmp_path / f"table-{i}" for i in range(SINKS)]
    sinks = [
        {
            "name": f"many-{i}",
            "connector.class": "ParquetSink",
            "topics": topic,
            "tasks.max": str(TASKS),
            "path": str(table),
            "flush.interval.ms": str(int(FLUSH_S * 1000)),
        }
        for i, (topic, table) in enumerate(zip(topics, tables, strict=True))
    ]
    d = await run_daemon(props, connectors=sinks)
    assert d.herder is not None
    pool = d.executors
    assert isinstance(pool, ExecutorPool)
    produced = 0

    async def produce_round(n: int) -> float:
        """Produce ``n`` per topic; the time every record was acknowledged."""
        nonlocal produced
        await produce_all(kafka_bootstrap, topics, n)
        produced += n
        return time.monotonic()

    async def all_tables(n: int) -> bool:
        return all(committed(t) == n for t in tables)

    # Warm: every table has its first records (both tasks of each wrote), and the spare is up.
    await produce_round(20)
    await wait_until(lambda: all_tables(produced), 240, "every table's first records")
    await pool.wait_ready(2, timeout=120)

    # Throughput: 100 new records per topic in all twenty tables.
    took = []
    for _ in range(2):
        acked = await produce_round(100)
        await wait_until(lambda: all_tables(produced), 60, "100 more records in every table")
        took.append(time.monotonic() - acked)
    print(f"\n{SINKS} connectors x {TASKS} tasks, 100 records per topic: {took} s to all tables")
    assert max(took) <= THROUGHPUT_BOUND_S

    # The HangSink's first write blocks its executor for good.
    hang = {"connector.class": "HangSink", "topics": hang_topic, "tasks.max": "2"}
    await d.herder.create_connector("hang", hang)
    hung = await wait_until(
        lambda: [t for t in ("hang-0", "hang-1") if pool.current_pid(t) is not None],
        60,
        "the hang's write",
    )
    (hung_task,) = hung  # one of its tasks writes; the other waits on the connector's limit
    (waiting_task,) = {"hang-0", "hang-1"} - {hung_task}
    hung_pid = pool.current_pid(hung_task)
    hung_at = time.monotonic()

    # While it hangs, every other connector's records land within flush + 5 s, round after
    # round, for longer than the hang's own overdue time.
    latencies = []
    while time.monotonic() - hung_at < 12:
        bound = FLUSH_S + 5 + (OVERDUE_S if not latencies else 0)
        began = time.monotonic()
        await produce_round(50)
        await wait_until(lambda: all_tables(produced), bound, "the round in every table")
        latencies.append(time.monotonic() - began)
        assert pool.current_pid(hung_task) == hung_pid, "the hang ended early: proves nothing"
        assert pool.current_pid(waiting_task) is None, "the hang's connector took two executors"
    print(f"rounds while hung: {[round(x, 2) for x in latencies]} s")
    assert pool.status().aside == 1

    # The hang is killed at its deadline, reaped, and only then does its task write again;
    # its sibling's write got an executor only once the hung one was killed.
    await wait_until(
        lambda: pool.current_pid(hung_task) not in (hung_pid,),
        WRITE_TIMEOUT_S + 30,
        "the hang killed at its deadline",
    )
    assert time.monotonic() - hung_at >= WRITE_TIMEOUT_S - 1
    await wait_until(lambda: pool.current_pid(waiting_task) is not None, 30, "the sibling's write")
    events = pool.events.snapshot()
    reaped = [e.at for e in events if e.kind is PoolEventKind.REAPED and e.pid == hung_pid]
    assert reaped, "the hung executor's reap was not recorded"
    leases = [e for e in events if e.kind is PoolEventKind.LEASED]
    assert all(at > reaped[0] for at in [e.at for e in leases if e.task_id == hung_task][1:])
    sibling = min(e.at for e in leases if e.task_id == waiting_task)
    assert sibling >= hung_at + WRITE_TIMEOUT_S - 1, "the sibling wrote beside the hang"

    # DELETE works while its tasks hang; no write stays aside.
    await d.herder.delete_connector("hang")
    await wait_until(lambda: pool.status().aside == 0, 30, "no write aside any more")

    # Audits: every record exactly once in every table.
    await produce_round(10)
    await wait_until(lambda: all_tables(produced), 60, "the last round in every table")
    for table in tables:
        audit(table, produced)
