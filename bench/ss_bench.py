"""connectd against Spark Structured Streaming on the same data, side by side in one run.

    make bench-ss                          # 1M records, 3 runs (QUICK=1: 200k, 1 run)
    .venv/bin/python bench/ss_bench.py --bootstrap 127.0.0.1:9092 --records 1000000 --runs 3
    .venv/bin/python bench/ss_bench.py --runs 1 --only ss-json,connectd-json-1 \\
        --connector-prop flush.interval.ms=1000 --worker-prop executor.pool.spares=0
    .venv/bin/python bench/ss_bench.py --runs 1 --only ss-json,connectd-json-1 \\
        --spark-master spark://127.0.0.1:7077        # both on a cluster (make spark-up)
    .venv/bin/python bench/ss_bench.py --runs 1 \\
        --only connectd-json-1,connectd-delta-1,ss-json,ss-delta   # Delta tables (make jars)
    .venv/bin/python bench/ss_bench.py --runs 1 \\
        --only connectd-json-1,connectd-delta-1,ss-delta,connectd-iceberg-1   # and Iceberg

Two topics of ``--records`` records in 3 partitions are produced once: ~200-byte JSON objects
of 6 flat fields, and 200 opaque bytes. Each run starts every variant as its own process tree,
the way a user starts it, and times it from launch: Spark SS (bench/ss/ss_job.py: Kafka source,
``from_json`` with an explicit schema, Parquet sink, ``Trigger.AvailableNow``, ``local[2]``)
and ``connectd standalone`` with a ParquetSink (1 task, 3 tasks, and the bytes value with 1
task). Each table is checked (rows == distinct (partition, offset) == produced, typed columns
for JSON) before any of its numbers is printed. bench/README.md says what each figure means.
``--spark-master spark://...`` runs both engines on that Spark cluster instead of ``local[2]``
(one core per application by default); its executors, under the cluster's workers on this
machine, are sampled with each run. The Delta variants (issue 18) write the JSON records into a
Delta table: the SS job with ``format("delta")``, connectd with DeltaSink; both load the same
Delta jars and session settings (``daemon.executor.formats``), and the table is read back with
delta-rs. ``connectd-iceberg-1`` writes them with IcebergSink into an Iceberg table of a Hadoop
catalog (no SS counterpart), read back from its metadata, manifests and data files.
``connectd-json-1-ucu`` is ``connectd-json-1`` run ``--until-caught-up`` (it exits by itself
once every partition's end at launch is committed, as the SS job's AvailableNow does), and
``floor-json`` the no-Spark floor (bench/ss/floor_job.py: aiokafka and pyarrow in one process,
no exactly-once), so every run shows the gap to it (issue 32). ``--only
ss-wide,connectd-wide-1,floor-wide`` runs the three on a wide JSON shape (10 flat fields, ~300
bytes: bench/ss/tables.py ``WIDE_FIELDS``), produced for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ss.tables import PARTITIONS, RECORD_BYTES, produce
from ss.tree import become_subreaper
from ss.variants import VARIANTS, BenchFailed, Settings, cluster_workers, median, run

from daemon.executor import formats

REPO = Path(__file__).resolve().parent.parent
SPARK_KAFKA_VERSION = "4.1.1"

#: (result key, column title, format)
FIGURES = (
    ("all_s", "all rows s", "{:.1f}"),
    ("first_s", "first row s", "{:.1f}"),
    ("steady_rps", "steady rec/s", "{:,.0f}"),
    ("cpu_s_per_m", "CPU s/M rec", "{:.1f}"),
    ("peak_rss_mb", "peak RSS MB", "{:,.0f}"),
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def kafka_jars() -> list[Path]:
    """The Kafka source's jars, resolved from Maven Central once into .cache/ (bench/ss/pom.xml)."""
    jars = REPO / ".cache" / f"spark-sql-kafka-{SPARK_KAFKA_VERSION}" / "jars"
    if not (jars / ".complete").exists():
        mvn = shutil.which("mvn")
        if not mvn:
            raise BenchFailed("mvn not found: install Maven (Debian/Ubuntu: apt-get install maven)")
        partial = jars.with_name("jars.partial")
        shutil.rmtree(partial, ignore_errors=True)
        log(f"resolving spark-sql-kafka-0-10 {SPARK_KAFKA_VERSION} from Maven Central into {jars}")
        cmd = [mvn, "-q", "-B", "-f", str(REPO / "bench" / "ss" / "pom.xml")]
        cmd += [f"-Dspark.version={SPARK_KAFKA_VERSION}", "dependency:copy-dependencies"]
        cmd += [f"-DoutputDirectory={partial}"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0 or not list(partial.glob("spark-sql-kafka-*.jar")):
            sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
            raise BenchFailed(f"could not resolve spark-sql-kafka {SPARK_KAFKA_VERSION} (above)")
        (partial / ".complete").write_text(f"spark-sql-kafka {SPARK_KAFKA_VERSION}\n")
        shutil.rmtree(jars, ignore_errors=True)
        partial.rename(jars)
    return sorted(jars.glob("*.jar"))


def fmt(key: str, value: float | None) -> str:
    if value is None:
        return "-"
    return next(f for k, _, f in FIGURES if k == key).format(value)


def run_line(i: int, key: str, r: dict[str, Any]) -> str:
    line = f"run {i + 1} {key}: " + ", ".join(f"{k} {fmt(k, r[k])}" for k, _, _ in FIGURES)
    line += f"; {r['commits']} commits, {r['files']} files, {r['processes']} processes"
    line += f", load {r['load'][0]}-{r['load'][1]}"
    if "executors_ready_s" in r:
        line += f"; executors ready at {r['executors_ready_s']} s"
    if r.get("cpu_cluster_s"):
        line += f"; CPU s on the cluster's executors {r['cpu_cluster_s']:.1f}"
    if "exit_s" in r:
        line += f"; exited at {r['exit_s']:.1f} s"
    if "batch_start_s" in r:
        line += f"; first batch began at {r['batch_start_s']:.1f} s"
    if "iceberg_versions" in r:
        line += f"; Iceberg: {r['iceberg_versions']} metadata versions, main moved"
        line += f" {r['iceberg_main_moves']} times, branches left {r['iceberg_branches']}"
        line += f", {r['orphan_files']} orphan files"
    if "delta_versions" in r:
        line += f"; Delta: {r['delta_versions']} versions {r['delta_operations']}"
        line += f", {r['delta_checkpoints']} checkpoints, {r['orphan_files']} orphan files"
    if r.get("commit_costs"):
        costs = ", ".join(f"{n:,}/{t:.2f}/{x:.2f}" for n, t, x in r["commit_costs"])
        side = "addBatch" if key.startswith("ss-") else "executor"
        line += f"; commits (records/s/{side} s) {costs}"
    return line


def report(
    results: dict[str, list[dict[str, Any]]], n: int, runs: int, master: str
) -> dict[str, Any]:
    print(
        f"\n{n:,} records ({RECORD_BYTES} B values, {PARTITIONS} partitions), median of {runs} "
        f"run{'s' if runs > 1 else ''}, Spark master {master}; 'x P': the variant's median over"
        " P's, same data, same run"
    )
    print(f"{'':<22}" + "".join(f"{title:>14}" for _, title, _ in FIGURES))
    medians: dict[str, dict[str, float | None]] = {}
    for v in VARIANTS:
        if not results.get(v.key):
            continue
        m = medians[v.key] = {k: median([r[k] for r in results[v.key]]) for k, _, _ in FIGURES}
        print(f"{v.key:<22}" + "".join(f"{fmt(k, m[k]):>14}" for k, _, _ in FIGURES))
        for peer in v.references:
            ref = medians.get(peer)
            if not ref:
                continue
            cells = []
            for k, _, _ in FIGURES:
                a, b = m[k], ref[k]
                cells.append(f"{a / b:.2f}x" if a is not None and b else "-")
            print(f"{'  x ' + peer:<22}" + "".join(f"{c:>14}" for c in cells))
    one = medians.get("connectd-json-1")
    for key, what in (
        ("connectd-json-3", "3 tasks"),
        ("connectd-json-3-2w", "3 tasks on 2 workers"),
    ):
        many = medians.get(key)
        if one and many and one["all_s"] and many["all_s"]:
            speed = one["all_s"] / many["all_s"]
            print(f"connectd {what} against 1 task, launch → all rows: {speed:.2f}x the speed")
    return medians


def cluster_conf(args: argparse.Namespace) -> dict[str, str]:
    """What each application (the SS job, each connectd executor) sets on a cluster master:
    a driver that the cluster's executors reach on loopback (this machine's own cluster), and
    its share of the cluster. None with a local master."""
    if args.spark_master.startswith("local"):
        return {}
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.cores.max": str(args.spark_cores_max),
        "spark.executor.cores": "1",
        "spark.executor.memory": args.spark_executor_memory,
    }


