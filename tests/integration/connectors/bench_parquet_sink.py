"""ParquetSink's write throughput: commits of N records (200-byte values, 3 partitions) through
a real executor pool (1 executor + 1 spare, local[2]), measured from the ``put`` that fills the
buffer to the commit being durable (hand-off, Spark write into staging, commit, files moved).

    .venv/bin/python tests/integration/connectors/bench_parquet_sink.py [--records 100000]
        [--rounds 5] [--format parquet] [--partition-by kafka_partition]

Prints each round and the median of all rounds but the first (a fresh executor's first write
pays for JIT warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for support.spark

import pyarrow as pa
from support.spark import spark_settings

from daemon.connectors.api import TaskId
from daemon.connectors.parquet.sink import ParquetSinkTask
from daemon.connectors.records import TopicPartition
from daemon.connectors.testing import sample_batch
from daemon.executor import ExecutorPool
from daemon.runtime.incarnation.context import TaskContext


class Runner:
    def __init__(self, pool: ExecutorPool) -> None:
        self.pool = pool

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, spark: bool = True, **kwargs: Any
    ) -> Any:
        return await self.pool.run(
            "bench-0", fn, batch, timeout=timeout, kwargs=kwargs, spark=spark
        )


async def main(args: argparse.Namespace) -> None:
    tps = [TopicPartition("bench", p) for p in range(3)]
    per = args.records // 3
    with tempfile.TemporaryDirectory() as tmp:
        config = {
            "path": f"{tmp}/table",
            "format": args.format,
            "partition.by": args.partition_by,
            "flush.max.records": str(per * 3),
            "task.write.timeout.ms": "600000",
        }
        async with ExecutorPool(spark_settings()) as pool:
            await pool.wait_ready(1, 300)
            ctx = TaskContext(TaskId("bench", 0), 1, config, Runner(pool))
            task = ParquetSinkTask()
            await task.start(config, ctx)
            ctx.set_assignment(tps)
            await task.open(tps)
            times = []
            for r in range(args.rounds):
                batches = [
                    sample_batch(tp.topic, tp.partition, r * per, per, value_size=200) for tp in tps
                ]
                for b in batches[:-1]:
                    await task.put(b)
                began = time.monotonic()
                await task.put(batches[-1])
                await task.quiet()  # written and committed
                took = time.monotonic() - began
                times.append(took)
                print(
                    f"round {r}: {per * 3:,} records in {took:.2f} s"
                    f" ({per * 3 / took:,.0f} records/s)",
                    flush=True,
                )
            await task.stop()
    median = statistics.median(times[1:] if len(times) > 1 else times)
    print(f"median (warm): {median:.2f} s, {per * 3 / median:,.0f} records/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--format", default="parquet")
    parser.add_argument("--partition-by", default="")
    asyncio.run(main(parser.parse_args()))
