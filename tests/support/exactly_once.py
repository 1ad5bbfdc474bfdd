"""The exactly-once audit under faults (``audit``): records produced into a topic, a sink run by
a daemon process while the daemon is SIGKILLed (and restarted) and executors (their Python
process, or their JVM where the sink writes through Spark) are SIGKILLed from outside, at random
points of the run's progress (seeded; the seed is printed; progress is
read from the table, never from the daemon). Once it has caught up, the table holds exactly one
row per record. The Parquet, Delta, Iceberg and Spark-cluster audits all run it (the Schema
Registry formats' matrix, ``test_registry_matrix.py``, runs its own over nine connectors).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import psutil
import pyarrow.compute as pc
import pyarrow.dataset as ds

from daemon.executor.process import read_stat
from support.daemon import DaemonProcess, ProcessFactory, wait_until, worker_properties
from support.kafka import produce
from support.tables import committed

RECORDS = 20_000
PARTITIONS = 3
#: A chain of six of Connect's transforms, the audit's records through it (issue 30's proof on
#: Delta and Iceberg): routed to one topic name, each plain value wrapped into a field ``line``,
#: the offset and partition inserted, the offset cast to a string, the partition masked, and a
#: Filter whose predicate (a header no record has) drops none, so every offset stays one row.
TRANSFORMED = {
    "transforms": "route,wrap,stamp,cast,mask,keep",
    "transforms.route.type": "RegexRouter",
    "transforms.route.regex": "t-.*",
    "transforms.route.replacement": "audited",
    "transforms.wrap.type": "HoistField$Value",
    "transforms.wrap.field": "line",
    "transforms.stamp.type": "InsertField$Value",
    "transforms.stamp.offset.field": "off",
    "transforms.stamp.partition.field": "part",
    "transforms.cast.type": "Cast$Value",
    "transforms.cast.spec": "off:string",
    "transforms.mask.type": "MaskField$Value",
    "transforms.mask.fields": "part",
    "transforms.keep.type": "Filter",
    "transforms.keep.predicate": "marked",
    "predicates": "marked",
    "predicates.marked.type": "HasHeaderKey",
    "predicates.marked.name": "drop-me",
}
#: Spark SQL that holds for a row as TRANSFORMED leaves it.
TRANSFORMED_ROW = (
    "kafka_topic = 'audited' AND off = CAST(kafka_offset AS STRING) AND part = 0"
    " AND length(line) = 188"
)


def _gone(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is None or not stat.running


def _writing_executors(p: DaemonProcess) -> set[int] | None:
    """The executors writing for the connector's tasks; None while the REST API does not
    answer yet (its front starts beside the tasks, see ``audit``)."""
    try:
        code, body = p.rest("GET", "/connectors/eos/status", timeout=10.0)
    except OSError:  # URLError included: not listening yet
        return None
    return {t["executor_pid"] for t in body["tasks"] if t["executor_pid"]} if code == 200 else set()


def _kill_one(p: DaemonProcess, jvm: bool) -> int | None:
    """SIGKILL one executor's JVM (``jvm``) or its Python process, the writing one's if a
    write runs: ParquetSink's writes run in the Python process by default
    (``write.engine=auto``: pyarrow, no Spark job), Delta's and Iceberg's in the JVM."""
    writing = _writing_executors(p)
    if writing is None:
        return None  # asked again: the victim is the writing executor when there is one
    found = []
    for pid in p.descendants():
        try:
            proc = psutil.Process(pid)
            if jvm and proc.name() == "java":
                found.append((proc.ppid() not in writing, pid))
            elif not jvm and "daemon.executor.child" in " ".join(proc.cmdline()):
                found.append((pid not in writing, pid))
        except psutil.Error:
            continue
    if not found:
        return None
    _, victim = sorted(found)[0]
    os.kill(victim, signal.SIGKILL)
    return victim


def kill_a_jvm(p: DaemonProcess) -> int | None:
    """SIGKILL one executor JVM of the daemon (the one writing, if a write runs)."""
    return _kill_one(p, jvm=True)


#: (fault, lowest, highest): the progress window (offsets committed) in which each strikes:
#: the daemon's SIGKILL three times, an executor's twice, over ``RECORDS``.
WINDOWS = [
    ("daemon", 1_000, 4_000),
    ("executor", 4_500, 6_500),
    ("daemon", 7_000, 10_000),
    ("executor", 10_500, 12_000),
    ("daemon", 12_500, 15_500),
]
#: Each kind of fault once, over ``SHORT_RECORDS``: for the sinks whose commits cost seconds
#: each (Delta, Iceberg: a Spark job per commit, a JVM with their jars per daemon start; under
#: a loaded CI machine each daemon start costs 30-35 s of JVM start alone), while ParquetSink's
#: audit repeats them over ``RECORDS``. With 1,500 records per commit, each partition commits
#: 1,500 then 500: the daemon dies after the first commits, the JVM before the last ones.
SHORT_RECORDS = 6_000
SHORT_WINDOWS = [
    ("daemon", 1_000, 2_500),
    ("jvm", 3_000, 4_500),
]
#: A fault other than the daemon's SIGKILL: does it to the running daemon, says what it did.
Fault = Callable[[DaemonProcess], Awaitable[str]]
#: After a daemon SIGKILL, with the pids that were below it: asserts what must be gone.
AfterDaemonKill = Callable[[list[int]], Awaitable[None]]


async def jvm_fault(p: DaemonProcess) -> str:
    # A daemon just restarted may not have started its executor yet (they start on demand).
    victim = await wait_until(lambda: kill_a_jvm(p), 60, "an executor JVM to kill")
    return f"JVM {victim} SIGKILL"


async def executor_fault(p: DaemonProcess) -> str:
    victim = await wait_until(lambda: _kill_one(p, jvm=False), 60, "an executor to kill")
    return f"executor {victim} SIGKILL"


async def executors_gone(below: list[int]) -> None:
    # Its executors (and their JVMs) die with it: parent-death signal, end of pipe.
    await wait_until(lambda b=below: all(map(_gone, b)), 15, "its executors gone")


async def audit(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    topic: str,
    tmp_path: Path,
    *,
    worker_extra: Mapping[str, str] = {},
    windows: Sequence[tuple[str, int, int]] = WINDOWS,
    records: int = RECORDS,
    faults: Mapping[str, Fault] | None = None,
    after_daemon_kill: AfterDaemonKill = executors_gone,
    sink_extra: Mapping[str, str | None] = {},
    progress: Callable[[Path], int] = committed,
    check: Callable[[Path], Awaitable[None]] | None = None,
) -> None:
    """Produce ``records`` into ``topic`` (PARTITIONS partitions), run a ParquetSink (or the sink
    ``sink_extra`` makes it, where None drops a key: its ``progress`` reads the offsets
    committed, its ``check`` reads the rows) through the faults of ``windows`` (the daemon's
    SIGKILL and restart, or one of ``faults``), then check the table: every record exactly
    once."""
    seed = int(os.environ.get("CONNECTD_TEST_SEED", time.time_ns() % 10_000))
    rng = random.Random(seed)
    print(f"\nfault seed {seed} (CONNECTD_TEST_SEED={seed} to replay)")
    pad = b"x" * 180
    await produce(kafka_bootstrap, topic, [(None, b"%08d" % i + pad) for i in range(records)])
    table = tmp_path / "table"
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{"task.shutdown.graceful.timeout.ms": "2000", **worker_extra},
    )
    base = {
        "name": "eos",
        "connector.class": "ParquetSink",
        "topics": topic,
        "tasks.max": str(PARTITIONS),
        "path": str(table),
        "flush.max.records": "1500",
        "buffer.max.records": "1500",  # commits in small steps, even behind the backlog
        # Connect's poll size: the task reads at the pace the faults' windows were made for
        # (with polls of 1,500 it could commit all before the first fault was due).
        "consumer.override.max.poll.records": "500",
        "flush.interval.ms": "2000",
        # A killed JVM fails its task; the auto-restart waits minutes from the second failure
        # on (n·(n+1)), which this test need not sit through.
        "errors.restart.backoff.max.ms": "2000",
    }
    sink = {k: v for k, v in {**base, **sink_extra}.items() if v is not None}
    # Progress points (offsets committed) at which a fault strikes, in order.
    points = [(kind, rng.randint(low, high)) for kind, low, high in windows]
    began = time.monotonic()
    # Progress is watched from the daemon's start, not from its REST API's: the REST front is a
    # process of its own that, on a loaded machine, can take longer to answer than the task
    # takes to commit every record, and the faults would all come too late.
    p = daemon_process(worker, [sink], wait=False)
    done: list[str] = []
    for kind, at in points:
        await wait_until(lambda a=at: progress(table) >= a, 300, f"{at} offsets committed")
        if kind == "daemon":
            below = p.descendants()
            p.signal(signal.SIGKILL)  # no shutdown at all
            p.wait(10)
            done.append(f"daemon SIGKILL at {progress(table)}")
            await after_daemon_kill(below)
            p = daemon_process(worker, [sink], wait=False)
        else:
            fault = (faults or {"jvm": jvm_fault, "executor": executor_fault})[kind]
            done.append(f"{await fault(p)} at {progress(table)}")
    assert progress(table) < records, f"the faults came too late: {done}"
    await wait_until(lambda: progress(table) >= records, 300, "caught up", interval=0.2)
    print(f"faults: {done}; caught up in {time.monotonic() - began:.0f} s")
    p.signal(signal.SIGTERM)
    assert p.wait(60) == 0
    if check is not None:
        await check(table)
        assert progress(table) == records
        return

    data = ds.dataset(table, format="parquet").to_table(
        columns=["kafka_partition", "kafka_offset", "value"]
    )
    assert data.num_rows == records
    pairs = data.group_by(["kafka_partition", "kafka_offset"]).aggregate([])
    assert pairs.num_rows == records
    values = pc.utf8_slice_codeunits(data.column("value"), 0, 8)
    assert pc.count_distinct(values).as_py() == records  # every record, none twice
    assert committed(table) == records
