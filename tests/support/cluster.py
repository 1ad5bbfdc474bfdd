"""Clusters of ``connectd distributed`` workers for tests: real processes on loopback, on the
session's broker, one group per test.

- ``cluster`` (fixture, async factory): ``c = await cluster(2)`` starts two workers of a group
  of the test's own (its own ``group.id`` and internal topic names), each with its own
  ``state.dir``, and returns once every worker answers ``GET /health`` and ``GET /connectors``
  with 200.
  ``await cluster(files=[...])`` starts one worker per Connect-shaped template
  (tests/fixtures/distributed/), its ``@BOOTSTRAP@``, ``@PORT@`` and ``@RUN@`` filled in.
  At teardown every worker and every process below it is ended by PID (SIGCONT, SIGTERM, then
  SIGKILL), the teardown fails if any of them is still there, and the internal topics are
  deleted.
- ``Cluster``: the workers of one group; ``wait(check)`` polls a condition across workers with a
  deadline, ``write(...)`` retries a config write while the group has no leader (Connect's 409),
  ``status(worker, connector)``, ``task_owner(...)``, ``restart(worker)``.
- ``ClusterWorker``: a ``DaemonProcess`` (tests/support/daemon.py) running ``connectd
  distributed``: ``rest(...)``, ``signal(sig)``, ``descendants()``, ``log()``.

Nothing here knows which worker leads: tests find a task's worker from its status.

REST ports come from ``CONNECTD_TEST_REST_PORTS`` (``LOW-HIGH``) when set, so that concurrent
test runs on one machine keep apart; otherwise any free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from daemon.config.properties import parse_properties
from support.daemon import DaemonProcess, worker_properties
from support.jvm import TEST_JAVA_OPTIONS
from support.kafka import delete_topic, free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "distributed"
DEMO_FILES = (
    FIXTURES / "connect-distributed-1.properties",
    FIXTURES / "connect-distributed-2.properties",
)

NO_LEADER = (
    "Cannot complete request momentarily due to no known leader URL, likely because a "
    "rebalance was underway."
)
"""Connect's 409 message for a write while the group has no leader."""

READY_PATHS = ("/health", "/connectors")

# Small group timeouts so that a test sees a rebalance in seconds, and a small pool: every
# executor is a JVM, and the machine runs several workers at once. A worker starts its pool only
# once a task that writes through it runs there (executor.pool.start=auto, the default): a
# cluster of echo sinks starts none.
CLUSTER_DEFAULTS = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "rebalance.timeout.ms": "20000",
    "scheduled.rebalance.max.delay.ms": "10000",
    "task.shutdown.graceful.timeout.ms": "1000",
    "task.write.timeout.ms": "600000",
    "executor.pool.size": "1",
    # No spare (see worker_properties): a JVM start fewer per worker that writes.
    "executor.pool.spares": "0",
    "executor.spark.master": "local[1]",
    "executor.spark.conf.spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
}


def _bindable(port: int) -> bool:
    # As the REST server binds (SO_REUSEADDR): a port left in TIME_WAIT by an ended worker is
    # usable again.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def rest_port(taken: set[int]) -> int:
    """A free REST port not in ``taken`` (from ``CONNECTD_TEST_REST_PORTS`` when set)."""
    spec = os.environ.get("CONNECTD_TEST_REST_PORTS", "").strip()
    if not spec:
        while (port := free_port()) in taken:
            pass
        return port
    low, high = (int(p) for p in spec.split("-"))
    for port in range(low, high + 1):
        if port not in taken and _bindable(port):
            return port
    raise RuntimeError(f"no free REST port left in CONNECTD_TEST_REST_PORTS={spec}")


@dataclass(frozen=True)
class ClusterNames:
    """The group and its internal topics: one set per cluster, never shared between tests."""

    group: str
    config_topic: str
    offset_topic: str
    status_topic: str

    @classmethod
    def unique(cls, hint: str, run: str) -> ClusterNames:
        clean = re.sub(r"[^A-Za-z0-9._-]+", "-", hint).strip("-")[:60]
        base = f"connectd-{clean}-{run}"
        return cls(base, f"{base}-configs", f"{base}-offsets", f"{base}-status")

    @classmethod
    def of(cls, values: Mapping[str, str]) -> ClusterNames:
        return cls(
            values["group.id"],
            values["config.storage.topic"],
            values["offset.storage.topic"],
            values["status.storage.topic"],
        )

    def properties(self) -> dict[str, str]:
        return {
            "group.id": self.group,
            "config.storage.topic": self.config_topic,
            "offset.storage.topic": self.offset_topic,
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
        }

    @property
    def topics(self) -> tuple[str, str, str]:
        return (self.config_topic, self.offset_topic, self.status_topic)


