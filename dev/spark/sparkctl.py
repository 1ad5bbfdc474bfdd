#!/usr/bin/env python3
"""Start, stop and query a real Spark standalone cluster (one master, N workers) on loopback.

    python dev/spark/sparkctl.py up [--port N] [--ui-port N] [--workers N] [--dir DIR]
    python dev/spark/sparkctl.py down [--port N] [--dir DIR]
    python dev/spark/sparkctl.py status [--port N] [--dir DIR]

Standard library only, but `up` needs the pinned pyspark (run it with the project's venv
Python, or pass --spark-home): the master and the workers are Spark's own classes
(`org.apache.spark.deploy.master.Master`, `...worker.Worker`) from the pip-installed pyspark's
jars, with the command line `bin/spark-class` would run (Spark's launcher builds it), so nothing
is downloaded. Each cluster lives in
its run directory (default .cache/spark/run-<port>/): master.pid, worker-<i>.pid, logs/,
worker-<i>/ (the workers' application directories: each executor's stdout/stderr).

Guarantees: `up` is idempotent (a live master and live workers recorded in the run directory are
reused, missing workers are started) and prints only the master URL on stdout; it returns once
the master's JSON status says ALIVE with every worker registered, or kills what it started and
fails. `down` signals only the PIDs recorded in the run directory, and only while each is the
master or a worker of this directory; it also ends what they started (the executors of the
applications still running) and returns once all of it is gone.
Exit codes: 0 ok, 1 failure, 3 `status` not running, 69 Java or pyspark missing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from proctools import locked, port_is_free  # noqa: E402  (dev/proctools.py)

CACHE = REPO / ".cache" / "spark"
DEFAULT_PORT = 7077
DEFAULT_UI_PORT = 8080
DEFAULT_WORKERS = 2
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 15.0
EX_UNAVAILABLE = 69
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
#: The master and the workers only coordinate; Spark's default heap for them is 1 GiB each.
DAEMON_MEMORY = "256m"


class SparkctlError(Exception):
    """A cluster could not be started or stopped; the message says why and what to do."""

    exit_code = 1


class ToolMissing(SparkctlError):
    """Java or pyspark is not installed."""

    exit_code = EX_UNAVAILABLE


@dataclass(frozen=True)
class Cluster:
    """A running cluster started (or found) by `up`."""

    master_pid: int
    worker_pids: tuple[int, ...]
    port: int
    ui_port: int
    run_dir: Path

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def pids(self) -> list[int]:
        return [self.master_pid, *self.worker_pids]


def log(msg: str) -> None:
    print(f"sparkctl: {msg}", file=sys.stderr, flush=True)


def default_run_dir(port: int) -> Path:
    return CACHE / f"run-{port}"


def spark_home(given: Path | None = None) -> Path:
    """The pip-installed pyspark's directory (it holds bin/spark-class and jars/)."""
    if given is None:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise ToolMissing(
                "pyspark is not importable: run sparkctl with the project's venv Python "
                "(make venv; .venv/bin/python dev/spark/sparkctl.py) or pass --spark-home"
            )
        given = Path(spec.origin).parent
    if not (given / "bin" / "spark-class").exists() or not (given / "jars").is_dir():
        raise ToolMissing(f"{given} has no bin/spark-class and jars/: not a Spark home")
    return given


# --- processes ---------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of `pid` from /proc, or None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19])


def is_alive(pid: int) -> bool:
    """True while `pid` runs; reaps it if it is our child (or, under a subreaper, an orphan
    adopted by us: a killed worker's executors) and has exited."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
        if (stat := _stat(pid)) is not None and stat[0] in ("Z", "X"):
            # A JVM whose main thread ended while its other threads still exit: WNOHANG says
            # "running" until the last one is gone, so wait for it now.
            os.waitpid(pid, 0)
            return False
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of `pid` (the executors a worker started, their Python workers),
    as pid -> start time, so a later kill can tell them from a reused PID."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[1], []).append(int(entry))
            starts[int(entry)] = stat[2]
    out: dict[int, int] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        if p not in out:
            out[p] = starts[p]
            todo.extend(children.get(p, []))
    return out


def _role_of(pid: int, run_dir: Path) -> str | None:
    """'master' or 'worker' if `pid` is that daemon of this run directory, else None."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    if f"CONNECTD_SPARK_RUN_DIR={run_dir}".encode() not in env:
        return None
    if MASTER_CLASS.encode() in argv:
        return "master"
    if WORKER_CLASS.encode() in argv:
        return "worker"
    return None


