"""Executor pool benchmark: hand-off cost, Spark write throughput, kill latency, spare takeover,
executor start-up and memory. Prints a table; numbers are measured here, never asserted.

    .venv/bin/python bench/executor_bench.py            # full run (about 10 minutes on 2 cores)
    .venv/bin/python bench/executor_bench.py --quick    # smaller batches, fewer repetitions
    .venv/bin/python bench/executor_bench.py --start 3  # only: pool start → first / all ready
    .venv/bin/python bench/executor_bench.py --nice 5   # only: a write's time at nice 0 vs 10
    .venv/bin/python bench/executor_bench.py --writes 10000,50000,200000,1000000
                                   # only: ParquetSink's write (write_staged) by batch size
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from daemon.errors import WriteTimeout
from daemon.executor import ExecutorPool, PoolSettings, become_subreaper, handoff
from daemon.executor.info import ExecutorState
from daemon.executor.process import read_stat, scan, tree

T = "daemon.executor.testing"
RECORD_BYTES = 200
SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}


def records(n: int) -> pa.Table:
    """``n`` Kafka-like records of about 200 bytes each (coordinates + a 160-byte value)."""
    pad = "v" * (RECORD_BYTES - 40 - 12)
    return pa.table(
        {
            "kafka_topic": pa.array(["orders"] * n),
            "kafka_partition": pa.array([i % 12 for i in range(n)], pa.int32()),
            "kafka_offset": pa.array(range(n), pa.int64()),
            "kafka_timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
            "key": pa.array([f"key-{i % 1000:06d}" for i in range(n)]),
            "value": pa.array([f"{i:012d}{pad}" for i in range(n)]),
        }
    )


def timed_write(spark: Any, batch: Any, how: str, path: str) -> float:
    """Write the batch with Spark one of three ways; the seconds spent inside the executor."""
    began = time.perf_counter()
    if how == "batch_df":  # Batch.df: pyarrow stages Parquet in RAM, Spark reads it
        batch.df.write.mode("append").parquet(path)
    elif how == "arrow_df":  # spark.createDataFrame(pyarrow.Table)
        batch.arrow_df().write.mode("append").parquet(path)
    else:  # the baseline connectd avoids: a DataFrame from Python rows
        rows = [tuple(r.values()) for r in batch.table.to_pylist()]
        began = time.perf_counter()  # count only Spark's part
        spark.createDataFrame(rows, batch.table.column_names).write.mode("append").parquet(path)
    return time.perf_counter() - began


def write_where(spark: Any, batch: Any, path: str) -> dict[str, Any]:
    """Write the batch as Parquet; the executor's pid (which executor took the write)."""
    batch.df.write.mode("append").parquet(path)
    return {"pid": os.getpid()}


# -- hand-off: Arrow IPC file in /dev/shm vs pickled rows over a pipe ------------------------

_READER = """
import os, pickle, sys, pyarrow as pa
inp, out = os.fdopen(0, "rb"), os.fdopen(1, "wb")
while True:
    line = inp.readline()
    if not line:
        break
    kind, arg = line.decode().split(" ", 1)
    if kind == "arrow":
        with pa.memory_map(arg.strip(), "r") as src:
            rows = pa.ipc.open_file(src).read_all().num_rows
    else:
        size = int(arg)
        rows = len(pickle.loads(inp.read(size)))
    out.write(f"{rows}\\n".encode()); out.flush()
"""


def bench_handoff(n: int, runs: int) -> dict[str, float]:
    table = records(n)
    rows = [tuple(r.values()) for r in table.to_pylist()]
    scratch = handoff.ScratchDir(handoff.default_handoff_root())
    scratch.create()
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert reader.stdin is not None and reader.stdout is not None
    arrow, pickled = [], []
    try:
        for _ in range(runs):
            began = time.perf_counter()
            path = handoff.write_table(table, scratch.new_path("bench", ".arrow"))
            reader.stdin.write(f"arrow {path}\n".encode())
            reader.stdin.flush()
            assert int(reader.stdout.readline()) == n
            arrow.append(time.perf_counter() - began)
            path.unlink()
            began = time.perf_counter()
            payload = pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
            reader.stdin.write(f"pickle {len(payload)}\n".encode() + payload)
            reader.stdin.flush()
            assert int(reader.stdout.readline()) == n
            pickled.append(time.perf_counter() - began)
    finally:
        reader.stdin.close()
        reader.wait()
        scratch.remove()
    return {
        "arrow": statistics.median(arrow),
        "pickle": statistics.median(pickled),
        "mbytes": table.nbytes / 1e6,
    }


# -- Spark writes ------------------------------------------------------------------------------


