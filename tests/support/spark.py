"""pytest plugin: a warm executor pool for the session, private pools per test, /proc helpers.

Loaded from tests/conftest.py with ``pytest_plugins = ["support.spark"]``.

- ``spark_pool`` (session): a ``ThreadedPool`` (size 1, 1 spare, ``local[2]``, UI off, 512 MB
  driver) that tests share when they do not need a pool of their own. It runs on its own event
  loop in a thread, so any test (any loop, asyncio or uvloop) can ``spark_pool.submit(...)``
  (the runtime's one call signature: a ``WriteLease`` on the caller's loop) or ``await
  spark_pool.run(...)``; cancelling that await kills the write's executor like the pool itself
  does. Its processes are
  registered with the leak check (``support.procs``) as session-owned. It builds the JDK
  class-data-sharing archive once (``~/.cache/connectd``), which later pools start from.
- ``make_pool`` (function, async): ``await make_pool(**settings)`` starts a private
  ``ExecutorPool`` on the test's loop with ``spark_settings(**settings)``; closed at teardown.
- ``spark_settings(**overrides)``: the ``PoolSettings`` tests use (small, UI off, local[2]).
- /proc helpers: ``walk_tree``, ``wait_gone``, ``reap``, ``ExecutorCensus``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import replace
from typing import Any

import pytest

from daemon.executor import ExecutorInfo, ExecutorPool, PoolSettings, PoolStatus, WriteLease
from daemon.executor import formats as table_formats
from daemon.executor.process import ProcStat, read_stat, scan, tree
from support import procs
from support.jvm import TEST_JAVA_OPTIONS

#: Generous: executors start in 7-20 s here, much slower while other JVMs compete for 2 cores.
START_TIMEOUT = 240.0


def spark_settings(**overrides: Any) -> PoolSettings:
    """Pool settings for tests: 1 executor + 1 spare, local[2], no UI, 512 MB driver.

    Uses an existing class-data-sharing archive but does not build one (the session pool does).
    """
    base = PoolSettings(
        size=1,
        spares=1,
        spark_master="local[2]",
        spark_conf={
            "spark.ui.enabled": "false",
            "spark.driver.memory": "512m",
            "spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,
        },
        start_timeout=START_TIMEOUT,
        acquire_timeout=START_TIMEOUT,
        cds_build=False,
    )
    return replace(base, **overrides)


class ThreadedPool:
    """An ``ExecutorPool`` on its own event loop in a thread, callable from any thread or loop.

    The executors' parent-death signal is tied to that thread: it lives until ``close()``.
    """

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="spark-pool")
        self._pool: ExecutorPool | None = None

    def _call(self, coro: Awaitable[Any], timeout: float | None = None) -> Any:
        async def wrapped() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrapped(), self._loop).result(timeout)

    @property
    def pool(self) -> ExecutorPool:
        assert self._pool is not None, "ThreadedPool.start() was not called"
        return self._pool

    def start(self) -> None:
        self._thread.start()

        async def make() -> ExecutorPool:
            pool = ExecutorPool(self.settings)
            await pool.start()
            return pool

        self._pool = self._call(make())

    def wait_ready(self, n: int = 1, timeout: float = START_TIMEOUT) -> None:
        self._call(self.pool.wait_ready(n, timeout))

    def submit(
        self,
        task_id: str,
        fn: str | Callable[..., Any],
        batch: Any = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
        formats: Collection[str] = (),
        group: str | None = None,
        group_limit: int | None = None,
        spark: bool = True,
    ) -> WriteLease:
        """``ExecutorPool.submit`` on the pool's loop, seen through a lease on the caller's
        loop: its acceptance, outcome and ``killed`` come from the pool-side write. Cancelling
        the await of its ``result()`` cancels the pool-side write (its executor killed and
        reaped) before it re-raises."""
        submit = functools.partial(
            self.pool.submit,
            task_id,
            fn,
            batch,
            timeout=timeout,
            kwargs=kwargs,
            acquire_timeout=acquire_timeout,
            formats=formats,
            group=group,
            group_limit=group_limit,
            spark=spark,
        )
        lease = WriteLease(task_id, asyncio.get_running_loop())
        lease.start(self._relay(lease, submit))
        return lease

    async def _relay(self, lease: WriteLease, submit: Callable[[], WriteLease]) -> Any:
        caller = asyncio.get_running_loop()
        ended: concurrent.futures.Future[tuple[str, Any]] = concurrent.futures.Future()
        sides: list[WriteLease] = []
        helpers: list[asyncio.Task[Any]] = []

        def launch() -> None:  # on the pool's loop
            try:
                inner = submit()
            except BaseException as exc:  # refused at once (closed pool, missing jars)
                ended.set_result(("error", exc))
                return
            sides.append(inner)

            async def forward_acceptance() -> None:
                with contextlib.suppress(BaseException):
                    got = await inner.accepted()
                    caller.call_soon_threadsafe(lease.accept, got.executor, got.pid, got.at)

            def finish(t: asyncio.Task[Any]) -> None:
                if t.cancelled():
                    ended.set_result(("cancelled", None))
                elif t.exception() is not None:
                    ended.set_result(("error", t.exception()))
                else:
                    ended.set_result(("ok", t.result()))

            helpers.append(self._loop.create_task(forward_acceptance()))
            result = self._loop.create_task(inner.result())
            result.add_done_callback(finish)
            helpers.append(result)

        def cancel() -> None:  # on the pool's loop, after ``launch``
            if len(helpers) == 2:
                helpers[1].cancel()  # ``WriteLease.result`` cancels the write, kills, reaps

        self._loop.call_soon_threadsafe(launch)
        waiter = asyncio.wrap_future(ended)
        try:
            kind, value = await asyncio.shield(waiter)
        except asyncio.CancelledError:
            self._loop.call_soon_threadsafe(cancel)
            with contextlib.suppress(BaseException):
                await asyncio.shield(waiter)
            raise
        finally:
            if sides:  # the pool-side write has ended (or a second cancel gave up on it)
                lease.killed = sides[0].killed
                accepted = sides[0].acceptance
                if accepted is not None:
                    lease.accept(accepted.executor, accepted.pid, accepted.at)
        if kind == "error":
            raise value
        if kind == "cancelled":
            raise asyncio.CancelledError()
        return value

    async def run(
        self,
        task_id: str,
        fn: str | Callable[..., Any],
        batch: Any = None,
        *,
        timeout: float,
        kwargs: Mapping[str, Any] | None = None,
        acquire_timeout: float | None = None,
        formats: Collection[str] = (),
        spark: bool = True,
    ) -> Any:
        """``await submit(...).result()``, as ``ExecutorPool.run``."""
        lease = self.submit(
            task_id,
            fn,
            batch,
            timeout=timeout,
            kwargs=kwargs,
            acquire_timeout=acquire_timeout,
            formats=formats,
            spark=spark,
        )
        return await lease.result()

    def start_soon(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        """``ExecutorPool.start_soon`` on the pool's loop (nothing once it started)."""
        self._loop.call_soon_threadsafe(
            functools.partial(self.pool.start_soon, formats, spark=spark)
        )

    async def ready(self, timeout: float) -> bool:
        """``ExecutorPool.ready`` on the pool's loop."""
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self.pool.ready(timeout), self._loop)
        )

    def current_pid(self, task_id: str) -> int | None:
        return self._query(lambda p: p.current_pid(task_id))  # type: ignore[no-any-return]

    def snapshot(self) -> list[ExecutorInfo]:
        return self._query(lambda p: p.snapshot())  # type: ignore[no-any-return]

    def status(self) -> PoolStatus:
        return self._query(lambda p: p.status())  # type: ignore[no-any-return]

    def pids(self) -> list[int]:
        """The pool's processes (for the leak check); [] once closed."""
        if not self._thread.is_alive() or self._pool is None:
            return []
        try:
            return self._query(lambda p: p.pids())  # type: ignore[no-any-return]
        except (RuntimeError, concurrent.futures.TimeoutError):
            return []

    def _query(self, fn: Callable[[ExecutorPool], Any]) -> Any:
        async def ask() -> Any:
            return fn(self.pool)

        return self._call(ask(), timeout=10.0)

    def close(self, graceful_timeout: float = 5.0) -> None:
        if self._thread.is_alive():
            try:
                if self._pool is not None:
                    self._call(self._pool.close(graceful_timeout), timeout=60.0)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=30.0)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()