def read_pid(path: Path, run_dir: Path, role: str) -> int | None:
    """The PID in `path` if that process is alive and is this directory's `role`."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if is_alive(pid) and _role_of(pid, run_dir) == role else None


def kill_tree(pid: int, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM `pid` (a Spark daemon stops its executors on SIGTERM), SIGKILL it after
    `timeout`, then SIGKILL whatever it had started that is still there; confirm all gone."""
    below = descendants(pid)
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if _wait_gone([pid], wait):
            break
    else:
        raise SparkctlError(f"pid {pid} is still alive after SIGKILL")
    left = [p for p, start in below.items() if (s := _stat(p)) is not None and s[2] == start]
    for p in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    if not _wait_gone(left, 10.0):
        raise SparkctlError(f"processes {left} started by pid {pid} are still alive after SIGKILL")


def _wait_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not any(is_alive(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"({path} not found)"


# --- up / down / status ------------------------------------------------------------------------


def master_status(ui_port: int, timeout: float = 2.0) -> dict[str, Any]:
    """The master's JSON status (`/json/`): workers, active and completed applications."""
    url = f"http://127.0.0.1:{ui_port}/json/"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        data: dict[str, Any] = json.load(resp)
    return data


def _env(home: Path, run_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    # What bin/load-spark-env.sh exports for spark-class (pip's pyspark has no spark-env.sh).
    found = re.search(r"SPARK_SCALA_VERSION=(\S+)", _read(home / "bin" / "load-spark-env.sh"))
    env.update(
        SPARK_SCALA_VERSION=found.group(1) if found else "2.13",
        SPARK_CONF_DIR=env.get("SPARK_CONF_DIR", str(home / "conf")),
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        SPARK_LOG_DIR=str(run_dir / "logs"),
        # Marks the daemons as this directory's: `down` signals only processes carrying it.
        CONNECTD_SPARK_RUN_DIR=str(run_dir),
    )
    # A cluster node has none of the daemon's import path: its executors must not either.
    env.pop("PYTHONPATH", None)
    return env


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _command(home: Path, args: list[str], env: dict[str, str]) -> list[str]:
    """The java command line ``bin/spark-class`` would exec for ``args``, from Spark's own
    launcher (``org.apache.spark.launcher.Main``: classpath, daemon memory, Java options).

    Asked directly rather than through ``spark-class``: that script runs the launcher in a
    process substitution and then execs, which leaves the launcher's processes to be reaped
    by whoever adopts orphans (a test session, a subreaper daemon) as zombies."""
    java = str(Path(env["JAVA_HOME"]) / "bin" / "java") if env.get("JAVA_HOME") else "java"
    launcher = [java, "-Xmx128m", "-cp", str(home / "jars" / "*"), "org.apache.spark.launcher.Main"]
    out = subprocess.run([*launcher, *args], env=env, capture_output=True, check=False, timeout=60)
    _, flag, rest = out.stdout.partition(b"\0\n")
    if out.returncode != 0 or not flag:
        raise SparkctlError(
            f"Spark's launcher failed (exit {out.returncode}): {out.stderr.decode()[-2000:]}"
        )
    cmd = [a.decode() for a in rest.split(b"\0")[:-1]]
    if cmd and cmd[0] == "env":  # leading NAME=VALUE settings for the command
        cmd.pop(0)
        while cmd and "=" in cmd[0] and not cmd[0].startswith("/"):
            key, _, value = cmd.pop(0).partition("=")
            env[key] = value
    return cmd


def _launch(
    home: Path, run_dir: Path, name: str, args: list[str], die_with_parent: bool
) -> subprocess.Popen[bytes]:
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = _env(home, run_dir)
    cmd = _command(home, args, env)
    with (logs / f"{name}.out").open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=run_dir,
            env=env,
            start_new_session=True,
            preexec_fn=_stay_with_caller if die_with_parent else None,
        )
    (run_dir / f"{name}.pid").write_text(f"{proc.pid}\n")
    proc.returncode = 0  # dropped without wait(): it outlives us; is_alive() reaps it
    return proc


def _stay_with_caller() -> None:
    """For a caller that stays (a test session): the daemon dies with it, and keeps its own
    orphans. A caller that adopts orphans (a subreaper, as pytest is here) would otherwise get
    the cluster's: a PySpark worker whose daemon ended first goes to the nearest subreaper above
    it. Kept by the Spark daemon, which does not reap them, they stay zombies below it until
    `down`, which reaps them. (`make spark-up`'s daemons need neither: their parent exits at
    once, and init reaps their orphans.)"""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def up(
    port: int = DEFAULT_PORT,
    ui_port: int | None = None,
    run_dir: Path | None = None,
    *,
    workers: int = DEFAULT_WORKERS,
    worker_cores: int = 1,
    worker_memory: str = "2g",
    spark_home_dir: Path | None = None,
    ready_timeout: float = READY_TIMEOUT,
    die_with_parent: bool = False,
) -> Cluster:
    """Start a master on 127.0.0.1:`port` (web UI and JSON status on `ui_port`, default
    8080 as Spark's) and `workers` workers of `worker_cores` cores and `worker_memory` each,
    or reuse the live ones of `run_dir`; return once all are registered. On failure what was
    started here is killed and SparkctlError raised."""
    ui_port = ui_port or DEFAULT_UI_PORT
    run_dir = (run_dir or default_run_dir(port)).resolve()
    if workers < 1:
        raise SparkctlError(f"--workers must be at least 1, got {workers}")
    with locked(run_dir / ".lock"):
        started: list[int] = []
        try:
            return _up(
                port, ui_port, run_dir, workers, worker_cores, worker_memory,
                spark_home_dir, ready_timeout, die_with_parent, started,
            )  # fmt: skip
        except BaseException:
            for pid in started:
                kill_tree(pid, timeout=5.0)
            raise


def _up(
    port: int,
    ui_port: int,
    run_dir: Path,
    workers: int,
    cores: int,
    memory: str,
    home_dir: Path | None,
    ready_timeout: float,
    die_with_parent: bool,
    started: list[int],
) -> Cluster:
    home = spark_home(home_dir)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ToolMissing(
            "java not found: install Java 17 (apt-get install openjdk-17-jre-headless)"
        )
    master = read_pid(run_dir / "master.pid", run_dir, "master")
    if master is not None:  # reused: its UI is where it was started
        with contextlib.suppress(OSError, ValueError):
            ui_port = int((run_dir / "master.ui-port").read_text())
    else:
        for p, what in ((port, "port"), (ui_port, "ui port")):
            if not port_is_free(p, reuse=True):  # as the JVM binds
                raise SparkctlError(f"{what} {p} on 127.0.0.1 is taken: choose another")
        args = [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port)]
        proc = _launch(
            home, run_dir, "master", [*args, "--webui-port", str(ui_port)], die_with_parent
        )
        master = proc.pid
        (run_dir / "master.ui-port").write_text(f"{ui_port}\n")
        started.append(master)
    pids = []
    for i in range(1, workers + 1):
        pid = read_pid(run_dir / f"worker-{i}.pid", run_dir, "worker")
        if pid is None:
            work = run_dir / f"worker-{i}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            args = [
                WORKER_CLASS,
                "--host", "127.0.0.1",
                "--webui-port", "0",
                "--cores", str(cores),
                "--memory", memory,
                "--work-dir", str(work),
                f"spark://127.0.0.1:{port}",
            ]  # fmt: skip
            pid = _launch(home, run_dir, f"worker-{i}", args, die_with_parent).pid
            started.append(pid)
        pids.append(pid)
    cluster = Cluster(master, tuple(pids), port, ui_port, run_dir)
    _wait_ready(cluster, time.monotonic() + ready_timeout)
    if started:
        log(
            f"Spark master {cluster.url} (UI {cluster.ui}) with {workers} worker(s);"
            f" logs in {run_dir / 'logs'}"
        )
    return cluster