async def bench_writes(
    pool: ExecutorPool, sizes: list[int], reps: int, out: Path
) -> list[dict[str, float]]:
    warm = records(10_000)
    for how in ("batch_df", "arrow_df", "rows"):  # first use of each path: class loading, JIT
        await pool.run(
            "bench",
            "executor_bench:timed_write",
            warm,
            timeout=900,
            kwargs={"how": how, "path": str(out / f"warm-{how}")},
        )
    results = []
    for n in sizes:
        table = records(n)
        row: dict[str, float] = {"n": n}
        for how in ("batch_df", "arrow_df", "rows"):
            inside, total = [], []
            for i in range(reps):
                began = time.perf_counter()
                inside.append(
                    await pool.run(
                        "bench",
                        "executor_bench:timed_write",
                        table,
                        timeout=900,
                        kwargs={"how": how, "path": str(out / f"{how}-{n}-{i}")},
                    )
                )
                total.append(time.perf_counter() - began)
            row[how] = n / statistics.median(inside)
            row[f"{how}_total"] = n / statistics.median(total)
        times = []
        for i in range(reps):
            began = time.perf_counter()
            pq.write_table(table, out / f"pyarrow-{n}-{i}.parquet")
            times.append(time.perf_counter() - began)
        row["pyarrow"] = n / statistics.median(times)
        results.append(row)
    return results


# -- kills -------------------------------------------------------------------------------------


async def bench_kills(pool: ExecutorPool, kills: int, deadline: float) -> dict[str, list[float]]:
    late, inside, takeover = [], [], []
    for i in range(kills):
        await pool.wait_ready(2)
        fn = "hang_in_udf" if i % 2 else "hang_in_python"
        marker = Path(tempfile.mktemp(prefix="connectd-bench-"))
        called = time.monotonic()
        write = asyncio.create_task(
            pool.run("kill", f"{T}:{fn}", timeout=deadline, kwargs={"marker": str(marker)})
        )
        while not marker.exists() and not write.done():
            await asyncio.sleep(0.01)
        pid = pool.current_pid("kill")
        hung = tree(pid, scan(), session=pid) if pid else {}
        try:
            await write
        except WriteTimeout as exc:
            raised, raised_wall = time.monotonic(), time.time()
            found = re.search(r"in ([0-9.]+) s", str(exc))
            inside.append(float(found.group(1)) if found else float("nan"))
        else:
            raise AssertionError("the hung write returned")
        left = [
            p
            for p, s in hung.items()
            if (now := read_stat(p)) and now.starttime == s.starttime and now.running
        ]
        assert not left, f"still running: {left}"
        # Upper bound: the real deadline (from the executor's acknowledgement) is a bit later.
        late.append(raised - (called + deadline))
        got = await pool.run("next", f"{T}:whoami", timeout=30, acquire_timeout=30)
        takeover.append(got["at"] - raised_wall)
        marker.unlink(missing_ok=True)
    return {"late": late, "inside": inside, "takeover": takeover}


def tree_rss(pid: int) -> int:
    return sum(s.rss_bytes for s in tree(pid, scan(), session=pid).values())


async def bench_startup(cds: bool, runs: int, tmp: Path) -> list[float]:
    out = []
    for _ in range(runs):
        settings = PoolSettings(
            size=1,
            spares=0,
            spark_master="local[2]",
            spark_conf=SPARK_CONF,
            cds=cds,
            cds_build=False,
            work_dir=tmp,
        )
        async with ExecutorPool(settings) as pool:
            await pool.wait_ready(1, timeout=300)
            first = pool.snapshot()[0]
            out.append(first.startup_seconds or float("nan"))
    return out


async def bench_pool_start(runs: int, tmp: Path) -> list[dict[str, float]]:
    """A fresh pool with the daemon's defaults (1 executor + 1 spare, ``local[*]``) and a
    50k-record Parquet write submitted at once, as a daemon's first flush would be: seconds
    from ``start`` to the first executor ready, to that write's end, and to all executors
    ready; ``on_first`` is 1.0 when the write ran on the executor that was ready first."""
    table = records(50_000)
    out = []
    for i in range(runs):
        # cds_build=False: an archive build in the background would compete with the starts.
        settings = PoolSettings(work_dir=tmp / f"start-{i}", cds_build=False)
        began = time.monotonic()
        async with ExecutorPool(settings) as pool:
            lease = pool.submit(
                "first",
                "executor_bench:write_where",
                table,
                timeout=600,
                acquire_timeout=600,
                kwargs={"path": str(tmp / f"first-{i}")},
            )
            await pool.wait_ready(1, timeout=600)
            first = time.monotonic() - began
            ready = [
                e.pid
                for e in pool.snapshot()
                if e.state in (ExecutorState.IDLE, ExecutorState.BUSY)
            ]
            got = await lease.result()
            wrote = time.monotonic() - began
            await pool.wait_ready(settings.target, timeout=600)
            every = time.monotonic() - began
            cds = float(pool.snapshot()[0].uses_cds)
        out.append(
            {
                "first": first,
                "write": wrote,
                "all": every,
                "on_first": float(got["pid"] in ready),
                "cds": cds,
            }
        )
    return out


