"""Daemons for tests: in-process (``Daemon`` with ``handle_signals=False``) and as a real
subprocess (``python -m daemon standalone ...``), each cleaned up at teardown, whatever happened.

- ``worker_properties(bootstrap, state_dir, **overrides)``: a small worker (1 executor + 1 spare,
  ``local[2]``, no Spark UI, 512 MB driver, REST on a free port) as a ``{key: value}`` map. Its
  executors start as the daemon's default says (``executor.pool.start=auto``): only once a task
  of a connector that writes through them runs, so a daemon of echo sinks starts no JVM; a test
  that needs them anyway says ``executor_pool_start="eager"``.
- ``make_plan(properties, connectors=())``: a standalone ``LaunchPlan`` from maps.
- ``run_daemon`` (fixture, async factory): ``d = await run_daemon(props, connectors=[...],
  executors=pool)`` starts an in-process ``Daemon`` (shut down at teardown).
- ``daemon_process`` (fixture, factory): ``p = daemon_process(props, connectors=[...])`` starts
  ``python -m daemon standalone`` with files written under ``tmp_path``; tracked by PID, its
  whole process tree killed at teardown. ``p.rest(...)`` calls its REST API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any

import psutil
import pytest

from daemon.config import Mode, parse_connector, parse_worker
from daemon.config.plan import LaunchPlan
from daemon.connectors.api import SinkConnector, SinkTask, SinkTaskContext
from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition
from daemon.daemon import Daemon
from daemon.executor import ExecutorInfo, PoolStatus, WriteLease
from daemon.runtime.executors import Executors
from daemon.storage.commitlog import CommitLog
from daemon.storage.standalone import ConfigStore
from support.jvm import TEST_JAVA_OPTIONS
from support.kafka import free_port

ROOT = Path(__file__).resolve().parents[2]


def worker_properties(bootstrap: str, state_dir: Path, **overrides: str) -> dict[str, str]:
    """Worker settings for tests; ``overrides`` use ``_`` for ``.`` in keys, or pass a dict."""
    props = {
        "bootstrap.servers": bootstrap,
        "listeners": f"http://127.0.0.1:{free_port()}",
        "state.dir": str(state_dir),
        "key.converter": "string",
        "value.converter": "string",
        "offset.flush.interval.ms": "1000",
        "task.shutdown.graceful.timeout.ms": "2000",
        "task.write.timeout.ms": "60000",
        "executor.pool.size": "1",
        # No spare: a test daemon's spare would start only once its writes pause, and costs a
        # JVM start of CPU each time; the executor tests prove what spares do.
        "executor.pool.spares": "0",
        "executor.spark.master": "local[2]",
        "executor.spark.conf.spark.ui.enabled": "false",
        "executor.spark.conf.spark.driver.memory": "512m",
        "executor.spark.conf.spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
        "log.level": "INFO",
    }
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return props


def make_plan(
    properties: Mapping[str, str], connectors: Sequence[Mapping[str, str]] = ()
) -> LaunchPlan:
    worker = parse_worker(properties, mode=Mode.STANDALONE).config
    return LaunchPlan(
        mode=Mode.STANDALONE,
        worker=worker,
        connectors=tuple(parse_connector(c).config for c in connectors),
    )


async def wait_until(
    check: Callable[[], Any], timeout: float, what: str = "the condition", interval: float = 0.05
) -> Any:
    """Poll ``check()`` (sync or async) until it returns a truthy value; that value. Raises
    ``AssertionError`` naming ``what`` (and the last value) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s (last: {value!r})")
        await asyncio.sleep(interval)


