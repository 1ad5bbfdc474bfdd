"""Executors on a Spark standalone cluster against ``local[2]``: start, one write, kills.

    .venv/bin/python bench/spark_cluster_bench.py                  # 3 starts, 5 writes, 5+5 kills
    .venv/bin/python bench/spark_cluster_bench.py --quick          # 1 start, 2 writes, 1+1+1 kills
    .venv/bin/python bench/spark_cluster_bench.py --port 17270 --ui-port 18270

Starts its own cluster (dev/spark/sparkctl.py: a master and 2 workers of 1 core on loopback, in
.cache/spark/run-<port>/) and stops it by PID at the end. Each executor is the driver of one
application (client mode) with ``spark.cores.max=1``, ``spark.executor.cores=1``,
``spark.executor.memory=512m``: an executor and its spare hold one worker each. The same figures
with ``local[2]`` (Spark inside the executor process, two threads) are taken in the same run.

a. start: a pool of 1 executor, no spare; ``ExecutorInfo.startup_seconds`` (spawn → session up
   and its warm-up write done) and pool start → ``wait_ready(1)``; no class-data sharing on
   either side.
b. one ParquetSink write (``write_staged``) of 50,000 records, after a warm-up write: submit →
   answer, and the seconds inside Spark that ``write_staged`` reports.
c. kills: a write hung in the executor's Python code and one hung in a Spark UDF (in turn), past
   their deadline. From the WriteTimeout being raised to (i) the application gone from the
   master's ``activeapps`` and (ii) no process of it left under the workers (its executor JVM,
   found by ``--app-id`` on its command line, and that JVM's descendants: PySpark's workers).
   The pool's own kill + reap + /proc confirmation (before it raises) is shown for both masters.
   Then (cluster only, ``--owner-kills``): SIGKILL of the process that owns the pool while a
   write hangs in a UDF; from the kill until both applications (executor and spare) are gone.

Numbers are printed, never asserted. Exit code 1 if a measurement could not be made.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from executor_bench import records

from daemon.errors import WriteTimeout
from daemon.executor import ExecutorPool, PoolSettings, become_subreaper, handoff

REPO = Path(__file__).resolve().parent.parent
T = "daemon.executor.testing"
WRITE = "daemon.connectors.parquet.write:write_staged"
LOCAL = "local[2]"
SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "1g"}
#: Each application: one core of one worker, the driver reachable on loopback only.
CLUSTER_CONF = {
    **SPARK_CONF,
    "spark.cores.max": "1",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
POLL_S = 0.02
GONE_TIMEOUT = 120.0


def load_sparkctl() -> ModuleType:
    path = REPO / "dev" / "spark" / "sparkctl.py"
    spec = importlib.util.spec_from_file_location("sparkctl", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules["sparkctl"] = module
    spec.loader.exec_module(module)
    return module


sparkctl = load_sparkctl()


def settings(master: str, tmp: Path, **kw: Any) -> PoolSettings:
    conf = SPARK_CONF if master.startswith("local") else CLUSTER_CONF
    return PoolSettings(
        spark_master=master,
        spark_conf=conf,
        cds=False,
        cds_build=False,
        work_dir=tmp,
        start_timeout=300.0,
        log_path=tmp.parent / "executors.log",  # Spark's own output, kept out of the table
        **kw,
    )


# -- the cluster as the master and the workers see it -----------------------------------------


class Cluster:
    """The cluster sparkctl started here: its applications and their processes."""

    def __init__(self, c: Any) -> None:
        self.c = c

    def active(self) -> dict[str, str]:
        """Running applications: name -> id."""
        status = sparkctl.master_status(self.c.ui_port)
        return {a["name"]: a["id"] for a in status.get("activeapps", ())}

    def app_of(self, executor_pid: int) -> str | None:
        # child.py names each session connectd-executor-<its pid>.
        return self.active().get(f"connectd-executor-{executor_pid}")

    def ended(self, app_ids: list[str]) -> dict[str, float]:
        """When each of ``app_ids`` that the master has completed ended, by the master's clock
        (``starttime + duration``, ms; the master runs on this machine): id -> epoch seconds."""
        done = sparkctl.master_status(self.c.ui_port).get("completedapps", ())
        return {
            a["id"]: (a["starttime"] + a["duration"]) / 1000 for a in done if a["id"] in app_ids
        }

    def processes(self, *app_ids: str) -> set[tuple[int, int]]:
        """(pid, start time) of the applications' executor JVMs under the workers (their
        command line carries ``--app-id <id>``) and of everything below them."""
        below: dict[int, int] = {}
        for worker in self.c.worker_pids:
            below.update(sparkctl.descendants(worker))
        out: set[tuple[int, int]] = set()
        needles = [f"--app-id\0{app_id}\0".encode() for app_id in app_ids]
        for pid, start in below.items():
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                if any(n in argv for n in needles):
                    out.add((pid, start))
                    out.update(sparkctl.descendants(pid).items())
        return out


def alive(procs: set[tuple[int, int]], reap: bool = False) -> set[tuple[int, int]]:
    """Those of ``procs`` still running; ``reap``: wait for those that are our children (the
    bench is a subreaper: a SIGKILLed pool owner's executors are re-parented to it)."""
    out = set()
    for pid, start in procs:
        if reap:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        stat = sparkctl._stat(pid)
        if stat is not None and stat[2] == start and stat[0] not in ("Z", "X"):
            out.add((pid, start))
    return out


# -- a. start, b. write --------------------------------------------------------------------------


async def bench_start(master: str, runs: int, tmp: Path) -> dict[str, list[float]]:
    startup, ready = [], []
    for i in range(runs):
        began = time.monotonic()
        async with ExecutorPool(settings(master, tmp / f"start-{i}", size=1, spares=0)) as pool:
            await pool.wait_ready(1, timeout=300)
            ready.append(time.monotonic() - began)
            startup.append(pool.snapshot()[0].startup_seconds or float("nan"))
    return {"startup": startup, "ready": ready}


async def bench_write(master: str, n: int, reps: int, tmp: Path) -> dict[str, list[float]]:
    took, inside = [], []
    table = records(n)
    async with ExecutorPool(settings(master, tmp / "work", size=1, spares=0)) as pool:
        await pool.wait_ready(1, timeout=300)
        for i in range(reps + 1):
            began = time.perf_counter()
            kwargs = {"path": str(tmp / f"w-{i}")}
            got = await pool.run("bench", WRITE, table, timeout=900, kwargs=kwargs)
            if i == 0:
                continue  # the warm-up: first use of the write path in this session
            took.append(time.perf_counter() - began)
            inside.append(float(got["seconds"]))
    return {"write": took, "inside": inside}


# -- c. kills --------------------------------------------------------------------------------


async def wait_gone(
    cluster: Cluster,
    apps: list[str],
    procs: set[tuple[int, int]],
    t0: float,
    t0_wall: float,
    own: set[tuple[int, int]] = frozenset(),  # type: ignore[assignment]
) -> dict[str, float]:
    """Seconds from ``t0`` (monotonic; ``t0_wall`` the same instant by the wall clock) until
    ``apps`` ended by the master's own record (``starttime + duration`` of each in
    ``completedapps``; negative: before ``t0``), until none is in ``activeapps`` (polled),
    and until no process of them (those seen before, or any found now) is left; ``own``: the
    executors' own process trees (drivers), also until gone, reaped if they are our children."""
    app_gone = procs_gone = own_gone = None
    end = t0 + GONE_TIMEOUT
    while time.monotonic() < end and None in (app_gone, procs_gone, own_gone):
        now = time.monotonic()
        if own_gone is None and not alive(own, reap=True):
            own_gone = now - t0
        if app_gone is None and not set(apps) & set(cluster.active().values()):
            app_gone = now - t0
        if procs_gone is None and not alive(procs) and not cluster.processes(*apps):
            procs_gone = now - t0
        await asyncio.sleep(POLL_S)
    if app_gone is None or procs_gone is None or own_gone is None:
        left = sorted(p for p, _ in alive(procs) | cluster.processes(*apps) | alive(own))
        raise RuntimeError(
            f"{apps}: {'still active' if app_gone is None else 'gone'} on the master,"
            f" processes {left} left after {GONE_TIMEOUT:.0f} s"
        )
    ended = cluster.ended(apps)
    return {
        "ended": max(ended.values()) - t0_wall if len(ended) == len(apps) else float("nan"),
        "app": app_gone,
        "procs": procs_gone,
        **({"own": own_gone} if own else {}),
    }


async def victim(master: str, tmp: Path) -> None:
    """``--victim``: a pool owner for ``bench_owner_kills`` to SIGKILL, as the daemon would be:
    a subreaper with 1 executor + 1 spare on ``master``, one write hung in a UDF; prints the
    executors' pids once the write hangs, then waits for the SIGKILL."""
    become_subreaper()
    async with ExecutorPool(settings(master, tmp, size=1, spares=1)) as pool:
        await pool.wait_ready(2, timeout=300)
        marker = tmp / "marker"
        write = asyncio.create_task(
            pool.run("hang", f"{T}:hang_in_udf", timeout=3600, kwargs={"marker": str(marker)})
        )
        while not marker.exists():
            if write.done():
                await write  # raises: the hang did not start
            await asyncio.sleep(0.01)
        print(" ".join(str(e.pid) for e in pool.snapshot()), flush=True)
        await write


async def bench_owner_kills(cluster: Cluster, runs: int, tmp: Path) -> dict[str, list[float]]:
    """SIGKILL of the pool's owner while a write hangs in a UDF: from the kill until both
    executors' applications are gone from the master and no process of them is left, on the
    cluster or on this side (the executors, their driver JVMs)."""
    out: dict[str, list[float]] = {}
    for i in range(runs):
        (tmp / f"victim-{i}").mkdir(parents=True)
        argv = [__file__, "--victim", cluster.c.url, "--dir", str(tmp / f"victim-{i}")]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *argv, stdout=asyncio.subprocess.PIPE
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 600)
            pids = [int(p) for p in line.split()]
            apps = [a for p in pids if (a := cluster.app_of(p)) is not None]
            if len(pids) != 2 or len(apps) != 2:
                raise RuntimeError(f"victim: executors {pids}, applications {apps}")
            own: set[tuple[int, int]] = set()
            for p in pids:
                own |= {(p, sparkctl._stat(p)[2]), *sparkctl.descendants(p).items()}
            procs = cluster.processes(*apps)
            t0, t0_wall = time.monotonic(), time.time()
            proc.kill()
            await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        gone = await wait_gone(cluster, apps, procs, t0, t0_wall, own)
        # What a SIGKILLed daemon leaves (the next daemon's sweep_stale would remove it).
        shutil.rmtree(handoff.default_handoff_root() / f"connectd-{proc.pid}", ignore_errors=True)
        for key, value in gone.items():
            out.setdefault(key, []).append(value)
        out.setdefault("nprocs", []).append(float(len(procs)))
    return out