def _hog() -> subprocess.Popen[bytes]:
    """A CPU-bound Python loop at nice 0, standing in for the daemon converting records."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


async def bench_nice(reps: int, n: int, tmp: Path) -> dict[tuple[int, int], list[float]]:
    """One ``n``-record Spark write's end-to-end seconds, executors at nice 0 and 10, with 0, 1
    and 2 busy loops running beside them."""
    table = records(n)
    times: dict[tuple[int, int], list[float]] = {}
    for nice in (0, 10):
        settings = PoolSettings(spares=0, nice=nice, work_dir=tmp / f"nice-{nice}", cds_build=False)
        async with ExecutorPool(settings) as pool:
            await pool.wait_ready(1, timeout=600)
            for i in range(2):  # class loading, JIT
                await pool.run(
                    "w",
                    "executor_bench:timed_write",
                    table,
                    timeout=600,
                    kwargs={"how": "batch_df", "path": str(tmp / f"warm-{nice}-{i}")},
                )
            for hogs in (0, 1, 2):
                procs = [_hog() for _ in range(hogs)]
                try:
                    for i in range(reps):
                        began = time.perf_counter()
                        await pool.run(
                            "w",
                            "executor_bench:timed_write",
                            table,
                            timeout=600,
                            kwargs={"how": "batch_df", "path": str(tmp / f"n{nice}-{hogs}-{i}")},
                        )
                        times.setdefault((nice, hogs), []).append(time.perf_counter() - began)
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
    return times


async def only_start(runs: int) -> None:
    become_subreaper()
    print(f"pool start, {runs} runs; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="connectd-bench-") as tmp_name:
        rows = await bench_pool_start(runs, Path(tmp_name))
    for r in rows:
        print(
            f"  first ready {r['first']:.2f} s, first write done {r['write']:.2f} s"
            f" (on the first ready: {bool(r['on_first'])}), all ready {r['all']:.2f} s"
            f" (class-data sharing: {bool(r['cds'])})"
        )
    for key, label in (("first", "first ready"), ("write", "first write done"), ("all", "all")):
        print(f"  median {label}: {statistics.median(r[key] for r in rows):.2f} s")
    print(f"  load after: {os.getloadavg()[0]:.1f}")


async def only_nice(reps: int) -> None:
    become_subreaper()
    n = 50_000
    print(f"{n:,}-record write, median of {reps}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="connectd-bench-") as tmp_name:
        times = await bench_nice(reps, n, Path(tmp_name))
    for hogs in (0, 1, 2):
        cells = [
            f"nice {nice}: {statistics.median(times[nice, hogs]):.3f} s"
            f" ({', '.join(f'{t:.2f}' for t in times[nice, hogs])})"
            for nice in (0, 10)
        ]
        print(f"  {hogs} busy loop(s): {';  '.join(cells)}")


async def only_writes(sizes: list[int], reps: int = 3) -> None:
    """ParquetSink's own write function (``write_staged``: Spark reads the handed-off batch and
    writes Parquet into a staging directory) by batch size: what one flush costs the executor,
    from the pool's submit to its answer (hand-off included), median of ``reps``."""
    become_subreaper()
    fn = "daemon.connectors.parquet.write:write_staged"
    print(f"one ParquetSink write by size, median of {reps}; load {os.getloadavg()[0]:.1f}")
    settings = PoolSettings(size=1, spares=0, spark_master="local[2]", spark_conf=SPARK_CONF)
    with tempfile.TemporaryDirectory(prefix="connectd-bench-") as tmp_name:
        out = Path(tmp_name)
        async with ExecutorPool(settings) as pool:
            await pool.wait_ready(1)
            kwargs = {"path": str(out / "warm")}
            await pool.run("bench", fn, records(10_000), timeout=900, kwargs=kwargs)
            for n in sizes:
                table, took, inside = records(n), [], []
                for i in range(reps):
                    began = time.perf_counter()
                    kwargs = {"path": str(out / f"w-{n}-{i}")}
                    got = await pool.run("bench", fn, table, timeout=900, kwargs=kwargs)
                    took.append(time.perf_counter() - began)
                    inside.append(float(got["seconds"]))
                t = statistics.median(took)
                print(
                    f"  {n:>9,} records: {t:.2f} s ({statistics.median(inside):.2f} s in Spark),"
                    f" {n / t:,.0f} records/s, {t / n * 1e6:.1f} µs per record"
                )
    print(f"  load after: {os.getloadavg()[0]:.1f}")


