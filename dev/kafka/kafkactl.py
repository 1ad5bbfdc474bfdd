#!/usr/bin/env python3
"""Start, stop and query a real single-node Kafka broker (KRaft combined mode) for development.

    python3 dev/kafka/kafkactl.py up [--port N] [--version V] [--dir DIR]   # prints host:port
    python3 dev/kafka/kafkactl.py down [--port N] [--dir DIR]
    python3 dev/kafka/kafkactl.py status [--port N] [--dir DIR]

Standard library only (Python >= 3.11). The broker's jars come from Maven Central through
dev/kafka/pom.xml and are cached in .cache/kafka/<version>/libs; each broker lives in its run
directory (default .cache/kafka/run-<port>/): server.properties, broker.pid, data/, logs/.

Guarantees: `up` is idempotent (a live broker recorded in broker.pid that answers is reused) and
prints only the bootstrap address on stdout; it returns once the broker answers a Metadata request
listing itself, or kills what it started and fails. `down` only ever signals the PID recorded in
broker.pid, and only if that process is the Kafka broker of this run directory.
Exit codes: 0 ok, 1 failure, 3 `status` not running, 69 Java or Maven missing.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import string
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import proctools  # noqa: E402  (dev/proctools.py: what the dev tools share)
from proctools import free_port, is_alive, locked, port_is_free, tail  # noqa: E402

CACHE = REPO / ".cache" / "kafka"
DEFAULT_VERSION = "4.1.2"
DEFAULT_PORT = 9092
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
EX_UNAVAILABLE = 69
LIBS_MARKER = ".complete"
#: Extra JVM options of one broker (``up(jvm_options=...)``), one per line, in its run directory.
JVM_OPTIONS_FILE = "jvm.options"
JVM_OPTS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


class KafkactlError(Exception):
    """A broker could not be started or stopped; the message says why and what to do."""

    exit_code = 1


class PortTaken(KafkactlError):
    """The broker's port (or its controller port) is in use by another process."""


class ToolMissing(KafkactlError):
    """Java >= 17 or Maven is not installed."""

    exit_code = EX_UNAVAILABLE


@dataclass(frozen=True)
class Broker:
    """A running broker started (or found) by `up`."""

    pid: int
    port: int
    run_dir: Path
    version: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def log(msg: str) -> None:
    print(f"kafkactl: {msg}", file=sys.stderr, flush=True)


def default_run_dir(port: int) -> Path:
    return CACHE / f"run-{port}"


# --- tools -------------------------------------------------------------------------------------


def find_java() -> str:
    """The java executable ($JAVA_HOME first), checked to be version 17 or newer."""
    return proctools.find_java(ToolMissing, "the Kafka broker")


def resolve_jars(version: str) -> Path:
    """The directory holding every jar of Kafka `version`, resolved from Maven Central once."""
    vdir = CACHE / version
    libs = vdir / "libs"
    if (libs / LIBS_MARKER).exists():
        return libs
    with locked(vdir / ".lock"):
        if (libs / LIBS_MARKER).exists():
            return libs
        mvn = shutil.which("mvn")
        if not mvn:
            raise ToolMissing("mvn not found: install Maven (Debian/Ubuntu: apt-get install maven)")
        partial = vdir / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        log(f"resolving Kafka {version} jars from Maven Central into {libs}")
        t0 = time.monotonic()
        cmd = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(HERE / "pom.xml"),
            f"-Dkafka.version={version}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={partial}",
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0 or not list(partial.glob("kafka_2.13-*.jar")):
            sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
            raise KafkactlError(f"could not resolve Kafka {version} with Maven (output above)")
        (partial / LIBS_MARKER).write_text(f"kafka {version}\n")
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        log(f"resolved {len(list(libs.glob('*.jar')))} jars in {time.monotonic() - t0:.1f}s")
    return libs


# --- the Kafka protocol, just enough to know the broker is serving ------------------------------


