"""One run of one variant: start it as a user does, wait for its rows, stop it, check, measure.

Spark SS runs ``python bench/ss/ss_job.py`` (pyspark starts its own JVM through spark-submit)
and ends by itself (``Trigger.AvailableNow``). connectd runs ``connectd standalone
worker.properties connector.properties`` and is ended by SIGTERM once its commit log holds
every produced record. Variants with ``sink="delta"`` write a Delta table (the SS job with
``format("delta")``, connectd with DeltaSink), whose progress comes from its transaction log
(delta.py) and whose rows are checked with delta-rs. ``sink="iceberg"`` (connectd only) writes
an Iceberg table of a Hadoop catalog in the run's directory with IcebergSink, whose progress
and rows come from its metadata files (iceberg.py).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ss.delta import DeltaLogReader, check_delta_table
from ss.iceberg import IcebergReader, check_iceberg_table, connector_name, sink_props
from ss.tables import JSON_FIELDS, WIDE_FIELDS, CommitLogReader, check_table, spark_metadata
from ss.tree import Tree

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
PORTS = range(18100, 18200)
_ports = itertools.cycle(PORTS)


class BenchFailed(Exception):
    """A run that did not produce the table it should have: the message says what differs."""


@dataclass(frozen=True)
class Variant:
    key: str
    engine: str  # "ss" | "connectd" | "floor" (``floor_job.py``: aiokafka + pyarrow, no Spark)
    kind: str  # "json" | "bytes" | "avro"
    tasks: int = 1
    sink: str = "parquet"  # "parquet" | "delta" | "iceberg"
    #: The variants this one's ratios are taken against, when not the SS one of its kind.
    peers: tuple[str, ...] = ()
    #: Run without ``--only``. The table formats' variants need their jars (``make jars``) and
    #: are asked for by name, so ``make bench-ss`` stays what it was.
    by_default: bool = True
    #: Connect transforms the connector runs (issue 30), and the table's typed columns then.
    transforms: Mapping[str, str] = field(default_factory=dict)
    #: connectd runs ``--until-caught-up`` and exits by itself, as the SS job does.
    until_caught_up: bool = False
    typed: Mapping[str, str] | None = None
    #: ``connectd distributed`` workers on this machine sharing the connector's tasks (one
    #: process each: ``workers.py``); 1 is one ``connectd standalone``.
    workers: int = 1

    @property
    def columns(self) -> Mapping[str, str] | None:
        """The value columns and types the table must have (None: not checked)."""
        if self.typed is not None:
            return self.typed
        if self.kind == "wide":
            return WIDE_FIELDS
        return JSON_FIELDS if self.kind in ("json", "avro") else None

    @property
    def references(self) -> tuple[str, ...]:
        if self.peers:
            return self.peers
        return (f"ss-{self.kind}",) if self.engine != "ss" else ()


#: InsertField, ReplaceField, MaskField, Cast and a Filter with a predicate (that drops no
#: record: the table check counts every offset), as a Connect connector configures them.
CHAIN = {
    "transforms": "ins,slim,mask,cast,keep",
    "transforms.ins.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.ins.topic.field": "src",
    "transforms.ins.offset.field": "off",
    "transforms.slim.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.slim.exclude": "note",
    "transforms.slim.renames": "user:customer",
    "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
    "transforms.mask.fields": "customer",
    "transforms.mask.replacement": "***",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.cast.spec": "ok:string,ts:int32",
    "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.keep.predicate": "marked",
    "predicates": "marked",
    "predicates.marked.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    "predicates.marked.name": "drop-me",
}
CHAIN_COLUMNS = {
    "id": "int64",
    "customer": "string",
    "amount": "double",
    "ok": "string",
    "ts": "int32",
    "src": "string",
    "off": "int64",
}

VARIANTS = (
    Variant("ss-json", "ss", "json"),
    Variant("connectd-json-1", "connectd", "json", 1),
    Variant("connectd-json-3", "connectd", "json", 3),
    # One worker per core: the tasks of one connector spread over two processes by Kafka's
    # group coordinator (issue 32 item 5).
    Variant(
        "connectd-json-3-2w",
        "connectd",
        "json",
        3,
        workers=2,
        peers=("ss-json", "connectd-json-1"),
        by_default=False,
    ),
    # Issue 32: the same connector run until caught up (it exits by itself, as SS's
    # AvailableNow does), and the no-Spark floor: aiokafka and pyarrow in one process.
    Variant("connectd-json-1-ucu", "connectd", "json", 1, until_caught_up=True),
    Variant("floor-json", "floor", "json", peers=("ss-json", "connectd-json-1")),
    # Issue 32: a wide JSON shape (10 fields, ~300 bytes), each engine and the floor.
    Variant("ss-wide", "ss", "wide", by_default=False),
    Variant("connectd-wide-1", "connectd", "wide", 1, by_default=False),
    Variant("floor-wide", "floor", "wide", peers=("ss-wide", "connectd-wide-1"), by_default=False),
    # Issue 30: five common transforms against the same connector without them.
    Variant(
        "connectd-json-chain",
        "connectd",
        "json",
        1,
        peers=("connectd-json-1",),
        transforms=CHAIN,
        typed=CHAIN_COLUMNS,
        by_default=False,
    ),
    # Issue 31: the JSON records in Avro through a Schema Registry, against the JSON ones.
    Variant("connectd-avro-1", "connectd", "avro", 1, peers=("connectd-json-1",), by_default=False),
    Variant("ss-bytes", "ss", "bytes"),
    Variant("connectd-bytes-1", "connectd", "bytes", 1),
    # Table formats (issue 18): the JSON records into a Delta table.
    Variant("ss-delta", "ss", "json", sink="delta", peers=("ss-json",), by_default=False),
    Variant(
        "connectd-delta-1",
        "connectd",
        "json",
        1,
        sink="delta",
        peers=("ss-delta", "connectd-json-1"),
        by_default=False,
    ),
    # After the Delta ones: its ratios are printed against variants already reported.
    Variant(
        "connectd-iceberg-1",
        "connectd",
        "json",
        1,
        sink="iceberg",
        peers=("connectd-json-1", "connectd-delta-1", "ss-delta"),
        by_default=False,
    ),
)
CONNECTOR_CLASS = {"parquet": "ParquetSink", "delta": "DeltaSink", "iceberg": "IcebergSink"}


@dataclass
class Settings:
    bootstrap: str
    records: int
    scratch: Path
    jars: Sequence[Path]
    timeout_s: float
    json_mode: str  # "fields" | "infer"
    connector_props: Sequence[str]
    worker_props: Sequence[str]
    stop_grace_s: float = 60.0
    #: Both engines' Spark master; with a cluster's, ``spark_conf`` holds what each
    #: application needs there (driver address, cores, executor memory).
    spark_master: str = "local[2]"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    #: That cluster's workers on this machine: the executor JVMs they start are sampled too.
    cluster_workers: Sequence[int] = ()
    #: Delta's jars and session settings: what connectd's executors load for
    #: ``executor.spark.formats=delta``, given to the SS job for its Delta variant.
    delta_jars: Sequence[Path] = ()
    delta_conf: Mapping[str, str] = field(default_factory=dict)
    #: The Schema Registry the Avro variants read (started by ss_bench.py when one runs).
    registry_url: str = ""
    #: The bench's processes serving the runs (the registry's JVM): kept out of each tree.
    others: Sequence[int] = ()


def cluster_workers(master: str) -> list[int]:
    """PIDs of the Spark standalone workers on this machine registered with ``master``
    (``spark://host:port``): their command line names Spark's Worker class and that URL."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.deploy.worker.Worker" in argv and master.encode() in argv:
            out.append(int(entry))
    return sorted(out)


def free_port() -> int:
    for _ in PORTS:
        port = next(_ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BenchFailed(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


def _props(path: Path, values: dict[str, str], overrides: Sequence[str]) -> None:
    for kv in overrides:
        k, sep, v = kv.partition("=")
        if not sep:
            raise SystemExit(f"{kv!r}: a property override is key=value")
        values[k.strip()] = v.strip()
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


def connectd_files(v: Variant, s: Settings, topic: str, run_dir: Path) -> tuple[Path, Path, Path]:
    """worker.properties, connector.properties, and the table directory of one run."""
    table = run_dir / "table"
    worker = run_dir / "worker.properties"
    connector = run_dir / "connector.properties"
    values = {
        "bootstrap.servers": s.bootstrap,
        "listeners": f"http://127.0.0.1:{free_port()}",
        "state.dir": str(run_dir / "state"),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        # The same Spark as the SS job (local[2] unless --spark-master), no UI; pool size and
        # spares are defaults.
        "executor.spark.master": s.spark_master,
        "executor.spark.conf.spark.ui.enabled": "false",
        "log.level": "INFO",
    }
    values.update({f"executor.spark.conf.{k}": v for k, v in s.spark_conf.items()})
    if not s.spark_master.startswith("local"):
        # The table is a local path: the bench's cluster runs its workers on this host.
        values["executor.spark.local.paths.shared"] = "true"
    if v.sink != "parquet":
        # Every executor starts with the format's jars and settings: no executor is replaced
        # at the first write (the default loads a format when a write first asks for it).
        values["executor.spark.formats"] = v.sink
    _props(worker, values, s.worker_props)
    conn = {
        # A new name each run: a new consumer group, whose offsets cannot skip the topic.
        "name": f"bench-{v.key}-{uuid.uuid4().hex[:6]}",
        "connector.class": CONNECTOR_CLASS[v.sink],
        "topics": topic,
        "tasks.max": str(v.tasks),
    }
    if v.sink == "iceberg":
        props, table = sink_props(run_dir / "warehouse")
        conn.update(props)
    else:
        conn["path"] = str(table)
    if v.kind in ("json", "wide"):
        conn["value.converter"] = "org.apache.kafka.connect.json.JsonConverter"
        conn["value.converter.schemas.enable"] = "false"
        if s.json_mode == "fields":
            fields = v.columns or {}
            conn["value.converter.fields"] = ",".join(f"{k}:{t}" for k, t in fields.items())
        else:
            conn["value.converter.mode"] = "infer"
    elif v.kind == "avro":
        conn["value.converter"] = "io.confluent.connect.avro.AvroConverter"
        conn["value.converter.schema.registry.url"] = s.registry_url
    else:
        conn["value.converter"] = "org.apache.kafka.connect.converters.ByteArrayConverter"
    conn.update(v.transforms)
    _props(connector, conn, s.connector_props)
    return worker, connector, table


_READY = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*executor \d+ ready in ")
#: A task's commit line: ParquetSink "... in F files, 0.52 s (write 0.48 s)", DeltaSink
#: "... into T, 1.10 s (job 1.05 s)": the commit as the task waited for it, and the
#: executor's part of it.
_COMMITTED = re.compile(r": committed (\d+) records .*, ([\d.]+) s \((?:write|job) ([\d.]+) s\)$")


def executors_ready(log: Path, started: float) -> list[float]:
    """Seconds from launch to each "executor N ready" line of connectd's text log (local time,
    as logging's default formatter writes it)."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if m := _READY.match(line):
            t = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append(round(t - started, 1))
    return out


def commit_costs(log: Path) -> list[tuple[int, float, float]]:
    """(records, seconds, executor seconds) of every commit connectd's log reports, in order."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if m := _COMMITTED.search(line):
            out.append((int(m[1]), float(m[2]), float(m[3])))
    return out


def _deadline_passed(began: float, s: Settings, what: str, tree: Tree) -> None:
    if time.monotonic() - began > s.timeout_s:
        tree.stop(s.stop_grace_s)
        raise BenchFailed(f"{what}: not done after {s.timeout_s:.0f} s (log: {tree.log_path})")


def run_connectd(v: Variant, s: Settings, topic: str, run_dir: Path) -> dict[str, Any]:
    worker, connector, table = connectd_files(v, s, topic, run_dir)
    until = ["--until-caught-up"] if v.until_caught_up else []
    argv = [str(BIN / "connectd"), "standalone", *until, str(worker), str(connector)]
    if v.workers > 1:
        launcher = [sys.executable, str(HERE / "workers.py"), "--workers", str(v.workers)]
        argv = [*launcher, "--connectd", str(BIN / "connectd"), str(worker), str(connector)]
    tree = Tree(
        argv,
        run_dir / "connectd.log",
        outside=s.cluster_workers,
        others=s.others,
    )
    reader: DeltaLogReader | IcebergReader | CommitLogReader
    if v.sink == "delta":
        reader = DeltaLogReader(table)
    elif v.sink == "iceberg":
        reader = IcebergReader(table, connector_name(connector))
    else:
        reader = CommitLogReader(table)
    began = time.monotonic()
    tree.launch()
    while v.until_caught_up and tree.alive():  # it exits once caught up
        _deadline_passed(began, s, v.key, tree)
        time.sleep(0.1)
    exited = time.time()
    while reader.poll() < s.records:
        if not tree.alive():
            tree.stop(s.stop_grace_s)
            raise BenchFailed(
                f"{v.key}: connectd exited ({tree.returncode}) with {reader.rows} of "
                f"{s.records} rows committed (log: {tree.log_path})"
            )
        _deadline_passed(began, s, v.key, tree)
        time.sleep(0.1)
    term = time.time()
    notes = tree.stop(s.stop_grace_s)
    stopped = time.time()
    stats = tree.stats()
    problems = [] if tree.returncode == 0 else [f"exit code {tree.returncode} after SIGTERM"]
    problems += notes
    if isinstance(reader, IcebergReader):
        found, orphans = check_iceberg_table(reader, s.records, typed=v.columns)
        problems += found
        extra = {**reader.summary(), "orphan_files": orphans}
    else:
        delta = reader if isinstance(reader, DeltaLogReader) else None
        extra = _check(v, table, reader.files, delta, s.records, problems)
    if problems:
        raise BenchFailed(f"{v.key}: " + "; ".join(problems) + f" (log: {tree.log_path})")
    (t_first, rows_first), (t_last, _) = reader.commits[0], reader.commits[-1]
    steady = (s.records - rows_first) / (t_last - t_first) if t_last > t_first else None
    return {
        "all_s": t_last - tree.started,
        "first_s": t_first - tree.started,
        "steady_rps": steady,
        "cpu_s_per_m": stats.cpu_s / (s.records / 1e6),
        "peak_rss_mb": stats.peak_rss_mb,
        "commits": len(reader.commits),
        "files": len(reader.files),
        "stop_s": stopped - term,
        **({"exit_s": exited - tree.started} if v.until_caught_up else {}),
        "executors_ready_s": executors_ready(tree.log_path, tree.started),
        **_tree_figures(stats),
        "commit_costs": commit_costs(tree.log_path),
        **extra,
    }


def _check(
    v: Variant,
    table: Path,
    files: list[str],
    delta: DeltaLogReader | None,
    n: int,
    problems: list[str],
) -> dict[str, Any]:
    """Adds what differs between the table and the topic to ``problems`` (``files``: the data
    files the sink's log lists); returns what the run's record keeps of a Delta table's log
    (commits by kind, checkpoints, Parquet files on disk that are no part of the table)."""
    typed = v.columns
    if delta is not None:
        found, orphans = check_delta_table(table, files, n, typed=typed)
        problems += found
        return {**delta.summary(), "orphan_files": orphans}
    problems += check_table(
        table,
        files,
        n,
        partition_col="kafka_partition",
        offset_col="kafka_offset",
        typed=typed,
    )
    return {}


def _tree_figures(stats: Any) -> dict[str, Any]:
    """A run's process tree's CPU (and how it was counted) and its processes."""
    return {
        "cpu_s": stats.cpu_s,
        "cpu_sampled_s": stats.cpu_sampled_s,
        "cpu_rusage_s": stats.cpu_rusage_s,
        "cpu_cluster_s": stats.cpu_outside_s,
        "processes": stats.processes,
        "by_process": stats.by_process,
    }


def _run_to_exit(
    argv: list[str], log: Path, v: Variant, s: Settings
) -> tuple[Tree, float, Any, list[str]]:
    """Launch ``argv`` as a tree, wait for it to exit by itself (within the run's deadline);
    the tree, its exit's time, its figures, and what went wrong (exit code, stop notes)."""
    tree = Tree(argv, log, outside=s.cluster_workers, others=s.others)
    began = time.monotonic()
    tree.launch()
    while tree.alive():
        _deadline_passed(began, s, v.key, tree)
        time.sleep(0.1)
    exited = time.time()
    notes = tree.stop(s.stop_grace_s)
    stats = tree.stats()
    problems = [] if tree.returncode == 0 else [f"exit code {tree.returncode}"]
    return tree, exited, stats, problems + notes


def run_ss(v: Variant, s: Settings, topic: str, run_dir: Path) -> dict[str, Any]:
    out, progress = run_dir / "table", run_dir / "progress.json"
    jars, conf = list(s.jars), dict(s.spark_conf)
    if v.sink == "delta":
        jars += s.delta_jars
        conf.update(s.delta_conf)
    argv = [
        sys.executable,
        str(HERE / "ss_job.py"),
        f"--bootstrap={s.bootstrap}",
        f"--topic={topic}",
        f"--kind={v.kind}",
        f"--out={out}",
        f"--checkpoint={run_dir / 'checkpoint'}",
        f"--jars={','.join(str(j) for j in jars)}",
        f"--progress={progress}",
        f"--master={s.spark_master}",
        f"--format={v.sink}",
        *(f"--conf={k}={x}" for k, x in conf.items()),
    ]
    tree, exited, stats, problems = _run_to_exit(argv, run_dir / "ss.log", v, s)
    delta = DeltaLogReader(out) if v.sink == "delta" else None
    if delta is not None:
        delta.poll()
        # One Delta commit per batch; the instant its rows became visible, and its files.
        batches, files = [(c.mtime, c.files) for c in delta.log], delta.files
    else:
        batches, files = spark_metadata(out)
    extra = _check(v, out, files, delta, s.records, problems)
    if problems:
        raise BenchFailed(f"{v.key}: " + "; ".join(problems) + f" (log: {tree.log_path})")
    with_rows = [t for t, n in batches if n > 0]
    # Rate of the batch phase: rows over the batches' own durations (triggerExecution: offsets,
    # planning, the write and the commit), from the query's progress reports.
    reports = [p for p in json.loads(progress.read_text()) if p.get("numInputRows", 0) > 0]
    busy = sum(p["durationMs"]["triggerExecution"] for p in reports) / 1000
    rows = sum(p["numInputRows"] for p in reports)
    return {
        "all_s": with_rows[-1] - tree.started,
        "first_s": with_rows[0] - tree.started,
        "steady_rps": rows / busy if busy else None,
        "cpu_s_per_m": stats.cpu_s / (s.records / 1e6),
        "peak_rss_mb": stats.peak_rss_mb,
        "commits": len(with_rows),
        "files": len(files),
        "exit_s": exited - tree.started,
        # When the first batch began (its progress report's timestamp): session and source set up.
        "batch_start_s": datetime.fromisoformat(reports[0]["timestamp"]).timestamp() - tree.started,
        # Per batch with rows: (rows, the batch's seconds, of which the sink's addBatch: the
        # write and, for Delta, its commit), the counterpart of connectd's commit costs.
        "commit_costs": [
            (
                p["numInputRows"],
                p["durationMs"]["triggerExecution"] / 1000,
                p["durationMs"].get("addBatch", 0) / 1000,
            )
            for p in reports
        ],
        **_tree_figures(stats),
        **extra,
    }


def run_floor(v: Variant, s: Settings, topic: str, run_dir: Path) -> dict[str, Any]:
    """``floor_job.py``: its files' times give the first and last rows (renamed into place
    once whole); it exits by itself once it read every partition to its end."""
    out = run_dir / "table"
    argv = [
        sys.executable,
        str(HERE / "floor_job.py"),
        f"--bootstrap={s.bootstrap}",
        f"--topic={topic}",
        f"--out={out}",
        f"--kind={v.kind}",
    ]
    tree, exited, stats, problems = _run_to_exit(argv, run_dir / "floor.log", v, s)
    files = sorted(f.name for f in out.glob("part-*.parquet"))
    problems += check_table(
        out, files, s.records, partition_col="kafka_partition", offset_col="kafka_offset",
        typed=v.columns,
    )  # fmt: skip
    if problems:
        raise BenchFailed(f"{v.key}: " + "; ".join(problems) + f" (log: {tree.log_path})")
    times = [(out / f).stat().st_mtime for f in files]
    first_rows = pq.ParquetFile(out / files[0]).metadata.num_rows
    steady = (s.records - first_rows) / (times[-1] - times[0]) if times[-1] > times[0] else None
    return {
        "all_s": times[-1] - tree.started,
        "first_s": times[0] - tree.started,
        "steady_rps": steady,
        "cpu_s_per_m": stats.cpu_s / (s.records / 1e6),
        "peak_rss_mb": stats.peak_rss_mb,
        "commits": len(files),
        "files": len(files),
        "exit_s": exited - tree.started,
        **_tree_figures(stats),
    }


RUNNERS = {"ss": run_ss, "connectd": run_connectd, "floor": run_floor}


def run(v: Variant, s: Settings, topic: str, run_dir: Path) -> dict[str, Any]:
    run_dir.mkdir(parents=True)
    load = os.getloadavg()[0]
    result = RUNNERS[v.engine](v, s, topic, run_dir)
    # The 1-minute load average before and after: on a shared machine, the context of a figure.
    result["load"] = (round(load, 1), round(os.getloadavg()[0], 1))
    return result


def median(values: Sequence[float | None]) -> float | None:
    present = [x for x in values if x is not None]
    return statistics.median(present) if present else None
