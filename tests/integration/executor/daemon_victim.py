"""A minimal daemon for test_daemon_death.py: a pool (1 executor + 1 spare) with a write hung
in a Spark UDF; it runs until the test SIGKILLs it.

Usage: python daemon_victim.py <marker file> <scratch dir>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pyarrow as pa

from daemon.executor import ExecutorPool, PoolSettings, become_subreaper


async def main(marker: str, scratch: str) -> None:
    become_subreaper()
    settings = PoolSettings(
        size=1,
        spares=1,
        spark_master="local[2]",
        spark_conf={
            "spark.ui.enabled": "false",
            "spark.driver.memory": "512m",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",  # support/jvm.py
        },
        work_dir=Path(scratch) / "work",
        handoff_dir=Path(scratch) / "shm",
        start_timeout=240,
        cds_build=False,
    )
    pool = ExecutorPool(settings)
    await pool.start()
    await pool.wait_ready(2, timeout=240)
    batch = pa.table({"kafka_offset": list(range(100))})
    await pool.run(
        "victim-0",
        "daemon.executor.testing:hang_in_udf",
        batch,
        timeout=3600,
        kwargs={"marker": marker},
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