async def bench_kills(
    master: str, cluster: Cluster | None, kills: int, deadline: float, tmp: Path
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    async with ExecutorPool(settings(master, tmp / "kills", size=1, spares=1)) as pool:
        for i in range(2 * kills):
            await pool.wait_ready(2, timeout=300)
            fn = "hang_in_udf" if i % 2 else "hang_in_python"
            marker = tmp / f"marker-{i}"
            write = asyncio.create_task(
                pool.run("kill", f"{T}:{fn}", timeout=deadline, kwargs={"marker": str(marker)})
            )
            while not marker.exists() and not write.done():
                await asyncio.sleep(0.01)
            pid = pool.current_pid("kill")
            app_id = cluster.app_of(pid) if cluster is not None and pid else None
            procs = cluster.processes(app_id) if cluster is not None and app_id else set()
            if cluster is not None and not (app_id and procs):
                raise RuntimeError(f"executor {pid}: no application or no cluster executor found")
            try:
                await write
            except WriteTimeout as exc:
                raised, raised_wall = time.monotonic(), time.time()
                found = re.search(r"in ([0-9.]+) s", str(exc))
                out.setdefault(f"{fn}/pool", []).append(float(found[1]) if found else float("nan"))
            else:
                raise RuntimeError(f"{fn}: the hung write returned")
            if cluster is not None and app_id:
                gone = await wait_gone(cluster, [app_id], procs, raised, raised_wall)
                for key, value in gone.items():
                    out.setdefault(f"{fn}/{key}", []).append(value)
                out.setdefault(f"{fn}/nprocs", []).append(float(len(procs)))
    return out


# -- report ----------------------------------------------------------------------------------


def cell(values: list[float] | None, unit: str = "s") -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.2f} {unit} ({', '.join(f'{v:.2f}' for v in values)})"