class NoExecutors:
    """``Executors`` for a runtime that must not write: ``submit`` fails the test."""

    def submit(self, task_id: str, fn: str, batch: Any = None, **options: Any) -> WriteLease:
        raise AssertionError(f"task {task_id}: no write expected (it submitted {fn})")

    def start_soon(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        pass  # a hint that a task may write: submit says whether one does

    async def ready(self, timeout: float) -> bool:
        return True  # nothing to wait for: submit fails the test

    def current_pid(self, task_id: str) -> int | None:
        return None

    def snapshot(self) -> list[ExecutorInfo]:
        return []

    def status(self) -> PoolStatus:
        raise AssertionError("no pool status expected")


DaemonFactory = Callable[..., Awaitable[Daemon]]


@pytest.fixture
async def run_daemon() -> AsyncIterator[DaemonFactory]:
    """Factory for in-process daemons (REST on the daemon's loop unless ``rest.front.process``
    is given); each is shut down at teardown."""
    daemons: list[Daemon] = []

    async def start(
        properties: Mapping[str, str],
        *,
        connectors: Sequence[Mapping[str, str]] = (),
        executors: Executors | None = None,
        store: ConfigStore | None = None,
        rest: bool = True,
    ) -> Daemon:
        # In-process daemons serve REST from their own loop unless a test asks for the front
        # process (subprocess daemons keep the default: the front).
        properties = {"rest.front.process": "false", **properties}
        daemon = Daemon(
            make_plan(properties, connectors),
            executors=executors,
            handle_signals=False,
            store=store,
            rest=rest,
        )
        daemons.append(daemon)
        await daemon.start()
        return daemon

    yield start
    for daemon in reversed(daemons):
        await daemon.shutdown()


def write_properties(path: Path, values: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


class DaemonProcess:
    """``python -m daemon standalone`` as a child process, tracked by PID."""

    def __init__(
        self,
        worker: Mapping[str, str],
        connectors: Sequence[Mapping[str, str]],
        workdir: Path,
        env: Mapping[str, str] | None = None,
        flags: Sequence[str] = (),
    ) -> None:
        self.workdir = workdir
        self.flags = list(flags)  # options after ``standalone`` (``--until-caught-up``)
        workdir.mkdir(parents=True, exist_ok=True)
        self.worker_file = write_properties(workdir / "worker.properties", worker)
        self.connector_files = [
            write_properties(workdir / f"connector-{i}.properties", c)
            for i, c in enumerate(connectors)
        ]
        listener = worker["listeners"].split(",")[0].strip()
        self.url = listener.rstrip("/")
        self.log_path = workdir / "daemon.log"
        self.env = dict(os.environ) | dict(env or {})
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), str(ROOT / "tests"), self.env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.orphaned: dict[int, float] = {}
        self.first_start: float | None = None  # wall time of the first start (orphans' floor)
        self.killed_outright = False  # SIGKILLed at least once: its orphans come to pytest
        """Descendants the daemon had when a test SIGKILLed it: pytest's to reap at teardown."""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> DaemonProcess:
        args = [sys.executable, "-m", "daemon", "standalone", *self.flags, str(self.worker_file)]
        args += [str(f) for f in self.connector_files]
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        if self.first_start is None:
            self.first_start = time.time()
        try:
            self.proc = subprocess.Popen(
                args, cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        finally:
            log.close()
        self.starts += 1
        return self

    def wait_rest(self, timeout: float = 60.0) -> None:
        """Until ``GET /health`` answers 200 (the worker has started its connectors)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited ({self.proc.returncode}):\n{self.log()}")
            try:
                if self.rest("GET", "/health", timeout=2.0)[0] == 200:
                    return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"REST not ready after {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def rest(
        self, method: str, path: str, body: Any = None, *, timeout: float = 60.0
    ) -> tuple[int, Any]:
        """One REST call: (status, parsed JSON or None). HTTP errors are returned, not raised."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, json.loads(raw) if raw else None

    def log(self, tail: int | None = 6000) -> str:
        """The last ``tail`` characters of its log (None: all of it)."""
        try:
            text = self.log_path.read_text(errors="replace")
            return text if tail is None else text[-tail:]
        except OSError:
            return ""

    def descendants(self) -> list[int]:
        try:
            return [p.pid for p in psutil.Process(self.pid).children(recursive=True)]
        except psutil.Error:
            return []

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if sig == signal.SIGKILL:
                # A daemon killed outright reaps nothing: its executors die (parent-death
                # signal) and come to pytest, the subreaper, whose zombies they stay until the
                # teardown collects them (systemd's control group does it in production).
                # Frozen first, so that no child it starts (a replacement executor) can slip
                # in between the list of its descendants and the kill.
                os.kill(self.pid, signal.SIGSTOP)
                _wait_stopped(self.pid, deadline_s=5.0)
                self.orphaned.update(_started(self.descendants()))
                self.killed_outright = True
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def kill_all(self) -> None:
        """SIGKILL the daemon and everything below it (teardown; safe to call twice)."""
        if self.proc is None:
            return
        below = self.descendants()
        if self.proc.poll() is None:
            self.killed_outright = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        for pid in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap_orphans(_started(below) | self.orphaned, deadline_s=10.0)
        if self.killed_outright and self.first_start is not None:
            # Not after a daemon that ended on its own: what it left unreaped is its leak.
            _reap_late_orphans(self.first_start)


def _reap_late_orphans(since: float) -> None:
    """Collect pytest's zombie children started after ``since``: descendants a SIGKILLed
    daemon's executor started after its tree was listed (a JVM still being spawned) come to
    pytest, the subreaper, as orphans no list named. Only zombies: what still runs is the
    leak check's to report."""
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
            if child.status() == psutil.STATUS_ZOMBIE and child.create_time() >= since - 1.0:
                os.waitpid(child.pid, os.WNOHANG)


def _wait_stopped(pid: int, deadline_s: float) -> None:
    """Poll until ``pid`` is stopped (``T``) or gone, or the deadline passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.005)


def _started(pids: Collection[int]) -> dict[int, float]:
    """Each pid with its start time (tells the process from a later one reusing its pid)."""
    found = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found[pid] = psutil.Process(pid).create_time()
    return found


def _reap_orphans(tree: Mapping[int, float], deadline_s: float) -> None:
    """Wait for the daemon's descendants killed with it (``tree``: pid → start time). With the
    daemon gone they are re-parented to pytest (a subreaper, tests/conftest.py), so their exit
    status is ours to collect; unreaped, they would stay as zombies (a leak for the leak check).
    """
    left = dict(tree)
    end = time.monotonic() + deadline_s
    while left and time.monotonic() < end:
        for pid, started in list(left.items()):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not (yet) ours: gone, or its parent is still exiting
                try:
                    if psutil.Process(pid).create_time() != started:
                        del left[pid]  # the pid was reused: that one is gone
                except psutil.NoSuchProcess:
                    del left[pid]
                continue
            if done == pid:
                del left[pid]
        time.sleep(0.02)


ProcessFactory = Callable[..., DaemonProcess]


@pytest.fixture
def daemon_process(tmp_path: Path) -> Iterator[ProcessFactory]:
    """Factory for subprocess daemons (started, REST up); all killed at teardown."""
    made: list[DaemonProcess] = []

    def start(
        worker: Mapping[str, str],
        connectors: Sequence[Mapping[str, str]] = (),
        *,
        wait: bool = True,
        env: Mapping[str, str] | None = None,
        start: bool = True,
        flags: Sequence[str] = (),
    ) -> DaemonProcess:
        p = DaemonProcess(worker, connectors, tmp_path / f"daemon-{len(made)}", env, flags)
        made.append(p)
        if not start:  # files written, not started: the test starts it (and it is still ended)
            return p
        p.start()
        if wait:
            p.wait_rest()
        return p

    yield start
    for p in made:
        p.signal(signal.SIGTERM)
    for p in made:
        with contextlib.suppress(subprocess.TimeoutExpired, AssertionError):
            p.wait(30)
        p.kill_all()


# -- sinks for runtime tests (importable by path: connector.class=support.daemon:RecordingSink) --

RECORDED: dict[str, list[tuple[str, Any]]] = {}
"""In-process RecordingSink tasks log their calls here, by ``record.key``: (callback, detail)."""


class RecordingTask(SinkTask):
    """Logs every callback into ``RECORDED[record.key]``; ``put.fn`` (optional) runs that write
    function in an executor for each non-empty batch."""

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context
        self.key = config.get("record.key", "default")
        self.fn = config.get("put.fn")
        self._log("start", context.epoch)
        self._log("started", context.task_id.task)

    def _log(self, what: str, detail: Any = None) -> None:
        RECORDED.setdefault(self.key, []).append((what, detail))

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        self._log("open", sorted(partitions))

    async def put(self, batch: RecordBatch) -> None:
        if len(batch):
            self._log("put", [(r.topic, r.partition, r.start, r.end) for r in batch.ranges])
            if self.fn:
                await self.context.run_in_executor(self.fn, batch.table, timeout=0)

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        if self.context.is_closing:
            self._log("closing_pre_commit", dict(offsets))
        return offsets

    async def close(self, partitions: Collection[TopicPartition]) -> None:
        self._log("close", sorted(partitions))

    async def stop(self) -> None:
        self._log("stop", self.context.epoch)
        self._log("stopped", self.context.task_id.task)


class RecordingSink(SinkConnector):
    def task_class(self) -> type[SinkTask]:
        return RecordingTask


def recorded(key: str, what: str) -> list[Any]:
    return [detail for name, detail in RECORDED.get(key, []) if name == what]


def put_offsets(key: str) -> list[tuple[str, int, int]]:
    """Every (topic, partition, offset) a RecordingSink with ``record.key`` was given."""
    out = []
    for ranges in recorded(key, "put"):
        for topic, partition, start, end in ranges:
            out.extend((topic, partition, o) for o in range(start, end))
    return out


class LedgerTask(SinkTask):
    """Exactly-once without Spark: a commit log under ``path`` records offset ranges (no data
    files) with the incarnation's epoch. ``open`` fences and seeks to the committed offsets.
    ``ledger.fail.task=N``: task N fails at its first ``put`` that carries records."""

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context
        fail = config.get("ledger.fail.task")
        self.fail_on_put = fail is not None and int(fail) == context.task_id.task
        self.log = CommitLog(config["path"])
        await asyncio.to_thread(self.log.open)

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        ctx = self.context
        await asyncio.to_thread(
            self.log.fence, ctx.task_id.connector, ctx.task_id.task, ctx.epoch, partitions
        )
        committed = await asyncio.to_thread(self.log.committed_offsets, partitions)
        if committed:
            ctx.offset(committed)

    async def put(self, batch: RecordBatch) -> None:
        if batch.ranges and self.fail_on_put:
            raise RuntimeError(f"task {self.context.task_id} fails on purpose (ledger.fail.task)")
        if batch.ranges:
            await self.commit(batch.ranges)

    async def commit(self, ranges: Collection[OffsetRange]) -> None:
        ctx = self.context
        await asyncio.to_thread(
            self.log.commit,
            ctx.task_id.connector,
            ctx.task_id.task,
            ctx.epoch,
            ranges,
            [],
            commit_id=self.log.new_commit_id(),
        )

    async def stop(self) -> None:
        self.log.close()


class LedgerSink(SinkConnector):
    needs_executors = False  # its commit log is written from the task, without Spark

    def task_class(self) -> type[SinkTask]:
        return LedgerTask