async def main(quick: bool) -> None:
    become_subreaper()
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 500_000]
    reps = 3 if quick else 5
    kills = 5 if quick else 20
    print(
        f"connectd executor benchmark ({'quick' if quick else 'full'}); {os.cpu_count()} CPUs,"
        f" load {os.getloadavg()[0]:.1f}"
    )

    h = bench_handoff(100_000, 5)
    print(f"\nHand-off of a 100k-record batch ({h['mbytes']:.0f} MB in Arrow), median of 5:")
    shm = handoff.default_handoff_root()
    print(f"  Arrow IPC file in {shm} (write + mmap read):  {h['arrow']:.3f} s")
    print(f"  pickled Python rows over a pipe (dumps + send + loads): {h['pickle']:.3f} s")

    with tempfile.TemporaryDirectory(prefix="connectd-bench-") as tmp_name:
        tmp = Path(tmp_name)
        settings = PoolSettings(
            size=1, spares=1, spark_master="local[2]", spark_conf=SPARK_CONF, work_dir=tmp / "work"
        )
        began = time.monotonic()
        async with ExecutorPool(settings) as pool:
            await pool.wait_ready(2, timeout=600)
            ready = time.monotonic() - began
            archive = await pool.build_archive()  # built once per JDK + Spark + settings
            cds = "with" if pool.snapshot()[0].uses_cds else "without"
            print(f"\nPool of 1 + 1 spare ready in {ready:.1f} s ({cds} class-data sharing);")
            print(f"class-data-sharing archive: {archive or 'none'}")
            await asyncio.sleep(pool.settings.sample_interval + 1)
            await pool.wait_ready(2, timeout=600)
            rss = [tree_rss(e.pid) for e in pool.snapshot()]
            mib = min(rss) / 2**20
            print(f"RSS of one idle executor tree (Python + JVM + PySpark workers): {mib:.0f} MiB")

            out = tmp / "out"
            await pool.run(
                "w",
                f"{T}:write_parquet",
                records(1000),
                timeout=300,
                kwargs={"path": str(out / "warm")},
            )
            rows = await bench_writes(pool, sizes, reps, out)
            print(
                f"\nSpark write throughput per executor, records/s ({RECORD_BYTES}-byte records,"
                f" Parquet, local[2], median of {reps}); inside the executor [end to end]:"
            )
            head = ("batch", "batch.df (Parquet in RAM)", "createDataFrame(Arrow)", "Python rows")
            print(f"  {head[0]:>7}  {head[1]:>26}  {head[2]:>22}  {head[3]:>11}", end="")
            print(f"  {'pyarrow alone':>13}")
            for r in rows:
                df, arrow = r["batch_df"], r["arrow_df"]
                print(
                    f"  {r['n']:>7,.0f}  {df:>15,.0f} [{r['batch_df_total']:>8,.0f}]"
                    f"  {arrow:>11,.0f} [{r['arrow_df_total']:>8,.0f}]"
                    f"  {r['rows']:>11,.0f}  {r['pyarrow']:>13,.0f}"
                )

            k = await bench_kills(pool, kills, deadline=3.0)
            print(
                f"\nKills ({kills} hung writes; a sleeping UDF and a blocked Python call in turn):"
            )
            for label, key in (
                ("deadline → tree gone (upper bound)", "late"),
                ("kill + reap + /proc confirm, in the pool", "inside"),
                ("WriteTimeout → next write running on the spare", "takeover"),
            ):
                v = k[key]
                print(f"  {label:<48} median {statistics.median(v):.3f} s, max {max(v):.3f} s")

        cold = await bench_startup(False, 1 if quick else 2, tmp / "cold")
        warm = await bench_startup(True, 1 if quick else 2, tmp / "cds")
        print("\nExecutor start-up (spawn → session ready, warm-up write done):")
        print(f"  without class-data sharing: {', '.join(f'{s:.1f}' for s in cold)} s")
        print(f"  with the AppCDS archive:    {', '.join(f'{s:.1f}' for s in warm)} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, fewer repetitions")
    parser.add_argument("--start", type=int, metavar="RUNS", help="only time pool starts")
    parser.add_argument("--nice", type=int, metavar="REPS", help="only time writes by niceness")
    parser.add_argument("--writes", metavar="N,N,...", help="only time ParquetSink writes by size")
    args = parser.parse_args()
    if args.start:
        asyncio.run(only_start(args.start))
    elif args.nice:
        asyncio.run(only_nice(args.nice))
    elif args.writes:
        asyncio.run(only_writes([int(n) for n in args.writes.split(",")]))
    else:
        asyncio.run(main(args.quick))