def machine() -> str:
    mem = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem = f"{kib / 2**20:.0f} GiB"
    return f"{os.cpu_count()} CPUs, {mem} RAM"


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def own_cluster(port: int, ui_port: int) -> Iterator[Cluster]:
    run_dir = sparkctl.default_run_dir(port).resolve()
    # sparkctl would reuse a live cluster there (make spark-up), and `down` below would stop it.
    if sparkctl.read_pid(run_dir / "master.pid", run_dir, "master") is not None:
        raise sparkctl.SparkctlError(
            f"a cluster already runs in {run_dir}: stop it (make spark-down"
            f" SPARK_MASTER_PORT={port}) or give this bench other ports (--port, --ui-port)"
        )
    c = sparkctl.up(port, ui_port, run_dir, workers=2, worker_cores=1, die_with_parent=True)
    print(f"cluster {c.url}: master pid {c.master_pid}, workers {list(c.worker_pids)}", flush=True)
    try:
        yield Cluster(c)
    finally:
        stopped = sparkctl.down(run_dir)
        print(f"cluster stopped: pids {stopped}", flush=True)


async def measure(args: argparse.Namespace, cluster: Cluster, tmp: Path) -> dict[Any, Any]:
    url = cluster.c.url
    res: dict[Any, Any] = {}
    for label, master, cl in (("local", LOCAL, None), ("cluster", url, cluster)):
        (tmp / label).mkdir()
        print(f"[{time.strftime('%H:%M:%S')}] {master}: start x{args.starts}", flush=True)
        res[label, "start"] = await bench_start(master, args.starts, tmp / label)
        print(f"[{time.strftime('%H:%M:%S')}] {master}: write x{args.writes}", flush=True)
        res[label, "write"] = await bench_write(master, args.records, args.writes, tmp / label)
        print(
            f"[{time.strftime('%H:%M:%S')}] {master}: kills {args.kills}+{args.kills}", flush=True
        )
        res[label, "kills"] = await bench_kills(master, cl, args.kills, args.deadline, tmp / label)
    if args.owner_kills:
        print(
            f"[{time.strftime('%H:%M:%S')}] {url}: owner SIGKILLs x{args.owner_kills}", flush=True
        )
        res["owner"] = await bench_owner_kills(cluster, args.owner_kills, tmp / "cluster")
    return res