def distributed_properties(
    bootstrap: str,
    state_dir: Path,
    port: int,
    names: ClusterNames | None,
    **overrides: str | None,
) -> dict[str, str]:
    """A distributed worker's settings: the standalone test worker's (support.daemon), the
    group's names (``names=None`` leaves them out: a test of a file lacking them), REST on
    ``127.0.0.1:port`` advertised as such, the cluster defaults above, then ``overrides``
    (``_`` for ``.`` in keys); an override whose value is ``None`` removes the key."""
    props = worker_properties(bootstrap, state_dir)
    props.update(names.properties() if names is not None else {})
    props.update(CLUSTER_DEFAULTS)
    props.update(
        {
            "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(port),
        }
    )
    for key, value in overrides.items():
        key = key.replace("_", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return props


def render(template: Path, bootstrap: str, port: int, run: str) -> str:
    """A Connect-shaped worker file with its placeholders filled in."""
    text = template.read_text()
    for placeholder, value in (("@BOOTSTRAP@", bootstrap), ("@PORT@", str(port)), ("@RUN@", run)):
        text = text.replace(placeholder, value)
    assert "@" not in re.sub(r"#.*", "", text), f"{template}: a placeholder is left"
    return text


class ClusterWorker(DaemonProcess):
    """``python -m daemon distributed worker.properties`` as a child process, tracked by PID.

    ``text``, when given, is the worker file's exact content (a rendered template); the
    ``worker`` map still names its listener. Its output (the log, and the last word on
    stderr) goes to ``daemon.log``."""

    mode = "distributed"
    """The command (a test of the harness itself may run its workers standalone)."""

    def __init__(
        self,
        worker: Mapping[str, str],
        workdir: Path,
        *,
        text: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(worker, (), workdir, env)
        if text is not None:
            self.worker_file.write_text(text)
        self.properties = dict(worker)
        self.port = int(self.url.rsplit(":", 1)[1])
        self.seen: dict[int, float] = {}
        """Every process found under this worker (pid → start time), for the teardown's check."""

    @property
    def worker_id(self) -> str:
        """As the cluster names this worker in statuses: the advertised ``host:port``."""
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> ClusterWorker:
        args = [sys.executable, "-m", "daemon", self.mode, str(self.worker_file)]
        if self.first_start is None:
            self.first_start = time.time()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args, cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.starts += 1
        self.note()
        return self

    def note(self) -> list[int]:
        """The worker's descendants now, remembered for the teardown's check."""
        below = self.descendants()
        for pid in [self.pid, *below]:
            with contextlib.suppress(psutil.Error):
                self.seen.setdefault(pid, psutil.Process(pid).create_time())
        return below

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until ``GET /health`` answers 200 (start-up complete: for a distributed worker, the
        group joined and the config log read, KIP-1017) and ``GET /connectors`` answers 200;
        fails at once if the worker exits."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"worker {self.worker_id} exited ({self.proc.returncode}):\n{self.log()}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if all(self.rest("GET", p, timeout=2.0)[0] == 200 for p in READY_PATHS):
                    return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"worker {self.worker_id}: REST not ready after {timeout} s:\n{self.log()}"
                )
            time.sleep(0.1)

    def try_rest(
        self, method: str, path: str, body: Any = None, *, timeout: float = 10.0
    ) -> tuple[int, Any]:
        """``rest``, with a worker that does not answer (stopped, killed) as status 0."""
        try:
            return self.rest(method, path, body, timeout=timeout)
        except (OSError, urllib.error.URLError, ValueError) as e:
            return 0, str(e)

    def status(self, connector: str) -> dict[str, Any] | None:
        """``GET /connectors/{connector}/status`` on this worker; None unless it answers 200."""
        code, body = self.try_rest("GET", f"/connectors/{connector}/status")
        return body if code == 200 and isinstance(body, dict) else None

    def executor_tree(self, pid: int) -> dict[int, float]:
        """``pid`` and the processes below it (its JVM, Spark's Python workers), with start
        times (a pid reused later is another process)."""
        tree: dict[int, float] = {}
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    tree[p.pid] = p.create_time()
        return tree

    def end(self, *, within: float = 30.0) -> None:
        """Teardown: SIGCONT (a stopped worker cannot act on SIGTERM), SIGTERM, then SIGKILL
        of the worker and everything below it; its orphans reaped."""
        if self.alive:
            self.note()
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(within)
        self.kill_all()


def still_there(processes: Mapping[int, float]) -> dict[int, str]:
    """Those of ``processes`` (pid → start time) that still exist, zombies included."""
    left = {}
    for pid, started in processes.items():
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if p.create_time() == started:
                left[pid] = f"{p.status()} {' '.join(p.cmdline()[:4])[:120]}"
    return left


Check = Callable[["ClusterWorker"], Any]


def _each(check: Check, workers: Sequence[ClusterWorker]) -> list[Any]:
    return [check(w) for w in workers]


@dataclass
class Cluster:
    """The workers of one group, and waits across them."""

    bootstrap: str
    names: ClusterNames
    run: str
    """The suffix that makes the names unique (a template's ``@RUN@``)."""
    root: Path
    ports: set[int]
    workers: list[ClusterWorker] = field(default_factory=list)

    def __getitem__(self, i: int) -> ClusterWorker:
        return self.workers[i]

    def __iter__(self) -> Iterator[ClusterWorker]:
        return iter(self.workers)

    def __len__(self) -> int:
        return len(self.workers)

    def add(
        self,
        *,
        template: Path | None = None,
        env: Mapping[str, str] | None = None,
        **overrides: str | None,
    ) -> ClusterWorker:
        """A new worker of this group (files written, not started): from ``template`` (its
        placeholders filled, the test's settings appended) or from ``distributed_properties``."""
        port = rest_port(self.ports)
        self.ports.add(port)
        index = len(self.workers)
        workdir = self.root / f"worker-{index}"
        props = distributed_properties(
            self.bootstrap, workdir / "state", port, self.names, **overrides
        )
        text = None
        if template is not None:
            text = render(template, self.bootstrap, port, self.run)
            given = parse_properties(text, str(template)).values
            extra = {k: v for k, v in props.items() if k not in given}
            text += "\n# Added by tests/support/cluster.py for the test.\n"
            text += "".join(f"{k}={v}\n" for k, v in extra.items())
            props = given | extra
            assert ClusterNames.of(props) == self.names, f"{template}: names of another group"
        worker = ClusterWorker(props, workdir, text=text, env=env)
        self.workers.append(worker)
        return worker

    async def ready(self, *workers: ClusterWorker, timeout: float = 120.0) -> None:
        """Until each of ``workers`` (default: all running ones) answers REST."""
        chosen = workers or tuple(w for w in self.workers if w.alive)
        await asyncio.gather(*(asyncio.to_thread(w.wait_ready, timeout) for w in chosen))

    async def wait(
        self,
        check: Check,
        timeout: float,
        what: str,
        *,
        workers: Sequence[ClusterWorker] | None = None,
        interval: float = 0.1,
    ) -> list[Any]:
        """Poll ``check(worker)`` on each of ``workers`` (default: every live one) until it is
        truthy on all of them at once; returns the values, in the workers' order. Fails naming
        ``what`` and each worker's last value after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            chosen = list(workers) if workers is not None else [w for w in self.workers if w.alive]
            values = await asyncio.to_thread(_each, check, chosen)
            if chosen and all(values):
                return values
            if time.monotonic() > deadline:
                last = {w.worker_id: v for w, v in zip(chosen, values, strict=True)}
                raise AssertionError(f"{what} not reached within {timeout} s (last: {last})")
            await asyncio.sleep(interval)

    async def write(
        self,
        worker: ClusterWorker,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float = 60.0,
    ) -> tuple[int, Any]:
        """A config write through ``worker``, sent again while the answer is Connect's 409 "no
        known leader" (the group still forming) until ``timeout``; the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            code, answer = await asyncio.to_thread(worker.rest, method, path, body)
            no_leader = code == 409 and answer == {"error_code": 409, "message": NO_LEADER}
            if not no_leader or time.monotonic() > deadline:
                return code, answer
            await asyncio.sleep(0.2)

    @staticmethod
    def status(worker: ClusterWorker, connector: str) -> dict[str, Any] | None:
        return worker.status(connector)

    def by_id(self, worker_id: str) -> ClusterWorker:
        (found,) = [w for w in self.workers if w.worker_id == worker_id]
        return found

    async def task_owner(
        self,
        connector: str,
        task: int,
        timeout: float = 240.0,
        *,
        state: str = "RUNNING",
        where: Callable[[dict[str, Any]], bool] = lambda t: True,
    ) -> tuple[ClusterWorker, list[dict[str, Any]]]:
        """Until every live worker shows task ``connector-task`` in ``state`` on one and the
        same ``worker_id`` (and ``where(task status)`` holds on each): that worker, and the
        task's status as each worker shows it."""

        def task_status(w: ClusterWorker) -> dict[str, Any] | str:
            code, body = w.try_rest("GET", f"/connectors/{connector}/status")
            tasks = [t for t in body.get("tasks", []) if t.get("id") == task] if code == 200 else []
            return dict(tasks[0]) if tasks else f"{code}: {body}"

        def agreed(seen: list[dict[str, Any] | str]) -> str | None:
            if not all(isinstance(t, dict) and t.get("state") == state for t in seen):
                return None
            statuses = [t for t in seen if isinstance(t, dict)]
            owners = {t.get("worker_id") for t in statuses}
            if len(owners) == 1 and all(where(t) for t in statuses):
                return str(owners.pop())
            return None

        deadline = time.monotonic() + timeout
        while True:
            chosen = [w for w in self.workers if w.alive]
            seen = await asyncio.to_thread(_each, task_status, chosen)
            if chosen and (owner := agreed(seen)):
                return self.by_id(owner), [t for t in seen if isinstance(t, dict)]
            if time.monotonic() > deadline:
                last = {w.worker_id: t for w, t in zip(chosen, seen, strict=True)}
                raise AssertionError(
                    f"task {connector}-{task} not {state} on one worker as every worker shows"
                    f" it within {timeout} s; last seen: {last}"
                )
            await asyncio.sleep(0.1)

    async def restart(
        self, worker: ClusterWorker, sig: int = signal.SIGTERM, *, within: float = 60.0
    ) -> None:
        """End ``worker`` with ``sig`` (its processes gone, or left to pytest after a
        SIGKILL), then start it again from the same files and wait for its REST."""
        if worker.alive:
            worker.note()
            worker.signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(worker.wait, within)
        worker.kill_all()
        worker.start()
        await self.ready(worker)

    async def start(self, *workers: ClusterWorker, ready: bool = True) -> None:
        for w in workers or tuple(self.workers):
            if not w.alive:
                w.start()
        if ready:
            await self.ready(*workers)


ClusterFactory = Callable[..., Awaitable[Cluster]]


@pytest.fixture
async def cluster(
    kafka_bootstrap: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[ClusterFactory]:
    """Factory: ``await cluster(n=2, files=(), start=True, env=None, **overrides)``. Each call
    is a group of its own; ``files`` (templates) give one worker each instead of ``n``."""
    made: list[Cluster] = []
    ports: set[int] = set()

    async def make(
        n: int = 2,
        *,
        files: Sequence[Path] = (),
        start: bool = True,
        env: Mapping[str, str] | None = None,
        **overrides: str | None,
    ) -> Cluster:
        run = uuid.uuid4().hex[:8]
        names = ClusterNames.unique(request.node.name, run)
        if files:  # the templates name the group and topics, with this cluster's @RUN@
            rendered = render(files[0], kafka_bootstrap, 0, run)
            names = ClusterNames.of(parse_properties(rendered, str(files[0])).values)
        c = Cluster(kafka_bootstrap, names, run, tmp_path / f"cluster-{len(made)}", ports)
        made.append(c)
        templates: Sequence[Path | None] = files or [None] * n
        for template in templates:
            c.add(template=template, env=env, **overrides)
        if start:
            await c.start()
        return c

    try:
        yield make
    finally:
        await end_clusters(made, kafka_bootstrap)


async def end_clusters(made: Sequence[Cluster], bootstrap: str) -> None:
    """Every worker of ``made`` ended (SIGTERM, then SIGKILL of what is left), their internal
    topics deleted; fails if any process ever seen below a worker is still there."""
    workers = [w for c in made for w in c.workers]
    # Concurrently: each SIGTERM waits out the worker's graceful stop.
    await asyncio.gather(*(asyncio.to_thread(w.end) for w in workers))
    seen: dict[int, float] = {}
    for w in workers:
        seen.update(w.seen)
    left = still_there(seen)
    for c in made:
        for topic in c.names.topics:
            with contextlib.suppress(Exception):  # a topic never created is not an error
                await delete_topic(bootstrap, topic)
    assert not left, f"processes of the cluster's workers left after the teardown: {left}"
