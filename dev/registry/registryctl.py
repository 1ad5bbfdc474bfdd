#!/usr/bin/env python3
"""Start, stop and query a real Confluent-compatible Schema Registry on loopback.

    python dev/registry/registryctl.py up [--port N] [--dir DIR]
    python dev/registry/registryctl.py down [--port N] [--dir DIR]
    python dev/registry/registryctl.py status [--port N] [--dir DIR]

The registry is Apicurio Registry 2.6.13.Final (Apache 2.0), the ready Quarkus distribution
from Maven Central (`io.apicurio:apicurio-registry-app:2.6.13.Final:tar.gz:all`, 142 MB, fetched
once with Maven into ~/.m2 and unpacked into .cache/registry/). It runs on Java 17 with its
in-memory storage and serves Confluent's REST API under `/apis/ccompat/v7` (v6 too): the URL
`up` prints is what `schema.registry.url` takes, and Confluent's own clients (confluent-kafka's
SchemaRegistryClient and serializers) talk to it unchanged. Its schema ids are content ids, as
Confluent's clients expect; an unknown id answers 404 with error_code 40403.

Standard library only. Each registry lives in its run directory (default
.cache/registry/run-<port>/): registry.pid, logs/registry.out. Guarantees: `up` is idempotent (a
live registry recorded in the run directory is reused) and prints only the URL on stdout; it
returns once the registry answers `GET .../subjects`, or kills what it started and fails.
`down` signals only the PID recorded in the run directory, and only while that process is this
directory's registry, and returns once it is gone. Nothing is kept between runs: every `up` of
a stopped registry starts empty.
Exit codes: 0 ok, 1 failure, 3 `status` not running, 69 Java or Maven missing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import proctools  # noqa: E402  (dev/proctools.py: what the dev tools share)
from proctools import free_port, is_alive, locked, port_is_free, tail  # noqa: E402

CACHE = REPO / ".cache" / "registry"
VERSION = "2.6.13.Final"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
ARCHIVE = f"apicurio-registry-app-{VERSION}-all.tar.gz"
RUNNER = f"apicurio-registry-app-{VERSION}-runner.jar"
API = "/apis/ccompat/v7"
DEFAULT_PORT = 8081
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 15.0
EX_UNAVAILABLE = 69
#: Measured here: RSS ~160 MB with these; the registry only answers a few requests.
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class RegistryctlError(Exception):
    """A registry could not be started or stopped; the message says why and what to do."""

    exit_code = 1


class PortTaken(RegistryctlError):
    """The port (or the management port) is taken by another process."""


class ToolMissing(RegistryctlError):
    """Java or Maven is not installed."""

    exit_code = EX_UNAVAILABLE


@dataclass(frozen=True)
class Registry:
    """A running registry started (or found) by `up`."""

    pid: int
    port: int
    run_dir: Path

    @property
    def url(self) -> str:
        """What `schema.registry.url` takes (Confluent's API root)."""
        return f"http://127.0.0.1:{self.port}{API}"


def log(msg: str) -> None:
    print(f"registryctl: {msg}", file=sys.stderr, flush=True)


def default_run_dir(port: int) -> Path:
    return CACHE / f"run-{port}"


# --- tools -------------------------------------------------------------------------------------


def find_java() -> str:
    """The java executable ($JAVA_HOME first), checked to be version 17 or newer."""
    return proctools.find_java(ToolMissing, "the registry")


def install() -> Path:
    """The unpacked distribution (its runner jar and lib/), fetched from Maven Central once."""
    home = CACHE / VERSION
    if (home / RUNNER).is_file():
        return home
    with locked(CACHE / ".install.lock"):
        if (home / RUNNER).is_file():
            return home
        mvn = shutil.which("mvn")
        if not mvn:
            raise ToolMissing("mvn not found: install Maven (Debian/Ubuntu: apt-get install maven)")
        log(f"fetching {ARTIFACT} from Maven Central (142 MB, once)")
        t0 = time.monotonic()
        cmd = [mvn, "-q", "-B", "dependency:get", f"-Dartifact={ARTIFACT}", "-Dtransitive=false"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=CACHE)
        repo = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
        archive = repo / "io/apicurio/apicurio-registry-app" / VERSION / ARCHIVE
        if out.returncode != 0 or not archive.is_file():
            sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
            raise RegistryctlError(f"could not fetch {ARTIFACT} with Maven (output above)")
        partial = CACHE / f"{VERSION}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        if not (partial / RUNNER).is_file():
            raise RegistryctlError(f"{archive} holds no {RUNNER}")
        shutil.rmtree(home, ignore_errors=True)
        partial.rename(home)
        log(f"installed into {home} in {time.monotonic() - t0:.1f}s")
    return home


# --- processes ---------------------------------------------------------------------------------


def _is_ours(pid: int, run_dir: Path) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return RUNNER.encode() in b" ".join(argv) and f"-Dconnectd.run.dir={run_dir}".encode() in argv


def read_pid(run_dir: Path) -> int | None:
    """The PID in run_dir/registry.pid if that process is alive and is this directory's."""
    try:
        pid = int((run_dir / "registry.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if is_alive(pid) and _is_ours(pid, run_dir) else None


def _port_of(run_dir: Path) -> int:
    return int((run_dir / "registry.port").read_text().split()[0])


def kill_and_reap(pid: int, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM (SIGCONT too: a test may have stopped it), poll up to `timeout` s, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
            if sig == signal.SIGTERM:
                os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not is_alive(pid):
                return
            time.sleep(0.1)
        if sig == signal.SIGTERM:
            log(f"registry pid {pid} ignored SIGTERM for {timeout:.0f}s; sending SIGKILL")
    raise RegistryctlError(f"registry pid {pid} is still alive after SIGKILL")


def answers(port: int, timeout: float = 2.0) -> bool:
    """Whether the registry on `port` serves Confluent's API (its subject list)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{API}/subjects", timeout=timeout) as r:
            return bool(r.status == 200)
    except (OSError, urllib.error.URLError):
        return False


# --- up / down ---------------------------------------------------------------------------------


def up(
    port: int = DEFAULT_PORT,
    run_dir: Path | None = None,
    *,
    ready_timeout: float = READY_TIMEOUT,
    die_with_parent: bool = False,
) -> Registry:
    """Start a registry on 127.0.0.1:`port` (or reuse the live one of `run_dir`); wait until it
    answers. With `die_with_parent` it gets SIGKILL when the calling process dies (for test
    sessions). On failure what was started here is killed and reaped."""
    run_dir = (run_dir or default_run_dir(port)).resolve()
    with locked(run_dir / ".lock"):
        pid = read_pid(run_dir)
        if pid is not None:
            if answers(_port_of(run_dir)):
                return Registry(pid, _port_of(run_dir), run_dir)
            log(f"registry pid {pid} in {run_dir} does not answer; restarting it")
            kill_and_reap(pid)
        (run_dir / "registry.pid").unlink(missing_ok=True)
        return _start(port, run_dir, ready_timeout, die_with_parent)


def _start(port: int, run_dir: Path, ready_timeout: float, die_with_parent: bool) -> Registry:
    java = find_java()
    home = install()
    if not port_is_free(port, reuse=True):
        raise PortTaken(f"port {port} on 127.0.0.1 is taken: choose another with --port")
    management = free_port()
    log_dir = run_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        java,
        *JVM_OPTIONS,
        f"-Dconnectd.run.dir={run_dir}",
        "-Dquarkus.http.host=127.0.0.1",
        f"-Dquarkus.http.port={port}",
        "-Dquarkus.management.host=127.0.0.1",
        f"-Dquarkus.management.port={management}",
        "-jar",
        str(home / RUNNER),
    ]
    preexec = proctools.die_with_parent if die_with_parent else None
    with (log_dir / "registry.out").open("ab") as out_f:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out_f,
            stderr=subprocess.STDOUT,
            cwd=run_dir,
            start_new_session=True,
            preexec_fn=preexec,
        )
    (run_dir / "registry.pid").write_text(f"{proc.pid}\n")
    (run_dir / "registry.port").write_text(f"{port}\n")
    t0 = time.monotonic()
    try:
        while not answers(port):
            if proc.poll() is not None:
                bind = "Address already in use" in tail(log_dir / "registry.out", 200)
                _fail(f"the registry exited with status {proc.returncode}", log_dir, bind)
            if time.monotonic() > t0 + ready_timeout:
                _fail(f"the registry did not answer on port {port} in time", log_dir, False)
            time.sleep(0.25)
    except BaseException:
        kill_and_reap(proc.pid, timeout=5.0)
        (run_dir / "registry.pid").unlink(missing_ok=True)
        raise
    log(
        f"Apicurio Registry {VERSION} ready on 127.0.0.1:{port} (pid {proc.pid}) in "
        f"{time.monotonic() - t0:.1f}s; log in {log_dir}"
    )
    proc.returncode = 0  # outlives us; is_alive() reaps it
    return Registry(proc.pid, port, run_dir)


def _fail(msg: str, log_dir: Path, port_taken: bool) -> None:
    sys.stderr.write(f"--- last 40 lines of {log_dir / 'registry.out'} ---\n")
    sys.stderr.write(tail(log_dir / "registry.out") + "\n")
    raise (PortTaken if port_taken else RegistryctlError)(msg)


def down(run_dir: Path, timeout: float = STOP_TIMEOUT) -> int | None:
    """Stop the registry recorded in run_dir/registry.pid; its PID, or None if none ran."""
    run_dir = run_dir.resolve()
    with locked(run_dir / ".lock"):
        pid = read_pid(run_dir)
        if pid is not None:
            kill_and_reap(pid, timeout)
        (run_dir / "registry.pid").unlink(missing_ok=True)
        return pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="registryctl.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status", "install"])
    default_port = int(os.environ.get("REGISTRY_PORT", DEFAULT_PORT))
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--dir", type=Path, help="run directory (default .cache/registry/run-PORT)")
    parser.add_argument("--timeout", type=float, default=READY_TIMEOUT, help="ready deadline, s")
    args = parser.parse_args(argv)
    run_dir = (args.dir or default_run_dir(args.port)).resolve()
    try:
        if args.command == "install":
            log(f"installed: {install()}")
        elif args.command == "up":
            print(up(args.port, run_dir, ready_timeout=args.timeout).url, flush=True)
        elif args.command == "down":
            pid = down(run_dir)
            log(f"stopped registry pid {pid}" if pid else f"no registry running in {run_dir}")
        else:
            pid = read_pid(run_dir)
            if pid is None:
                print(f"not running ({run_dir})")
                return 3
            print(f"running: pid {pid}, {Registry(pid, _port_of(run_dir), run_dir).url}")
    except RegistryctlError as e:
        log(f"error: {e}")
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