def report(args: argparse.Namespace, res: dict[Any, Any], url: str, before: str) -> None:
    print(
        f"\nExecutors on a Spark cluster ({url}: master + 2 workers x 1 core, each application"
        f" spark.cores.max=1, executor 1 core / 512m) against {LOCAL} (2 threads in the"
        f" executor's JVM); {machine()}; load before {before}, after {load()}."
        "\nMedian (every run) in seconds."
    )
    rows = [
        ("a. executor start (spawn → ready)", "start", "startup"),
        ("   pool start → wait_ready(1)", "start", "ready"),
        (f"b. ParquetSink write, {args.records:,} records", "write", "write"),
        ("   of which inside Spark", "write", "inside"),
    ]
    for fn in ("hang_in_python", "hang_in_udf"):
        rows += [
            (f"c. {fn}: pool kill+reap+confirm", "kills", f"{fn}/pool"),
            ("   WriteTimeout → app ended (master's record)", "kills", f"{fn}/ended"),
            ("   WriteTimeout → app not in activeapps", "kills", f"{fn}/app"),
            ("   WriteTimeout → no process of the app", "kills", f"{fn}/procs"),
        ]
    print(f"{'':<46}{LOCAL:<40}cluster")
    for title, part, key in rows:
        local, clus = res["local", part].get(key), res["cluster", part].get(key)
        print(f"{title:<46}{cell(local) if local else 'n/a':<40}{cell(clus)}")
    for fn in ("hang_in_python", "hang_in_udf"):
        n = res["cluster", "kills"].get(f"{fn}/nprocs")
        if n:
            counts = ", ".join(str(int(x)) for x in n)
            print(f"  {fn}: the application's processes under the workers at the kill: {counts}")
    print(
        f"{LOCAL}: the whole Spark application is the executor's process tree, confirmed gone"
        " before WriteTimeout is raised. The master's record: the application's end time"
        " (starttime + duration in completedapps) against the raise; negative = before it."
    )
    owner = res.get("owner")
    if owner:
        print(
            f"\nSIGKILL of the pool's owner (1 executor + 1 spare on the cluster, a write hung in"
            f" a UDF), {len(owner['app'])} runs; from the SIGKILL:"
        )
        for title, key in (
            ("both apps ended (master's record)", "ended"),
            ("both apps not in activeapps", "app"),
            ("no process of them under the workers", "procs"),
            ("executors' own trees (drivers) gone", "own"),
        ):
            print(f"  {title:<42}{cell(owner.get(key))}")
        counts = ", ".join(str(int(x)) for x in owner["nprocs"])
        print(f"  processes of the two apps under the workers at the kill: {counts}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=17270, help="master port")
    p.add_argument("--ui-port", type=int, default=18270, help="master web UI / JSON port")
    p.add_argument("--quick", action="store_true", help="1 start, 2 writes, 1+1+1 kills")
    p.add_argument("--records", type=int, default=50_000)
    p.add_argument("--deadline", type=float, default=6.0, help="hung writes' deadline, s")
    p.add_argument("--owner-kills", type=int, help="SIGKILLs of the pool's owner (default 3)")
    p.add_argument("--victim", metavar="MASTER", help=argparse.SUPPRESS)
    p.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.victim:
        asyncio.run(victim(args.victim, args.dir))
        return 0
    args.starts, args.writes, args.kills = (1, 2, 1) if args.quick else (3, 5, 5)
    if args.owner_kills is None:
        args.owner_kills = 1 if args.quick else 3
    become_subreaper()  # orphans of killed executors are reaped here, not by init
    before = load()
    print(f"spark_cluster_bench; {machine()}; load {before}", flush=True)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="connectd-cluster-bench-") as tmp_name,
            own_cluster(args.port, args.ui_port) as cluster,
        ):
            res = asyncio.run(measure(args, cluster, Path(tmp_name)))
    except (RuntimeError, sparkctl.SparkctlError) as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    report(args, res, f"spark://127.0.0.1:{args.port}", before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
