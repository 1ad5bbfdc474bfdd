"""Distributed mode side by side: three Kafka Connect 4.1 workers against three connectd workers.

    .venv/bin/python bench/cluster_bench.py                    # both systems, 3 runs, defaults run
    .venv/bin/python bench/cluster_bench.py --quick            # 1 run, burst of 50, no defaults
    .venv/bin/python bench/cluster_bench.py --systems connect  # one side only

Both clusters are driven only through Kafka Connect's REST API, on the same broker, from the
same worker file (bench/connect/worker.properties.in) with the same session timeout, heartbeat
and scheduled rebalance delay. Connect runs its own FileStreamSinkConnector (jars from Maven
Central through bench/connect/pom.xml, cached in .cache/connect-<version>/libs); connectd runs
its EchoSink: both take records from Kafka and do almost nothing with them (append lines to a
file / count them), so what is timed is the cluster's work, not a sink's.

Each run starts a fresh cluster (its own group.id and internal topics) and measures:
  create    POST /connectors (tasks.max=6 over a 6-partition topic) -> connector and all 6 tasks
            RUNNING in GET /connectors/{c}/status; --creates connectors, one after another;
  failover  SIGKILL of a worker that runs tasks -> every task of every connector RUNNING on a
            surviving worker (status read from a surviving worker).
Once per system, on a fresh cluster each:
  burst     --burst connectors (tasks.max=1) POSTed through the three workers at once (a 409 during
            a rebalance is retried, as a client would) -> all RUNNING; rebalances counted as the
            group generation's growth (Connect: "Joined group at generation N" in the workers'
            logs, and its "Rebalance started" lines; connectd: connectd_cluster_generation and
            connectd_cluster_rebalances_total in GET /metrics);
  defaults  failover again with both systems at their defaults (session.timeout.ms 10000,
            scheduled.rebalance.max.delay.ms 300000); skipped by --quick and --no-defaults.
A number is printed only after the bench checked it: the right connector and task count, all
RUNNING, none on the killed worker. Medians, ranges, and the ratio connectd/Connect.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import functools
import http.client
import itertools
import json
import logging
import os
import re
import shutil
import signal
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CONNECT_DIR = HERE / "connect"
KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.1.2")
PORTS = range(18400, 18500)  # this bench's REST ports (helpers on one machine share the box)
TASKS = 6
LEADER_METRIC = "connectd_cluster_leader"  # 1 on the leader, 0 elsewhere
WORKERS = 3
# connect-distributed.sh's own JVM settings (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
CONNECT_JVM = [
    "-Xms256M",
    "-Xmx2G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    """A measurement could not be made or did not check out; the message says which."""


def poll(what: str, check: Callable[[], Any], deadline: float, every: float = 0.05) -> Any:
    """``check()``'s first truthy value, polled until ``deadline`` (a monotonic time)."""
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {what}")
        time.sleep(every)


# --- REST ---------------------------------------------------------------------------------------


