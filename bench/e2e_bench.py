"""End-to-end benchmark: Kafka → connectd → Parquet table, against a raw aiokafka consume.

    .venv/bin/python bench/e2e_bench.py --bootstrap 127.0.0.1:9092             # 1M records, 3 runs
    .venv/bin/python bench/e2e_bench.py --bootstrap ... --records 200000 --runs 1   # quicker

A topic of ``--records`` records of 200 bytes in 3 partitions is produced once. Then, for each
run: a raw aiokafka consume of the whole topic (no group, no conversion: the ceiling of reading),
and connectd (an in-process daemon on one warm executor pool: 1 executor + 1 spare, ``local[2]``)
with a ``ParquetSink`` of one task and of three tasks, each into a fresh table, timed from the
connector's creation to the last offset committed in the table's commit log. The event loop's
lag (a 0.1 s sleep's overshoot) is sampled during each connectd run. Medians of the runs are
printed; the executor's own write ceiling is ``bench/executor_bench.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from daemon.config import Mode, parse_worker
from daemon.config.plan import LaunchPlan
from daemon.daemon import Daemon
from daemon.executor import ExecutorPool, PoolSettings
from daemon.logs import setup_logging
from daemon.storage.commitlog import META, CommitRecord
from daemon.storage.standalone import MemoryStore

PARTITIONS = 3
RECORD_BYTES = 200


async def make_topic(bootstrap: str, n: int) -> str:
    topic = f"bench-e2e-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=50, max_batch_size=1 << 20
    )
    await producer.start()
    pad = b"v" * (RECORD_BYTES - 12)
    try:
        pending = []
        for i in range(n):
            pending.append(await producer.send(topic, b"%012d" % i + pad, partition=i % 3))
            if len(pending) >= 20_000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return topic


async def raw_consume(bootstrap: str, topic: str, n: int) -> float:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=500,
    )
    await consumer.start()
    try:
        began, got = time.perf_counter(), 0
        while got < n:
            batch = await consumer.getmany(timeout_ms=1000)
            got += sum(len(v) for v in batch.values())
        return time.perf_counter() - began
    finally:
        await consumer.stop()


def committed(table: Path) -> int:
    ends: dict[tuple[str, int], int] = {}
    log = table / META / "log"
    if not log.is_dir():
        return 0
    for name in sorted(os.listdir(log)):
        try:
            record = CommitRecord.from_json((log / name).read_bytes(), source=name)
        except Exception:  # a record being published: read it next time
            break
        for r in record.ranges:
            ends[(r.topic, r.partition)] = r.end
    return sum(ends.values())


async def connectd_run(
    bootstrap: str, topic: str, n: int, tasks: int, pool: ExecutorPool, scratch: Path
) -> dict[str, float]:
    table = scratch / f"table-{uuid.uuid4().hex[:8]}"
    worker = parse_worker(
        {
            "bootstrap.servers": bootstrap,
            "listeners": "http://127.0.0.1:0",
            "state.dir": str(scratch / "state"),
            "key.converter": "bytearray",
            "value.converter": "bytearray",
            "offset.flush.interval.ms": "5000",
        },
        mode=Mode.STANDALONE,
    ).config
    plan = LaunchPlan(mode=Mode.STANDALONE, worker=worker)
    daemon = Daemon(plan, executors=pool, handle_signals=False, store=MemoryStore(), rest=False)
    async with daemon:
        assert daemon.herder is not None
        daemon.lag.reset()
        began = time.perf_counter()
        await daemon.herder.create_connector(
            f"bench-{uuid.uuid4().hex[:6]}",
            {
                "connector.class": "ParquetSink",
                "topics": topic,
                "tasks.max": str(tasks),
                "path": str(table),
                "flush.max.records": "100000",
                "flush.interval.ms": "1000",
            },
        )
        while (done := await asyncio.to_thread(committed, table)) < n:
            await asyncio.sleep(0.2)
        seconds = time.perf_counter() - began
        lag = daemon.lag.stats()
    assert done == n, done
    return {"seconds": seconds, "lag_p99": lag.p99, "lag_max": lag.max}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log-level", default="WARNING", help="connectd's log level (stderr)")
    args = parser.parse_args()
    setup_logging(args.log_level)
    n = args.records

    t0 = time.perf_counter()
    topic = await make_topic(args.bootstrap, n)
    print(
        f"produced {n} records of {RECORD_BYTES} B into {topic} in {time.perf_counter() - t0:.1f} s"
    )
    pool = ExecutorPool(
        PoolSettings(
            size=1,
            spares=1,
            spark_master="local[2]",
            spark_conf={"spark.ui.enabled": "false", "spark.driver.memory": "2g"},
        )
    )
    await pool.start()
    results: dict[str, list[dict[str, float]]] = {"raw": [], "1 task": [], "3 tasks": []}
    try:
        await pool.wait_ready(2, timeout=300)
        with tempfile.TemporaryDirectory(prefix="connectd-bench-") as tmp:
            for run in range(args.runs):
                raw = await raw_consume(args.bootstrap, topic, n)
                results["raw"].append({"seconds": raw})
                for tasks, key in ((1, "1 task"), (3, "3 tasks")):
                    r = await connectd_run(args.bootstrap, topic, n, tasks, pool, Path(tmp))
                    results[key].append(r)
                print(
                    f"run {run + 1}: "
                    + ", ".join(f"{k} {v[-1]['seconds']:.1f} s" for k, v in results.items())
                )
    finally:
        await pool.close()

    print(f"\n{n} records of {RECORD_BYTES} B, {PARTITIONS} partitions, median of {args.runs}:")
    print(f"{'':<26}{'records/s':>12}{'MB/s':>8}{'loop lag p99':>14}{'max':>8}")
    for key, label in (
        ("raw", "raw aiokafka consume"),
        ("1 task", "connectd, 1 task"),
        ("3 tasks", "connectd, 3 tasks"),
    ):
        secs = statistics.median(r["seconds"] for r in results[key])
        rate = n / secs
        mb = rate * RECORD_BYTES / 1e6
        line = f"{label:<26}{rate:>12,.0f}{mb:>8.1f}"
        if key != "raw":
            p99 = statistics.median(r["lag_p99"] for r in results[key]) * 1000
            mx = max(r["lag_max"] for r in results[key]) * 1000
            line += f"{p99:>11.1f} ms{mx:>5.0f} ms"
        print(line)
    return 0


def run() -> Any:
    from daemon.executor import become_subreaper

    become_subreaper()
    return asyncio.run(main())


if __name__ == "__main__":
    sys.exit(run())