def session_pool(settings: PoolSettings) -> Iterator[ThreadedPool]:
    """A warm ``ThreadedPool`` for a session fixture to yield from: its processes count as
    the session's for the leak check; closed when the fixture ends."""
    pool = ThreadedPool(settings)
    unregister = procs.register_session_owner(pool.pids)
    try:
        pool.start()
        pool.wait_ready(1)
        yield pool
    finally:
        pool.close()
        unregister()


@pytest.fixture(scope="session")
def spark_pool() -> Iterator[ThreadedPool]:
    """The session's warm pool; see the module docstring."""
    yield from session_pool(spark_settings(cds_build=True))


@pytest.fixture(scope="session")
def formats_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedPool]:
    """The session's warm pool for the table formats' tests: its sessions load Delta and
    Iceberg; one executor and a spare that starts at once, so a test that kills an executor
    finds the next one warm instead of waiting for a JVM with the formats' jars."""
    missing = table_formats.missing_jars(("delta", "iceberg"), None)
    if missing:
        pytest.fail(f"the table formats' jars are missing: {missing}; run `make jars`")
    scratch = tmp_path_factory.mktemp("formats-pool")
    settings = spark_settings(
        spares=1,
        spare_quiet=0.0,
        formats=frozenset({"delta", "iceberg"}),
        work_dir=scratch / "work",
        handoff_dir=scratch / "shm",
    )
    yield from session_pool(settings)