@contextlib.contextmanager
def schema_registry(wanted: bool) -> Iterator[tuple[str, int | None]]:
    """A Schema Registry of this run's own (dev/registry/registryctl.py, tracked by PID and
    stopped at the end) when an Avro variant runs: its URL and PID, else ("", None)."""
    if not wanted:
        yield "", None
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev" / "registry"))
    import registryctl  # type: ignore[import-not-found]

    run_dir = Path(tempfile.mkdtemp(prefix="ss-bench-registry-"))
    registry = registryctl.up(registryctl.free_port(), run_dir, die_with_parent=True)
    try:
        yield str(registry.url), int(registry.pid)
    finally:
        registryctl.down(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--only",
        help="comma-separated variants: "
        + ",".join(v.key for v in VARIANTS)
        + " (default: all but the table formats' ones)",
    )
    p.add_argument(
        "--json-mode",
        choices=("fields", "infer"),
        default="fields",
        help="connectd's JsonConverter: fields= with the types (the SS job's schema) or infer",
    )
    p.add_argument("--connector-prop", action="append", default=[], metavar="K=V")
    p.add_argument("--worker-prop", action="append", default=[], metavar="K=V")
    p.add_argument("--topics", metavar="JSON,BYTES", help="reuse topics of exactly --records")
    p.add_argument("--timeout", type=float, default=600, help="seconds per variant run")
    p.add_argument("--scratch", type=Path, help="where tables go (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep each run's table and logs")
    p.add_argument("--json", type=Path, help="write every run's raw numbers here")
    p.add_argument(
        "--spark-master",
        default="local[2]",
        metavar="URL",
        help="both engines' Spark master, e.g. spark://127.0.0.1:7077 (make spark-up)",
    )
    p.add_argument("--spark-cores-max", type=int, default=1, help="with a cluster master")
    p.add_argument("--spark-executor-memory", default="512m", help="with a cluster master")
    args = p.parse_args()
    named = args.only.split(",") if args.only else None
    chosen = [v for v in VARIANTS if (v.key in named if named else v.by_default)]
    if args.only and len(chosen) != len(args.only.split(",")):
        p.error(f"--only: variants are {', '.join(v.key for v in VARIANTS)}")

    become_subreaper()
    jars = kafka_jars() if any(v.engine == "ss" for v in chosen) else []
    delta_jars: list[Path] = []
    if any(v.sink == "delta" for v in chosen):
        try:
            formats.require_jars(["delta"])
        except formats.JarsMissing as e:
            p.error(str(e))
        delta_jars = formats.jar_paths(["delta"])
    if any(v.sink == "iceberg" for v in chosen):
        try:
            formats.require_jars(["iceberg"])  # connectd's executors load it
        except formats.JarsMissing as e:
            p.error(str(e))
    kinds = sorted({v.kind for v in chosen})
    with schema_registry("avro" in kinds) as (registry_url, registry_pid):
        others = [registry_pid] if registry_pid is not None else []
        return _main(p, args, chosen, kinds, jars, delta_jars, registry_url, others)