def _wait_ready(cluster: Cluster, deadline: float) -> None:
    last = "no answer yet"
    while time.monotonic() < deadline:
        for pid in cluster.pids():
            if not is_alive(pid):
                _fail(f"pid {pid} exited before the cluster was ready", cluster.run_dir)
        try:
            status = master_status(cluster.ui_port)
            alive = sum(1 for w in status.get("workers", ()) if w.get("state") == "ALIVE")
            if status.get("status") == "ALIVE" and alive >= len(cluster.worker_pids):
                return
            last = f"master {status.get('status')}, {alive} of {len(cluster.worker_pids)} workers"
        except OSError as exc:
            last = str(exc) or type(exc).__name__
        time.sleep(0.25)
    _fail(f"the cluster was not ready in time ({last})", cluster.run_dir)


def _fail(msg: str, run_dir: Path) -> None:
    for out in sorted((run_dir / "logs").glob("*.out")):
        sys.stderr.write(f"--- last 20 lines of {out} ---\n{tail(out, 20)}\n")
    raise SparkctlError(msg)


def down(run_dir: Path, timeout: float = STOP_TIMEOUT) -> list[int]:
    """Stop the workers (and what they run), then the master, of `run_dir`; their PIDs."""
    run_dir = run_dir.resolve()
    stopped = []
    with locked(run_dir / ".lock"):
        for path in [*sorted(run_dir.glob("worker-*.pid")), run_dir / "master.pid"]:
            role = "master" if path.name == "master.pid" else "worker"
            pid = read_pid(path, run_dir, role)
            if pid is not None:
                kill_tree(pid, timeout)
                stopped.append(pid)
            path.unlink(missing_ok=True)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparkctl.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    env_port = int(os.environ.get("SPARK_MASTER_PORT", DEFAULT_PORT))
    parser.add_argument("--port", type=int, default=env_port, help="master port")
    env_ui = int(os.environ.get("SPARK_MASTER_WEBUI_PORT", DEFAULT_UI_PORT))
    parser.add_argument("--ui-port", type=int, default=env_ui, help="master web UI / JSON port")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--worker-cores", type=int, default=1)
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--spark-home", type=Path, help="default: the importable pyspark's")
    parser.add_argument("--dir", type=Path, help="run directory (default .cache/spark/run-PORT)")
    parser.add_argument("--timeout", type=float, default=READY_TIMEOUT, help="ready deadline, s")
    args = parser.parse_args(argv)
    run_dir = (args.dir or default_run_dir(args.port)).resolve()
    try:
        if args.command == "up":
            cluster = up(
                args.port,
                args.ui_port,
                run_dir,
                workers=args.workers,
                worker_cores=args.worker_cores,
                worker_memory=args.worker_memory,
                spark_home_dir=args.spark_home,
                ready_timeout=args.timeout,
            )
            print(cluster.url, flush=True)
        elif args.command == "down":
            pids = down(run_dir)
            log(f"stopped pids {pids}" if pids else f"no cluster running in {run_dir}")
        else:
            master = read_pid(run_dir / "master.pid", run_dir, "master")
            if master is None:
                print(f"not running ({run_dir})")
                return 3
            workers = [
                p
                for path in sorted(run_dir.glob("worker-*.pid"))
                if (p := read_pid(path, run_dir, "worker")) is not None
            ]
            print(f"running: master pid {master}, workers {workers} ({run_dir})")
    except SparkctlError as e:
        log(f"error: {e}")
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