def rest(port: int, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    """(status, parsed body) of one request; (0, error text) when nothing answered."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, data, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, raw.decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)
    finally:
        conn.close()


# --- Kafka (topics and records, through aiokafka) -----------------------------------------------


def kafka_topics(bootstrap: str, create: dict[str, int], delete: list[str]) -> None:
    async def go() -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            if create:
                await admin.create_topics([NewTopic(t, n, 1) for t, n in create.items()])
            if delete:
                await admin.delete_topics(delete)
        finally:
            await admin.close()

    asyncio.run(go())


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async def go() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
        await producer.start()
        try:
            for p in range(partitions):
                for i in range(per_partition):
                    await producer.send(topic, b"record %d-%d" % (p, i), partition=p)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(go())


# --- the workers --------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the bench dies, so no worker outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def connect_libs() -> Path:
    """Kafka Connect's jars, resolved from Maven Central once (a stamp file marks it done)."""
    libs = REPO / ".cache" / f"connect-{KAFKA_VERSION}" / "libs"
    if (libs / ".complete").exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise BenchError("mvn not found: install Maven (Debian/Ubuntu: apt-get install maven)")
    partial = libs.with_name("libs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    log(f"resolving Kafka Connect {KAFKA_VERSION} jars from Maven Central into {libs}")
    cmd = [mvn, "-q", "-B", "-f", str(CONNECT_DIR / "pom.xml"), f"-Dkafka.version={KAFKA_VERSION}"]
    cmd += ["dependency:copy-dependencies", f"-DoutputDirectory={partial}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0 or not list(partial.glob("connect-runtime-*.jar")):
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise BenchError(f"could not resolve Kafka Connect {KAFKA_VERSION} with Maven (above)")
    (partial / ".complete").write_text(f"connect {KAFKA_VERSION}\n")
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    return libs


_ports = itertools.cycle(PORTS)


def free_port() -> int:
    for _ in PORTS:
        port = next(_ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise BenchError(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


@dataclass
class Worker:
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def worker_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Timings:
    session_timeout_ms: int
    rebalance_delay_ms: int

    @property
    def heartbeat_ms(self) -> int:
        return max(1000, self.session_timeout_ms // 3 // 1000 * 1000)


@dataclass
class Cluster:
    """Three workers of one system sharing a fresh group.id and internal topics."""

    system: str  # "connect" or "connectd"
    bootstrap: str
    timings: Timings
    root: Path
    prefix: str = field(default_factory=lambda: f"bench-{uuid.uuid4().hex[:8]}")
    workers: list[Worker] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # KEY=VALUE lines for connectd's files
    _from_log: dict[int, bool] = field(default_factory=dict)

    def start(self) -> None:
        self.root.mkdir(parents=True)
        template = string.Template((CONNECT_DIR / "worker.properties.in").read_text())
        for i in range(WORKERS):
            port = free_port()
            wdir = self.root / f"w{i}"
            wdir.mkdir()
            props = template.substitute(
                bootstrap=self.bootstrap,
                group_id=f"{self.prefix}-{self.system}",
                prefix=f"{self.prefix}-{self.system}",
                rest_port=port,
                session_timeout_ms=self.timings.session_timeout_ms,
                heartbeat_interval_ms=self.timings.heartbeat_ms,
                rebalance_delay_ms=self.timings.rebalance_delay_ms,
            )
            if self.system == "connectd":
                # Own state per worker; one executor and no spare: EchoSink writes nothing
                # through Spark, but a worker starts its pool anyway.
                props += f"state.dir={wdir / 'state'}\nexecutor.pool.size=1\n"
                props += "executor.pool.spares=0\n"
                props += "".join(f"{kv}\n" for kv in self.extra)
            (wdir / "worker.properties").write_text(props)
            self.workers.append(self._spawn(port, wdir))
        self.topics += [
            f"{self.prefix}-{self.system}-{k}" for k in ("configs", "offsets", "status")
        ]

    def _spawn(self, port: int, wdir: Path) -> Worker:
        log_path = wdir / "worker.log"
        if self.system == "connect":
            cmd = [
                "java",
                *CONNECT_JVM,
                f"-Dlog4j2.configurationFile={CONNECT_DIR}/log4j2.properties",
            ]
            cmd += [f"-Dconnect.log.file={log_path}", "-cp", f"{connect_libs()}/*"]
            cmd += ["org.apache.kafka.connect.cli.ConnectDistributed", "worker.properties"]
            out = wdir / "stdout.log"
        else:
            cmd = [sys.executable, "-m", "daemon", "distributed", "worker.properties"]
            out = log_path
        with out.open("ab") as f:
            proc = subprocess.Popen(
                cmd,
                cwd=wdir,
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                preexec_fn=_die_with_parent,
            )
        return Worker(port, proc, log_path)

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Every worker answers GET /connectors and all are in one generation, unchanged for 2 s."""
        deadline = time.monotonic() + timeout

        def answering() -> bool:
            for w in self.workers:
                if not w.alive:
                    raise BenchError(f"{self.system} worker on {w.port} exited: see {w.log_path}")
            return all(
                rest(w.port, "GET", "/connectors", timeout=2)[0] == 200 for w in self.workers
            )

        poll(f"{self.system} workers to answer REST", answering, deadline, 0.25)
        stable: list[tuple[int, float]] = []

        def settled() -> bool:
            gens = {self.generation(w) for w in self.workers}
            gen = gens.pop() if len(gens) == 1 else None
            if gen is None or gen < 1:
                stable.clear()
                return False
            if not stable or stable[0][0] != gen:
                stable[:] = [(gen, time.monotonic())]
            return time.monotonic() - stable[0][1] >= 2.0

        poll(f"{self.system} workers to share one generation", settled, deadline, 0.25)

    # -- what the group says about itself ---------------------------------------------------

    def generation(self, w: Worker) -> int | None:
        if self.system == "connectd" and not self.from_log(w):
            return _metric(w.port, "connectd_cluster_generation")
        joins = _joins(self.system, w)
        return joins[-1][0] if joins else None

    def leader(self) -> int | None:
        """The REST port of the group's leader, as the live workers last heard it."""
        live = [w for w in self.workers if w.alive]
        if self.system == "connectd" and not any(self.from_log(w) for w in live):
            leaders = [w.port for w in live if _metric(w.port, LEADER_METRIC)]
            return leaders[0] if len(leaders) == 1 else None
        heard = {j[-1][1] or w.port for w in live if (j := _joins(self.system, w))}
        return heard.pop() if len(heard) == 1 else None

    def rebalances(self, w: Worker) -> int | None:
        """Rebalances this worker went through (Connect: its "Rebalance started" lines)."""
        if self.system == "connect":
            return _read(w.log_path).count(b"Rebalance started")
        if not self.from_log(w):
            return _metric(w.port, "connectd_cluster_rebalances_total")
        return len(_joins(self.system, w))

    def from_log(self, w: Worker) -> bool:
        """connectd without its connectd_cluster_* metrics (an early cut): read its log."""
        if w.port not in self._from_log:
            code, text = rest(w.port, "GET", "/metrics", timeout=2)
            if code != 200:
                return True  # not up yet: ask again next time
            self._from_log[w.port] = "connectd_cluster_generation" not in str(text)
            if self._from_log[w.port]:
                log(f"connectd {w.port}: no connectd_cluster_* in /metrics; reading its log")
        return self._from_log[w.port]

    # -- connectors -------------------------------------------------------------------------

    def connector_config(self, name: str, topic: str, tasks: int) -> dict[str, str]:
        # Names carry the cluster's prefix: a sink's consumer group is connect-<name>, and a group
        # left with the other system's members (a SIGKILLed worker's, until its session ends)
        # refuses a consumer of another protocol (InconsistentGroupProtocol).
        if self.system == "connect":
            cls = {"connector.class": "FileStreamSink", "file": str(self.root / f"{name}.out")}
        else:
            cls = {"connector.class": "EchoSink", "log.first.records": "0"}
            cls["log.every.records"] = "0"
        return {**cls, "topics": topic, "tasks.max": str(tasks)}

    def create(self, via: Worker, name: str, topic: str, tasks: int, timeout: float = 60) -> int:
        """POST the connector, retrying Connect's 409 (rebalance) and 5xx; the 409s seen."""
        deadline = time.monotonic() + timeout
        conflicts = 0
        body = {"name": name, "config": self.connector_config(name, topic, tasks)}
        while True:
            code, resp = rest(via.port, "POST", "/connectors", body, timeout=30)
            if code == 201:
                return conflicts
            if code not in (0, 409, 500, 503) or time.monotonic() > deadline:
                raise BenchError(f"{self.system}: create {name} via {via.port}: {code} {resp}")
            conflicts += code == 409
            time.sleep(0.1)

    def all_running(self, via: Worker, names: list[str], tasks: int, dead: str | None) -> bool:
        """Every connector and its ``tasks`` tasks RUNNING, none on the worker ``dead``."""
        for name in names:
            code, st = rest(via.port, "GET", f"/connectors/{name}/status", timeout=5)
            if code != 200 or not _running(st["connector"], dead):
                return False
            if len(st["tasks"]) != tasks or not all(_running(t, dead) for t in st["tasks"]):
                return False
        return True

    def task_owners(self, via: Worker, names: list[str]) -> dict[str, int]:
        owners: dict[str, int] = {}
        for name in names:
            _, st = rest(via.port, "GET", f"/connectors/{name}/status")
            for t in st["tasks"]:
                owners[t["worker_id"]] = owners.get(t["worker_id"], 0) + 1
        return owners

    # -- the end ----------------------------------------------------------------------------

    def kill(self, w: Worker) -> float:
        """SIGKILL one worker by its PID and reap it; the time of the kill."""
        t0 = time.monotonic()
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait(timeout=30)
        return t0

    def stop(self) -> None:
        for w in self.workers:
            if w.alive:
                w.proc.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log(f"{self.system} worker {w.port} ignored SIGTERM for 30 s; SIGKILL")
                w.proc.kill()
                w.proc.wait()
        with contextlib.suppress(Exception):
            kafka_topics(self.bootstrap, {}, self.topics)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


# "Joined group at generation N ... leaderUrl='http://HOST:PORT/'" (Connect's DistributedHerder);
# "Joined group G at generation N as M (leader)" or "(leader http://HOST:PORT)" (connectd's herder).
_JOINED = {
    "connect": re.compile(rb"Joined group at generation (\d+) .*?leaderUrl='http://[^:]+:(\d+)/'"),
    "connectd": re.compile(
        rb"Joined group \S+ at generation (\d+) as \S+ \(leader(?: http://[^:]+:(\d+))?\)"
    ),
}


def _joins(system: str, w: Worker) -> list[tuple[int, int | None]]:
    """(generation, leader's port; None: this worker) of every join in the worker's log."""
    return [(int(g), int(p) if p else None) for g, p in _JOINED[system].findall(_read(w.log_path))]


def _metric(port: int, name: str) -> int | None:
    code, text = rest(port, "GET", "/metrics", timeout=2)
    if code != 200 or not isinstance(text, str):
        return None
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    return int(float(m.group(1))) if m else None


def _running(st: dict[str, Any], dead: str | None) -> bool:
    return bool(st["state"] == "RUNNING" and st["worker_id"] != dead)


@contextlib.contextmanager
def cluster(system: str, args: argparse.Namespace, timings: Timings, tag: str) -> Iterator[Cluster]:
    c = Cluster(system, args.bootstrap, timings, args.work / f"{system}-{tag}")
    c.extra = list(args.connectd_extra)
    try:
        t0 = time.monotonic()
        c.start()
        c.wait_ready()
        log(f"{system} {tag}: 3 workers up in {time.monotonic() - t0:.1f}s ({c.root})")
        yield c
    finally:
        c.stop()


# --- the measurements ---------------------------------------------------------------------------


def measure_run(
    system: str, out: dict[str, list[float]], *, args: argparse.Namespace, run: int
) -> None:
    """One fresh cluster: ``--creates`` timed creates, then one timed failover."""
    timings = Timings(args.session_timeout_ms, args.rebalance_delay_ms)
    with cluster(system, args, timings, f"run{run}") as c:
        topic = f"{c.prefix}-data"
        kafka_topics(args.bootstrap, {topic: TASKS}, [])
        c.topics.append(topic)
        produce(args.bootstrap, topic, TASKS, 100)
        names = []
        for i in range(args.creates):
            name = f"{c.prefix}-sink-{i}"
            via = c.workers[(run + i) % WORKERS]
            t0 = time.monotonic()
            c.create(via, name, topic, TASKS)
            poll(
                f"{name} RUNNING",
                functools.partial(c.all_running, via, [name], TASKS, None),
                t0 + 120,
            )
            out["create"].append(time.monotonic() - t0)
            names.append(name)
            log(f"{system} run {run}: create -> {TASKS} tasks RUNNING in {out['create'][-1]:.2f}s")
        failover(c, names, args, out["failover"], f"run {run}", deadline_s=120)


def failover(
    c: Cluster,
    names: list[str],
    args: argparse.Namespace,
    into: list[float],
    tag: str,
    deadline_s: float,
) -> None:
    owners = c.task_owners(c.workers[0], names)
    # Whom to kill matters: Connect's leader keeps the lost-worker delay in memory, so when the
    # leader itself dies the new one reassigns at once. A follower that runs tasks by default.
    leader = c.leader()
    if leader is None:
        raise BenchError(f"{c.system}: cannot tell which worker leads the group")
    holders = [w for w in reversed(c.workers) if owners.get(w.worker_id)]
    want_leader = args.kill == "leader"
    victim = next((w for w in holders if (w.port == leader) == want_leader), None)
    if victim is None:
        raise BenchError(f"{c.system}: no {args.kill} runs a task: {owners}")
    survivor = next(w for w in c.workers if w is not victim)
    t0 = c.kill(victim)
    total = TASKS * len(names)
    poll(
        f"{victim.worker_id}'s tasks to run elsewhere",
        lambda: c.all_running(survivor, names, TASKS, victim.worker_id),
        t0 + deadline_s,
        0.1,
    )
    into.append(time.monotonic() - t0)
    moved = owners[victim.worker_id]
    log(
        f"{c.system} {tag}: SIGKILL {args.kill} {victim.worker_id} ({moved} of {total} tasks)"
        f" -> all RUNNING elsewhere in {into[-1]:.2f}s"
    )


def measure_burst(system: str, out: dict[str, list[float]], *, args: argparse.Namespace) -> None:
    timings = Timings(args.session_timeout_ms, args.rebalance_delay_ms)
    with cluster(system, args, timings, "burst") as c:
        topic = f"{c.prefix}-burst"
        kafka_topics(args.bootstrap, {topic: 1}, [])
        c.topics.append(topic)
        gen0 = max(g for w in c.workers if (g := c.generation(w)) is not None)
        reb0 = [c.rebalances(w) or 0 for w in c.workers]
        names = [f"{c.prefix}-burst-{i:03d}" for i in range(args.burst)]
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=9) as pool:
            conflicts = sum(
                pool.map(
                    lambda i: c.create(c.workers[i % WORKERS], names[i], topic, 1, timeout=600),
                    range(args.burst),
                )
            )
        t_posted = time.monotonic() - t0
        poll(
            f"{args.burst} connectors RUNNING",
            lambda: c.all_running(c.workers[0], names, 1, None),
            t0 + 900,
            1.0,
        )
        t_running = time.monotonic() - t0
        stable: list[tuple[int, float]] = []

        def settled() -> int | None:  # one generation on all workers, unchanged for 5 s
            gens = {c.generation(w) for w in c.workers}
            gen = gens.pop() if len(gens) == 1 else None
            if gen is None or not stable or stable[0][0] != gen:
                stable[:] = [(gen or 0, time.monotonic())]
                return None
            return gen if time.monotonic() - stable[0][1] >= 5 else None

        gen1 = poll("the group to settle after the burst", settled, time.monotonic() + 300, 0.5)
        rebs = [(c.rebalances(w) or 0) - r for w, r in zip(c.workers, reb0, strict=True)]
        out["burst_generations"].append(gen1 - gen0)
        out["burst_rebalances"].append(max(rebs))
        out["burst_running_s"].append(t_running)
        log(
            f"{system} burst of {args.burst}: POSTs done in {t_posted:.1f}s ({conflicts} x 409 "
            f"retried), all RUNNING in {t_running:.1f}s; generation {gen0} -> {gen1} "
            f"(+{gen1 - gen0}); rebalances per worker {rebs}"
        )


def measure_defaults(system: str, out: dict[str, list[float]], *, args: argparse.Namespace) -> None:
    with cluster(system, args, Timings(10000, 300000), "defaults") as c:
        topic = f"{c.prefix}-data"
        kafka_topics(args.bootstrap, {topic: TASKS}, [])
        c.topics.append(topic)
        t0 = time.monotonic()
        names = [f"{c.prefix}-sink-0"]
        c.create(c.workers[0], names[0], topic, TASKS)
        poll(
            "the connector RUNNING",
            lambda: c.all_running(c.workers[0], names, TASKS, None),
            t0 + 120,
        )
        failover(c, names, args, out["failover_defaults"], "defaults", deadline_s=420)


# --- report -------------------------------------------------------------------------------------

ROWS = [
    ("create", "s", "REST create -> 6 tasks RUNNING"),
    ("failover", "s", "SIGKILL -> tasks RUNNING elsewhere"),
    ("failover_defaults", "s", "same, both at defaults (10 s, 300 s)"),
    ("burst_running_s", "s", "burst -> all RUNNING"),
    ("burst_generations", "", "burst: generations"),
    ("burst_rebalances", "", "burst: rebalances (max per worker)"),
]


def report(results: dict[str, dict[str, list[float]]]) -> None:
    def cell(v: list[float], unit: str) -> str:
        if not v:
            return "-"
        med = statistics.median(v)
        rng = f" ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else ""
        return f"{med:.2f}{unit}{rng} n={len(v)}" if unit else f"{med:g}{rng} n={len(v)}"

    print(f"\n{'measure':40} {'Kafka Connect 4.1':>28} {'connectd':>28} {'connectd/Connect':>17}")
    for key, unit, label in ROWS:
        a, b = results.get("connect", {}).get(key, []), results.get("connectd", {}).get(key, [])
        ratio = (
            f"{statistics.median(b) / statistics.median(a):.2f}"
            if a and b and statistics.median(a)
            else "-"
        )
        print(f"{label:40} {cell(a, unit):>28} {cell(b, unit):>28} {ratio:>17}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument(
        "--runs", type=int, default=3, help="fresh clusters per system for create/failover"
    )
    ap.add_argument("--creates", type=int, default=3, help="timed creates per run")
    ap.add_argument("--burst", type=int, default=200, help="connectors in the burst; 0 skips it")
    ap.add_argument("--session-timeout-ms", type=int, default=10000)
    ap.add_argument(
        "--rebalance-delay-ms",
        type=int,
        default=10000,
        help="scheduled.rebalance.max.delay.ms of the timed runs (Connect's default: 300000)",
    )
    ap.add_argument(
        "--kill", choices=("follower", "leader"), default="follower", help="which worker to SIGKILL"
    )
    ap.add_argument(
        "--connectd-extra",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line for connectd's worker files, e.g. scheduled.rebalance.delay.crashed=true",
    )
    ap.add_argument("--no-defaults", action="store_true", help="skip the failover at both defaults")
    ap.add_argument(
        "--quick", action="store_true", help="1 run, 1 create, 50-connector burst, no defaults"
    )
    ap.add_argument("--systems", default="connect,connectd", help="connect, connectd or both")
    ap.add_argument("--json", type=Path, help="also write the raw numbers here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    # SIGTERM runs the clean-up (workers ended by PID, topics deleted) instead of just dying.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # aiokafka's producer warns while a just-created topic's metadata propagates.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    if args.quick:
        args.runs, args.creates, args.burst, args.no_defaults = 1, 1, min(args.burst, 50), True
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not set(systems) <= {"connect", "connectd"}:
        ap.error("--systems takes connect, connectd or both")
    args.work = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir="/var/tmp"))
    if "connect" in systems:
        connect_libs()
    results: dict[str, dict[str, list[float]]] = {}
    failed: list[str] = []
    try:
        Step = Callable[[str, dict[str, list[float]]], None]
        steps: list[Step] = [
            functools.partial(measure_run, args=args, run=r) for r in range(args.runs)
        ]
        if args.burst:
            steps.append(functools.partial(measure_burst, args=args))
        if not args.no_defaults:
            steps.append(functools.partial(measure_defaults, args=args))
        for step in steps:
            for system in systems:  # alternate, so both see the same broker and machine load
                out = results.setdefault(system, {k: [] for k, _, _ in ROWS})
                try:
                    step(system, out)
                except BenchError as exc:
                    failed.append(f"{system}: {exc}")
                    log(f"FAILED {system}: {exc}")
    finally:
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)
    print(
        f"\nsession.timeout.ms={args.session_timeout_ms} scheduled.rebalance.max.delay.ms="
        f"{args.rebalance_delay_ms}, SIGKILL of a {args.kill}, {args.runs} run(s), "
        f"broker {args.bootstrap}, load average {os.getloadavg()[0]:.1f}"
    )
    report(results)
    for f in failed:
        print(f"FAILED {f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