def _main(
    p: argparse.ArgumentParser,
    args: argparse.Namespace,
    chosen: list[Any],
    kinds: list[str],
    jars: list[Path],
    delta_jars: list[Path],
    registry_url: str,
    others: list[int],
) -> int:
    # Avro topics are produced each time: their schema ids are this run's registry's.
    given = dict(zip(("json", "bytes"), args.topics.split(","), strict=True)) if args.topics else {}
    topics = {k: given[k] for k in kinds if k in given}
    for kind in kinds:
        if kind not in topics:
            t0 = time.perf_counter()
            topics[kind] = asyncio.run(produce(args.bootstrap, args.records, kind, registry_url))
            took = time.perf_counter() - t0
            log(f"produced {args.records:,} {kind} records into {topics[kind]} in {took:.1f} s")

    workers: list[int] = []
    if args.spark_master.startswith("spark://"):
        # The cluster's executor JVMs are its workers' children: sampled with each run's tree.
        workers = cluster_workers(args.spark_master)
        if not workers:
            p.error(f"--spark-master {args.spark_master}: no worker of it runs on this machine")
        log(f"{args.spark_master}: workers {workers} (their executors are sampled with each run)")
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="ss-bench-"))
    settings = Settings(
        bootstrap=args.bootstrap,
        records=args.records,
        scratch=scratch,
        jars=jars,
        timeout_s=args.timeout,
        json_mode=args.json_mode,
        connector_props=args.connector_prop,
        worker_props=args.worker_prop,
        spark_master=args.spark_master,
        spark_conf=cluster_conf(args),
        cluster_workers=workers,
        delta_jars=delta_jars,
        delta_conf=formats.table_format("delta").conf,
        registry_url=registry_url,
        others=others,
    )
    results: dict[str, list[dict[str, Any]]] = {v.key: [] for v in chosen}
    try:
        for i in range(args.runs):
            for v in chosen:
                run_dir = scratch / f"run{i + 1}-{v.key}"
                r = run(v, settings, topics[v.kind], run_dir)
                results[v.key].append(r)
                log(run_line(i, v.key, r))
                if not args.keep:
                    shutil.rmtree(run_dir)
    except BenchFailed as e:
        print(f"\nFAILED: {e}\n(scratch kept: {scratch})", file=sys.stderr)
        return 1
    medians = report(results, args.records, args.runs, args.spark_master)
    if args.json:
        doc = {
            "records": args.records,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "runs": args.runs,
            "topics": topics,
            "json_mode": args.json_mode,
            "connector_props": args.connector_prop,
            "worker_props": args.worker_prop,
            "spark_master": args.spark_master,
            "spark_conf": settings.spark_conf,
            "results": results,
            "medians": medians,
        }
        args.json.write_text(json.dumps(doc, indent=1))
    if not args.keep and not args.scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
