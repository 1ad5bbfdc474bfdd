"""Several ``connectd distributed`` workers on this machine running one connector: the bench's
"one worker per core" variants (``connectd-json-3-2w``).

Started by ``ss_bench.py`` as one command, so the bench's process tree holds every worker,
their executors and REST fronts. It takes the standalone files the bench writes for a run
(the worker's and the connector's properties), makes a distributed worker file of each worker
(the run's own group and internal topics, a REST port and a state directory each), starts the
workers as its children (their logs go to its own output), waits until all of them are members
of one group generation (as a deployment's workers are up before a connector is created; a
connector created while the second worker is still joining starts all its tasks on the first
and then moves some, a rebalance the bench would time instead of the tasks), creates the
connector through the first one's REST API, and waits. SIGTERM is passed on to every worker;
it exits 0 once all of them exited 0, and at once, with the first failure's code, if a worker
ends by itself.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path


def properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker_files(base: dict[str, str], n: int, run_dir: Path) -> list[tuple[Path, int]]:
    """Each worker's properties file and REST port: the run's group, its own state dir."""
    group = f"bench-workers-{uuid.uuid4().hex[:8]}"
    shared = {
        **base,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
    }
    files = []
    for i in range(n):
        port = free_port()
        values = {
            **shared,
            "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(port),
            "state.dir": str(run_dir / f"state-{i}"),
        }
        path = run_dir / f"worker-{i}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        files.append((path, port))
    return files


def generation(port: int) -> tuple[int, bool] | None:
    """A worker's group generation and whether it is applying an assignment, from its
    ``/metrics`` (Connect's rebalance metrics); None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in (
            "kafka_connect_worker_rebalance_epoch",
            "kafka_connect_worker_rebalance_rebalancing",
        ):
            values[name] = float(value)
    if len(values) != 2:
        return None
    return (
        int(values["kafka_connect_worker_rebalance_epoch"]),
        values["kafka_connect_worker_rebalance_rebalancing"] > 0,
    )


def joined(ports: list[int], deadline: float) -> None:
    """Wait until every worker is a member of the same generation and none is rebalancing."""
    seen: list[tuple[int, bool] | None] = []
    while time.monotonic() < deadline:
        seen = [generation(port) for port in ports]
        members = [g for g in seen if g is not None and g[0] > 0 and not g[1]]
        if len(members) == len(ports) and len({g[0] for g in members}) == 1:
            return
        time.sleep(0.05)
    raise SystemExit(f"workers.py: the workers did not join one generation: {seen}")


def create(port: int, connector: dict[str, str], deadline: float) -> None:
    """POST the connector until the worker takes it (it answers once it joined its group)."""
    body = json.dumps({"name": connector["name"], "config": connector}).encode()
    last = ""
    while time.monotonic() < deadline:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/connectors",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                if answer.status == 201:
                    return
                last = f"HTTP {answer.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}: {e.read()[:200]!r}"
        except OSError as e:
            last = str(e)
        time.sleep(0.1)
    raise SystemExit(f"workers.py: the connector was not created: {last}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--connectd", required=True, help="the connectd executable")
    p.add_argument("worker", type=Path, help="the run's standalone worker.properties")
    p.add_argument("connector", type=Path, help="the run's connector.properties")
    args = p.parse_args()
    base = properties(args.worker)
    base.pop("listeners", None)
    base.pop("state.dir", None)
    files = worker_files(base, args.workers, args.worker.parent)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    procs = [
        subprocess.Popen([args.connectd, "distributed", str(path)], stdin=subprocess.DEVNULL)
        for path, _ in files
    ]
    try:
        joined([port for _, port in files], time.monotonic() + 120)
        create(files[0][1], properties(args.connector), time.monotonic() + 120)
        while not stopping:
            for proc in procs:
                if proc.poll() is not None:
                    print(f"workers.py: worker {proc.pid} exited {proc.returncode}", flush=True)
                    return proc.returncode or 1
            time.sleep(0.1)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = [proc.wait() for proc in procs]
    return 0 if all(code == 0 for code in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