def _request(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes) -> bytes:
    client = b"kafkactl"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    if not 4 <= size <= 1 << 24:
        raise ConnectionError(f"implausible response size {size}: not a Kafka broker?")
    resp = _recv(sock, size)
    if struct.unpack(">i", resp[:4])[0] != corr:
        raise ConnectionError("correlation id mismatch")
    return resp[4:]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def probe(host: str, port: int, timeout: float = 2.0) -> list[int]:
    """Ask the broker for ApiVersions (v0) then Metadata (v4); return the broker ids it lists.

    An empty list means the broker answered but has not registered itself yet.
    Raises OSError (incl. ConnectionError) when it does not answer like a Kafka broker.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        try:
            return _probe(sock)
        except (struct.error, ValueError) as e:
            raise ConnectionError(f"not a Kafka response: {e}") from e


def _probe(sock: socket.socket) -> list[int]:
    resp = _request(sock, 18, 0, 1, b"")
    error, count = struct.unpack(">hi", resp[:6])
    if error != 0:
        raise ConnectionError(f"ApiVersions error {error}")
    versions = {}
    for i in range(count):
        key, lo, hi = struct.unpack(">hhh", resp[6 + 6 * i : 12 + 6 * i])
        versions[key] = (lo, hi)
    lo, hi = versions.get(3, (99, -1))
    if not lo <= 4 <= hi:
        raise ConnectionError(f"broker does not support Metadata v4 (supports {lo}..{hi})")
    # Metadata v4: topics = [] (none), allow_auto_topic_creation = false.
    resp = _request(sock, 3, 4, 2, struct.pack(">ib", 0, 0))
    (n_brokers,) = struct.unpack(">i", resp[4:8])  # after throttle_time_ms
    pos, ids = 8, []
    for _ in range(n_brokers):
        node_id, host_len = struct.unpack(">ih", resp[pos : pos + 6])
        pos += 6 + host_len + 4  # host, port
        (rack_len,) = struct.unpack(">h", resp[pos : pos + 2])
        pos += 2 + max(rack_len, 0)
        ids.append(node_id)
    return ids


# --- processes ---------------------------------------------------------------------------------


def _is_our_broker(pid: int, run_dir: Path) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in argv and str(run_dir / "server.properties").encode() in argv


def read_pid(run_dir: Path) -> int | None:
    """The PID in run_dir/broker.pid if that process is alive and is this directory's broker."""
    try:
        pid = int((run_dir / "broker.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if is_alive(pid) and _is_our_broker(pid, run_dir) else None


def kill_and_reap(pid: int, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, poll up to `timeout` s, then SIGKILL (the process group too); confirm it is gone."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            if sig == signal.SIGKILL and os.getpgid(pid) == pid:
                os.killpg(pid, sig)  # the broker leads its own session
            else:
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not is_alive(pid):
                return
            time.sleep(0.1)
        if sig == signal.SIGTERM:
            log(f"broker pid {pid} ignored SIGTERM for {timeout:.0f}s; sending SIGKILL")
    raise KafkactlError(f"broker pid {pid} is still alive after SIGKILL")


# --- up / down / status ------------------------------------------------------------------------


def _render(template: str, dest: Path, **values: object) -> None:
    text = string.Template((HERE / template).read_text()).substitute(values)
    dest.write_text(text)


def _cluster_id() -> str:
    """A random Kafka Uuid in its base64url form (what `kafka-storage random-uuid` prints)."""
    while True:
        uid = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not uid.startswith("-"):  # Kafka avoids ids that look like command-line flags
            return uid


def _java_cmd(java: str, libs: Path, run_dir: Path, *extra: str) -> list[str]:
    own = run_dir / JVM_OPTIONS_FILE  # up(jvm_options=...): kept for restart too
    return [
        java,
        *JVM_OPTS,
        *os.environ.get("KAFKA_JVM_OPTS", "").split(),
        *(own.read_text().split() if own.is_file() else ()),
        f"-Dlog4j2.configurationFile={run_dir / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={run_dir / 'logs'}",
        "-cp",
        f"{libs}/*",
        *extra,
    ]


def _setting(run_dir: Path, pattern: str) -> str:
    """A value from run_dir/server.properties (as written by `up`), or "?"."""
    with contextlib.suppress(OSError):
        m = re.search(pattern, (run_dir / "server.properties").read_text(), re.M)
        if m:
            return m.group(1)
    return "?"


def _version_of(run_dir: Path) -> str:
    return _setting(run_dir, r"^# kafka\.version=(\S+)")


def up(
    port: int = DEFAULT_PORT,
    version: str = DEFAULT_VERSION,
    run_dir: Path | None = None,
    *,
    ready_timeout: float = READY_TIMEOUT,
    die_with_parent: bool = False,
    listeners: Mapping[str, int] | None = None,
    properties: Mapping[str, str] | None = None,
    format_args: Sequence[str] = (),
    jvm_options: Sequence[str] = (),
) -> Broker:
    """Start a broker on 127.0.0.1:`port` (or reuse the live one of `run_dir`); wait until ready.

    With `die_with_parent` the broker gets SIGKILL when the calling thread's process dies
    (PR_SET_PDEATHSIG): for test sessions, so a killed pytest leaves no JVM behind.
    On failure the broker started here is killed and reaped, and KafkactlError is raised.
    `listeners` adds listeners besides PLAINTEXT on `port` (name -> port, each named after its
    security protocol: SSL, SASL_SSL, SASL_PLAINTEXT), `properties` broker settings they need
    (key stores, SASL mechanisms, JAAS lines), `format_args` arguments of the storage format
    (`--add-scram 'SCRAM-SHA-256=[name=u,password=p]'`), `jvm_options` the broker's JVM
    options besides the usual ones (system properties such as
    `-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...`): for the security tests.
    """
    run_dir = (run_dir or default_run_dir(port)).resolve()
    with locked(run_dir / ".lock"):
        pid = read_pid(run_dir)
        if pid is not None:
            with contextlib.suppress(OSError):
                if probe("127.0.0.1", port):
                    running = _version_of(run_dir)
                    if running != version:
                        log(f"note: the running broker is Kafka {running}, not {version}")
                    return Broker(pid, port, run_dir, running)
            log(f"broker pid {pid} in {run_dir} does not answer on port {port}; restarting it")
            kill_and_reap(pid)
        (run_dir / "broker.pid").unlink(missing_ok=True)
        extra = Extra(
            dict(listeners or {}), dict(properties or {}), tuple(format_args), tuple(jvm_options)
        )
        return _start(port, version, run_dir, ready_timeout, die_with_parent, extra)


@dataclass(frozen=True)
class Extra:
    """Listeners, settings and format arguments beyond the plain development broker's."""

    listeners: dict[str, int]
    properties: dict[str, str]
    format_args: tuple[str, ...]
    jvm_options: tuple[str, ...] = ()

    def apply(self, properties: Path) -> None:
        """Add the listeners to server.properties and append the settings; write the JVM
        options where `_java_cmd` reads them."""
        options = properties.with_name(JVM_OPTIONS_FILE)
        options.unlink(missing_ok=True)
        if self.jvm_options:
            options.write_text("\n".join(self.jvm_options) + "\n")
        if not self.listeners and not self.properties:
            return
        lines = properties.read_text().splitlines()
        added = {name: f"{name}://127.0.0.1:{port}" for name, port in self.listeners.items()}
        for i, line in enumerate(lines):
            key = line.split("=", 1)[0]
            if key in ("listeners", "advertised.listeners") and added:
                lines[i] = line + "," + ",".join(added.values())
            elif key == "listener.security.protocol.map" and added:
                lines[i] = line + "," + ",".join(f"{n}:{n}" for n in added)
        lines += ["", "# Added for this run (kafkactl up(properties=...))."]
        lines += [f"{k}={v}" for k, v in self.properties.items()]
        properties.write_text("\n".join(lines) + "\n")


def _start(
    port: int,
    version: str,
    run_dir: Path,
    ready_timeout: float,
    die_with_parent: bool,
    extra: Extra | None = None,
) -> Broker:
    extra = extra or Extra({}, {}, ())
    java = find_java()
    libs = resolve_jars(version)
    # As the broker binds it (the JVM sets SO_REUSEADDR): a broker that just stopped leaves
    # its connections in TIME_WAIT for a minute, which must not count as a taken port.
    if not port_is_free(port, reuse=True):
        raise PortTaken(
            f"port {port} on 127.0.0.1 is taken by another process: "
            "choose another with --port or KAFKA_PORT"
        )
    data_dir, log_dir = run_dir / "data", run_dir / "logs"
    # A fresh cluster every time: tests and demos must not see a previous run's topics.
    shutil.rmtree(data_dir, ignore_errors=True)
    shutil.rmtree(log_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    log_dir.mkdir(parents=True)
    controller_port = free_port()
    while controller_port == port:
        controller_port = free_port()
    _render(
        "server.properties.in",
        run_dir / "server.properties",
        version=version,
        port=port,
        controller_port=controller_port,
        data_dir=data_dir,
    )
    extra.apply(run_dir / "server.properties")
    _render("log4j2.properties.in", run_dir / "log4j2.properties", log_dir=log_dir)

    t0 = time.monotonic()
    fmt = _java_cmd(
        java,
        libs,
        run_dir,
        "-XX:TieredStopAtLevel=1",
        "kafka.tools.StorageTool",
        "format",
        "-t",
        _cluster_id(),
        "-c",
        str(run_dir / "server.properties"),
        *extra.format_args,
    )
    out = subprocess.run(fmt, capture_output=True, text=True, check=False, timeout=120)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-4000:] + out.stderr[-4000:])
        raise KafkactlError(f"formatting {data_dir} failed (output above)")
    return _launch(
        java,
        libs,
        port,
        version,
        run_dir,
        ready_timeout,
        die_with_parent,
        f"format {time.monotonic() - t0:.1f}s, ",
    )


def restart(
    run_dir: Path, *, ready_timeout: float = READY_TIMEOUT, die_with_parent: bool = False
) -> Broker:
    """Start the broker of `run_dir` again on its storage and ports, as a restarted machine does.

    Unlike `up`, nothing is formatted or deleted: topics, records and committed group offsets
    survive (for tests of broker outages). A live broker of the directory is returned as is.
    The port is checked with SO_REUSEADDR: the stopped broker's connections may linger in
    TIME_WAIT for a minute, which the JVM's own bind tolerates.
    """
    run_dir = run_dir.resolve()
    with locked(run_dir / ".lock"):
        port = int(_setting(run_dir, r"^advertised\.listeners=PLAINTEXT://[^:]+:(\d+)"))
        version = _version_of(run_dir)
        pid = read_pid(run_dir)
        if pid is not None:
            return Broker(pid, port, run_dir, version)
        if not (run_dir / "data" / "meta.properties").is_file():
            raise KafkactlError(f"{run_dir} holds no formatted broker storage: use `up` first")
        if not port_is_free(port, reuse=True):
            raise PortTaken(f"port {port} on 127.0.0.1 is taken by another process")
        return _launch(
            find_java(),
            resolve_jars(version),
            port,
            version,
            run_dir,
            ready_timeout,
            die_with_parent,
            "",
        )


def _launch(
    java: str,
    libs: Path,
    port: int,
    version: str,
    run_dir: Path,
    ready_timeout: float,
    die_with_parent: bool,
    took: str,
) -> Broker:
    log_dir = run_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    preexec = proctools.die_with_parent if die_with_parent else None
    cmd = _java_cmd(java, libs, run_dir, "kafka.Kafka", str(run_dir / "server.properties"))
    with (log_dir / "kafka.out").open("ab") as out_f:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out_f,
            stderr=subprocess.STDOUT,
            cwd=run_dir,
            start_new_session=True,
            preexec_fn=preexec,
        )
    (run_dir / "broker.pid").write_text(f"{proc.pid}\n")
    t1 = time.monotonic()
    try:
        _wait_ready(proc, port, t1 + ready_timeout, log_dir)
    except BaseException:
        kill_and_reap(proc.pid, timeout=5.0)
        (run_dir / "broker.pid").unlink(missing_ok=True)
        raise
    log(
        f"Kafka {version} ready on 127.0.0.1:{port} (pid {proc.pid}): {took}"
        f"start to ready {time.monotonic() - t1:.1f}s; logs in {log_dir}"
    )
    # The Popen object is dropped without wait(): the broker outlives us; is_alive() reaps it.
    proc.returncode = 0  # keeps Popen.__del__ from warning about a still-running child
    return Broker(proc.pid, port, run_dir, version)


def _wait_ready(proc: subprocess.Popen[bytes], port: int, deadline: float, log_dir: Path) -> None:
    last = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            msg = f"the broker exited with status {proc.returncode} before it was ready"
            _fail(msg, log_dir, PortTaken if _bind_failed(log_dir) else KafkactlError)
        try:
            if 1 in probe("127.0.0.1", port, timeout=2.0):
                return
            last = "answered, but does not list itself yet"
        except OSError as e:
            last = str(e) or type(e).__name__
        time.sleep(0.25)
    _fail(f"the broker was not ready on port {port} in time ({last})", log_dir)


def _bind_failed(log_dir: Path) -> bool:
    """Whether the broker died because a port was taken (a race with another process)."""
    return any(
        "Address already in use" in tail(log_dir / n, 200) for n in ("server.log", "kafka.out")
    )


def _fail(msg: str, log_dir: Path, error: type[KafkactlError] = KafkactlError) -> None:
    for name in ("server.log", "kafka.out"):
        sys.stderr.write(f"--- last 40 lines of {log_dir / name} ---\n{tail(log_dir / name)}\n")
    raise error(msg)


def down(run_dir: Path, timeout: float = STOP_TIMEOUT) -> int | None:
    """Stop the broker recorded in run_dir/broker.pid; return its PID, or None if none ran."""
    run_dir = run_dir.resolve()
    with locked(run_dir / ".lock"):
        pid = read_pid(run_dir)
        if pid is not None:
            kill_and_reap(pid, timeout)
        (run_dir / "broker.pid").unlink(missing_ok=True)
        return pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkactl.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--port", type=int, default=int(os.environ.get("KAFKA_PORT", DEFAULT_PORT)))
    parser.add_argument("--version", default=os.environ.get("KAFKA_VERSION", DEFAULT_VERSION))
    parser.add_argument("--dir", type=Path, help="run directory (default .cache/kafka/run-PORT)")
    parser.add_argument("--timeout", type=float, default=READY_TIMEOUT, help="ready deadline, s")
    args = parser.parse_args(argv)
    run_dir = (args.dir or default_run_dir(args.port)).resolve()
    try:
        if args.command == "up":
            broker = up(args.port, args.version, run_dir, ready_timeout=args.timeout)
            print(broker.bootstrap, flush=True)
        elif args.command == "down":
            pid = down(run_dir)
            log(f"stopped broker pid {pid}" if pid else f"no broker running in {run_dir}")
        else:
            pid = read_pid(run_dir)
            if pid is None:
                print(f"not running ({run_dir})")
                return 3
            addr = _setting(run_dir, r"^advertised\.listeners=PLAINTEXT://(\S+)")
            print(f"running: pid {pid}, Kafka {_version_of(run_dir)}, {addr} ({run_dir})")
    except KafkactlError as e:
        log(f"error: {e}")
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