@pytest.fixture
async def make_pool() -> AsyncIterator[Callable[..., Awaitable[ExecutorPool]]]:
    """Factory for private pools on the test's loop; every pool is closed at teardown."""
    pools: list[ExecutorPool] = []

    async def make(**overrides: Any) -> ExecutorPool:
        pool = ExecutorPool(spark_settings(**overrides))
        pools.append(pool)
        await pool.start()
        return pool

    yield make
    for pool in pools:
        await pool.close(graceful_timeout=0.0)


# -- /proc helpers (independent of the pool's own bookkeeping) ------------------------------


def walk_tree(root: int) -> dict[int, ProcStat]:
    """``root`` and its descendants, plus every process of its session if it leads one."""
    procs_now = scan()
    root_stat = procs_now.get(root)
    session = root if root_stat is not None and root_stat.sid == root else None
    return tree(root, procs_now, session=session)


def alive(stats: Iterable[ProcStat]) -> list[ProcStat]:
    """The processes of ``stats`` still running (same pid and start time, not a zombie)."""
    out = []
    for stat in stats:
        now = read_stat(stat.pid)
        if now is not None and now.starttime == stat.starttime and now.running:
            out.append(stat)
    return out


def reap(stats: Iterable[ProcStat]) -> None:
    """Reap the zombies among ``stats`` that were re-parented to us (pytest is a subreaper)."""
    for stat in stats:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(stat.pid, os.WNOHANG)


def wait_gone(stats: Iterable[ProcStat], timeout: float) -> list[ProcStat]:
    """Poll /proc until none of ``stats`` runs; the survivors at ``timeout``."""
    stats = list(stats)
    deadline = time.monotonic() + timeout
    while True:
        left = alive(stats)
        reap(stats)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.01)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except OSError:
        return {}
    return dict(item.partition("=")[::2] for item in raw.split("\0") if "=" in item)


class ExecutorCensus:
    """Samples /proc in a background thread: how many executor processes and executor JVMs of
    one pool are running, and the most seen at once.

    The pool is recognised by its scratch directory (``work_dir``, unique per test): an
    executor has it in its TMPDIR, its JVM in ``-Djava.io.tmpdir``. Nothing is taken from the
    pool's own bookkeeping.
    """

    def __init__(self, work_dir: str, interval: float = 0.02) -> None:
        self.work_dir = work_dir
        self.interval = interval
        self.max_executors = 0
        self.max_jvms = 0
        self.samples = 0
        self.last_seen: list[str] = []
        self.max_seen: list[str] = []  # the executors seen when the maximum was reached
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="census", daemon=True)

    def count(self) -> tuple[int, int]:
        executors = 0
        jvms: dict[int, ProcStat] = {}
        self.last_seen = []
        for pid, stat in scan().items():
            if not stat.running or not (stat.comm == "java" or stat.comm.startswith("python")):
                continue
            cmd = _cmdline(pid)
            if stat.comm == "java":
                # The executor's JVM; not spark-submit's launcher (a short-lived JVM that only
                # prints the command line, and may still be exiting when the real one starts).
                if (
                    "org.apache.spark.deploy.SparkSubmit" in cmd
                    and "org.apache.spark.launcher.Main" not in cmd
                    and self.work_dir in cmd
                ):
                    jvms[pid] = stat
            elif (
                stat.sid == pid  # executors lead sessions; a fork of one about to exec does not
                and "daemon.executor.child" in cmd
                and "--build-archive" not in cmd
            ):
                hit = _environ(pid).get("TMPDIR", "").startswith(self.work_dir)
                executors += hit
                if hit:
                    self.last_seen.append(f"{pid} {stat.state} ppid={stat.ppid} {cmd[:60]}")
        # A JVM starting a process (PySpark's worker daemon) shows a clone of itself until exec.
        real = [s for s in jvms.values() if s.ppid not in jvms]
        self.last_seen += [f"java {s.pid} {s.state} ppid={s.ppid}" for s in real]
        return executors, len(real)

    def _loop(self) -> None:
        while not self._stop.is_set():
            executors, jvms = self.count()
            if executors > self.max_executors or jvms > self.max_jvms:
                self.max_seen = list(self.last_seen)
            self.max_executors = max(self.max_executors, executors)
            self.max_jvms = max(self.max_jvms, jvms)
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> ExecutorCensus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
