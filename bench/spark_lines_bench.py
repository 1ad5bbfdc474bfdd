"""What each supported Spark line costs, side by side in one run: an executor's start (spawn →
session ready, without class-data sharing), one 50,000-record ParquetSink write with Spark
(``write.engine=spark``), and the 1M-record JSON run of bench/ss_bench.py (connectd only,
``connectd-json-1``: launch → all rows). Each line runs in its own venv (``make test-spark``'s:
.venv-spark35, .venv-spark40, and .venv for 4.1); ``make bench-spark-lines`` builds them.

    .venv/bin/python bench/spark_lines_bench.py --bootstrap 127.0.0.1:9092 [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENVS = {"3.5": ".venv-spark35", "4.0": ".venv-spark40", "4.1": ".venv"}
WRITE = "daemon.connectors.parquet.write:write_staged"
SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}


async def executor_figures(runs: int, records: int) -> dict[str, Any]:
    """In the line's venv: executor start-up and a ``records``-record write, medians of
    ``runs`` (each run a fresh pool, so each start is a cold JVM)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import pyspark
    from executor_bench import records as make_records

    from daemon.executor import ExecutorPool, PoolSettings, become_subreaper

    become_subreaper()
    starts, writes = [], []
    table = make_records(records)
    with tempfile.TemporaryDirectory(prefix="connectd-lines-") as tmp_name:
        tmp = Path(tmp_name)
        for i in range(runs):
            settings = PoolSettings(
                size=1,
                spares=0,
                spark_master="local[2]",
                spark_conf=SPARK_CONF,
                cds=False,
                cds_build=False,
                work_dir=tmp / f"work-{i}",
            )
            async with ExecutorPool(settings) as pool:
                await pool.wait_ready(1, timeout=600)
                starts.append(pool.snapshot()[0].startup_seconds or float("nan"))
                warm = {"path": str(tmp / f"warm-{i}"), "engine": "spark"}
                await pool.run("bench", WRITE, make_records(1000), timeout=900, kwargs=warm)
                began = time.perf_counter()
                kwargs = {"path": str(tmp / f"w-{i}"), "engine": "spark"}
                await pool.run("bench", WRITE, table, timeout=900, kwargs=kwargs)
                writes.append(time.perf_counter() - began)
    return {
        "pyspark": pyspark.__version__,
        "start_s": statistics.median(starts),
        "starts": starts,
        "write_s": statistics.median(writes),
        "writes": writes,
    }


def run_line(line: str, args: argparse.Namespace) -> dict[str, Any]:
    python = ROOT / VENVS[line] / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: make test-spark SPARK={line} builds it")
    child = subprocess.run(
        [str(python), __file__, "--child", "--runs", str(args.runs), "--records", "50000"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
        cwd=ROOT,
    )
    figures: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory(prefix="connectd-lines-ss-") as tmp_name:
        out = Path(tmp_name) / "ss.json"
        ss = [str(python), "bench/ss_bench.py", "--bootstrap", args.bootstrap]
        ss += ["--only", "connectd-json-1", "--runs", "1", "--records", str(args.e2e_records)]
        ss += ["--json", str(out)]
        if args.topics:
            ss += ["--topics", args.topics]
        subprocess.run(ss, check=True, timeout=3600, cwd=ROOT, stdout=subprocess.DEVNULL)
        raw = json.loads(out.read_text())
    figures["e2e"] = raw
    return figures


def _e2e(raw: dict[str, Any]) -> str:
    """Launch → all rows and steady records/s of the connectd-json-1 run in ss_bench's JSON."""
    m = raw.get("medians", {}).get("connectd-json-1")
    if not m:
        return "n/a"
    return f"{m['all_s']:.1f} s, {m['steady_rps']:,.0f}/s"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--lines", default=",".join(VENVS), help="comma-separated: 3.5,4.0,4.1")
    p.add_argument("--runs", type=int, default=3, help="executor starts and writes per line")
    p.add_argument("--e2e-records", type=int, default=1_000_000)
    p.add_argument("--topics", metavar="JSON,BYTES", help="ss_bench's --topics (reuse topics)")
    p.add_argument("--quick", action="store_true", help="1 run each, 200k records end to end")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--records", type=int, default=50_000, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(executor_figures(args.runs, args.records))))
        return 0
    if args.quick:
        args.runs, args.e2e_records = 1, 200_000
    print(
        f"Spark lines side by side; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f};"
        f" executor figures are medians of {args.runs}, the JSON run is one run of"
        f" {args.e2e_records:,} records"
    )
    head = f"  {'line':<5} {'pyspark':<8} {'executor start':>15} {'50k write':>10}"
    print(f"{head}  JSON run: all rows, steady")
    for line in args.lines.split(","):
        f = run_line(line, args)
        print(
            f"  {line:<5} {f['pyspark']:<8} {f['start_s']:>13.1f} s {f['write_s']:>8.2f} s"
            f"  {_e2e(f['e2e'])}",
            flush=True,
        )
    print(f"  load after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
