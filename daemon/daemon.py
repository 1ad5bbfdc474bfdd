"""The daemon: executor pool, worker, REST API and event-loop lag monitor, with one lifecycle.

``Daemon.run()`` is the CLI's entry (uvloop, signal handlers, logging); tests and embedders use
``async with Daemon(plan, handle_signals=False) as d: ...`` or ``await d.serve()``. Nothing is
global: several daemons can live in one process (tests run a few, sharing one warm pool).

Its parts are built in ``daemon.assembly``. Lifecycle: ``start`` makes the process a child
subreaper (orphans of killed executors come back to us), makes the executor pool and, with
``executor.pool.start=eager``, starts it in the background (executors need seconds: tasks wait
for them, the daemon does not), binds the REST listeners, then starts the worker's connectors.
With ``auto`` (the default) the pool starts when the first task of a connector class that needs
executors is set up, and never for a daemon without one; with ``on-demand``, at the first
write. ``shutdown`` stops taking records and runs every task's stop sequence in parallel,
closes the REST server, then closes the pool (its close kills what is left). When
``shutdown`` returns nothing the daemon started is alive.

Before anything is started or any state read, the daemon takes the lock on ``state.dir``
(``daemon.storage.statelock``; held until the end of ``shutdown``): a second daemon on the same
directory exits at once (``StateDirLocked``, exit 75) naming the directory and the PID holding
it. Then the brokers must answer within ``startup.kafka.timeout.ms`` (``daemon.kafkacheck``;
else ``ServiceUnavailable``, exit 69), and so must a cluster's Spark master within
``executor.start.timeout.ms``, running the installed pyspark's Spark line
(``daemon.sparkcheck``). A REST listener that cannot be bound (its port in use) is
``ListenerUnavailable``, exit 69, after what was started is shut down.

Signals are recorded, not handled, in the handler: SIGTERM/SIGINT set the stop event, SIGHUP
the reload event. A reload reads the worker and connector files again
(``daemon.config.plan.reread``), all or nothing: if any file is broken, every problem is logged
(file and key) and the running set is kept exactly as it was; else added connectors start,
changed ones restart, ones whose file now names another connector are deleted. A second
SIGTERM/SIGINT forces the exit at once, after killing every executor's process tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from aiokafka.errors import KafkaError

from daemon.assembly import (
    RestServer,
    advertised_url,
    kill_timeout,
    new_pool,
    rest_server,
    start_relay,
)
from daemon.config import Mode, WorkerConfig
from daemon.config.executors import PoolStart
from daemon.config.plan import LaunchPlan, reread
from daemon.config.worker_checks import WorkerChecks
from daemon.connectors.registry import (
    ConnectorRegistry,
    default_registry,
    validate_connector_async,
)
from daemon.errors import ConnectdError, InvalidConfig, ListenerUnavailable
from daemon.executor.process import ORPHAN_GRACE, reap_exited_children
from daemon.kafka.outages import BrokerOutageFilter
from daemon.metrics import Metrics
from daemon.runtime.distributed import DistributedHerder
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.executors import Executors
from daemon.runtime.looplag import LoopLag, settle_heap
from daemon.runtime.standalone import StandaloneHerder
from daemon.runtime.standalone.files import origins_of
from daemon.signals import Signals
from daemon.storage.standalone import ConfigStore, StandaloneStore
from daemon.storage.statelock import StateDirLock
from daemon.systemd import Notifier, StatusLine

log = logging.getLogger("connectd.daemon")


class Daemon:
    """One connectd daemon (see the module docstring).

    ``executors``: run on this pool instead of starting one (the daemon then neither starts nor
    closes it). ``rest=False``: no REST server. ``store``: where connector configs are kept
    (default: the standalone state file under ``state.dir``).

    ``outages``: this daemon's broker-outage filter (``daemon.kafka.outages``), held for its
    lifetime; its task consumers watch their clients with it. ``run`` puts it on aiokafka's
    loggers along with the process's logging and takes it off at the end; an embedder that sets
    up logging itself may ``install`` and ``remove`` it likewise.
    """

    def __init__(
        self,
        plan: LaunchPlan,
        *,
        executors: Executors | None = None,
        handle_signals: bool = True,
        rest: bool = True,
        store: ConfigStore | None = None,
        registry: ConnectorRegistry = default_registry,
        kill_timeout: float | None = None,
        until_caught_up: bool = False,
    ) -> None:
        self.plan = plan
        self.config = plan.worker
        self.handle_signals = handle_signals
        # Validation refuses what this worker cannot run (a local path on a cluster, more
        # tasks than tasks.max.limit).
        self.registry = registry.bound(WorkerChecks.of(plan.worker))
        self._pool: Any = None  # the ExecutorPool this daemon owns, if any
        self.executors: Executors | None = executors
        self._want_rest = rest
        self.rest: RestServer | None = None
        self._store = store
        self._kill_timeout = kill_timeout
        self.herder: StandaloneHerder | DistributedHerder | None = None
        self.metrics = Metrics()
        self.lag = LoopLag(on_sample=self.metrics.observe_loop_lag)
        # Disabled unless run() (the CLI) reads $NOTIFY_SOCKET, or an embedder sets one.
        self.notifier = Notifier()
        self.status = StatusLine(lambda: self.herder, self.metrics.totals)
        self._state_lock = StateDirLock(self.config.state_dir)
        self._relay: Any = None  # executors' output relayed through logging (log.format=json)
        self.outages = BrokerOutageFilter()
        self.signals = Signals(force=self.force_kill)
        self._started = False
        self._running = False  # something was started that shutdown must stop
        self._closed = False
        # --until-caught-up (``caughtup.py``): stop once every connector has committed what
        # its topics held at start; ``exit_code`` says how the run ended.
        self.until_caught_up = until_caught_up
        self.exit_code = 0

    # ---- embedding ----

    async def __aenter__(self) -> Daemon:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    @property
    def rest_url(self) -> str | None:
        return self.rest.urls[0] if self.rest is not None and self.rest.urls else None

    def request_stop(self) -> None:
        """Ask ``serve`` to shut down (thread-unsafe: call from the daemon's loop)."""
        self.signals.stop.set()

    def request_reload(self) -> None:
        self.signals.reload.set()

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        from daemon.executor import become_subreaper

        become_subreaper()
        if importlib.util.find_spec("daemon.connectors.builtin") is not None:
            importlib.import_module("daemon.connectors.builtin")  # registers the aliases
        for c in self.plan.connectors:  # before any process starts: a bad file costs nothing
            # With the class's check against what exists (a table another connector writes),
            # in a thread: the loop already serves (sd_notify, signals).
            await validate_connector_async(c.name, c.properties, self.registry)
        # Before any process starts or any state is read: another daemon on this state.dir
        # would run the same stored connectors and overwrite the state file.
        self._state_lock.acquire()
        self._running = True
        self.lag.start()
        self.notifier.start(self.status)
        try:
            await self._wait_for_kafka()
            await self._wait_for_spark()
            await self._start_pool()
            if self.plan.mode is Mode.DISTRIBUTED:
                await self._start_distributed()
            else:
                await self._start_standalone()
        except BaseException:
            await self.shutdown()
            raise
        assert self.herder is not None
        log.info(
            "connectd %s worker %s started with %d connector(s)",
            self.plan.mode.value,
            self.herder.worker_id,
            len(self.herder.connector_names()),
        )
        self.notifier.ready(self.status())  # REST listens, connectors started

    def _env(self) -> RuntimeEnv:
        return RuntimeEnv.of_worker(
            self.config,
            self._require_executors(),
            registry=self.registry,
            kill_timeout=self._kill_timeout or kill_timeout(self.executors),
            metrics=self.metrics,
            outages=self.outages,
        )

    async def _start_distributed(self) -> None:
        """Join the group named by ``group.id``: REST first (its URL goes to the group), then
        the internal topics, the config log, the first assignment (``HerderLoop.start``)."""
        from daemon.runtime.distributed import HerderLoop

        loop = HerderLoop(self.config, self._env())
        herder = DistributedHerder(loop, self.registry)
        self.herder = herder
        self.metrics.watch_worker(herder)
        self.metrics.watch_cluster(herder)
        self.metrics.watch_pool(self._require_executors())
        if not self._want_rest:
            raise ConnectdError("distributed mode needs its REST API: other workers call it")
        await self._start_rest(herder)
        assert self.rest is not None
        url = advertised_url(self.config, self.rest.urls)
        loop.set_address(url, url.split("://", 1)[1])
        timeout = max(30.0, self.config.startup_kafka_timeout.total_seconds())
        await herder.start(timeout)

    async def _start_standalone(self) -> None:
        store = self._store or StandaloneStore(self.config.state_dir)
        kill = self._kill_timeout or kill_timeout(self.executors)
        herder = StandaloneHerder(
            self.config,
            self._require_executors(),
            store=store,
            registry=self.registry,
            kill_timeout=kill,
            metrics=self.metrics,
            outages=self.outages,
        )
        self.herder = herder
        self.metrics.watch_worker(herder)
        self.metrics.watch_pool(self._require_executors())
        origins = [o for o in origins_of(self.plan) if o is not None]
        connectors = [c.properties for c in self.plan.connectors]
        if not self._want_rest:
            await herder.start(connectors, origins)
            return
        # The REST front is a process of its own that takes about a second to import and bind:
        # the connectors start meanwhile (the worker id the statuses name is the listener's
        # address as configured until the bound one is known: port 0 picks one).
        rest = asyncio.ensure_future(self._start_rest(herder))
        try:
            await herder.start(connectors, origins)
        except BaseException:
            rest.cancel()
            with contextlib.suppress(BaseException):
                await rest
            raise
        await rest

    async def _start_rest(self, herder: StandaloneHerder | DistributedHerder) -> None:
        from daemon.rest.server import BindError

        self.rest = rest_server(herder, self.config, self.metrics, self.registry)
        try:
            await self.rest.start()
        except BindError as exc:  # its message names the listener and says why
            raise ListenerUnavailable(str(exc.strerror or exc)) from exc
        if self.rest.urls and isinstance(herder, StandaloneHerder):
            herder.set_worker_id(self.rest.urls[0].split("://", 1)[1])

    def _require_executors(self) -> Executors:
        assert self.executors is not None
        return self.executors

    async def _wait_for_kafka(self) -> None:
        from daemon.kafkacheck import wait_for_kafka
        from daemon.runtime.clients import security_settings

        # In a thread: the clients' TLS context is built here first (a JKS store runs keytool);
        # a store that cannot be read is a configuration error now, not at the first client.
        security = await asyncio.to_thread(security_settings, self.config)
        deadline = self.config.startup_kafka_timeout.total_seconds()
        if deadline > 0:
            await wait_for_kafka(self.config.bootstrap_servers, deadline, security)

    async def _wait_for_spark(self) -> None:
        if self.executors is not None:  # a pool of the embedder's: its master is its concern
            return
        from daemon.sparkcheck import check_master_line, wait_for_master

        master = self.config.executor_spark_master
        await wait_for_master(master, self.config.executor_start_timeout.total_seconds())
        await check_master_line(master, self.config.executor_spark_master_ui_url)

    async def _start_pool(self) -> None:
        """Make the daemon's own pool (unless it was given one) and start it if
        ``executor.pool.start=eager``; else it starts later (``RuntimeEnv.executors_needed``,
        or the first write). The table formats' jars it loads from the start are checked now
        whatever the setting: a missing one stops the daemon here, as an eager start does."""
        if self.executors is not None:
            return
        self._relay = start_relay(self.config)  # set first: shutdown closes it if the pool fails
        self._pool = new_pool(self.config, self._relay)
        if self.config.executor_pool_start is PoolStart.EAGER:
            await self._pool.start()  # returns at once: the executors start in the background
        else:
            await self._pool.check_jars()
        self.executors = self._pool

    async def serve(self) -> None:
        """Start (if needed), run until asked to stop, shut down."""
        with self.signals.installed() if self.handle_signals else contextlib.nullcontext():
            watcher: asyncio.Task[None] | None = None
            try:
                await self.start()
                if self.until_caught_up:
                    watcher = asyncio.get_running_loop().create_task(
                        self._until_caught_up(), name="until caught up"
                    )
                stop, reload = self.signals.stop, self.signals.reload
                while not stop.is_set():
                    waiters = [
                        asyncio.ensure_future(stop.wait()),
                        asyncio.ensure_future(reload.wait()),
                    ]
                    try:
                        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for w in waiters:
                            w.cancel()
                    if reload.is_set() and not stop.is_set():
                        reload.clear()
                        await self.reload()
            finally:
                if watcher is not None:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                await self.shutdown()

    async def _until_caught_up(self) -> None:
        """Stop the daemon once its connectors are caught up (exit 0) or one failed (exit 1)."""
        from daemon.runtime import caughtup

        assert isinstance(self.herder, StandaloneHerder)
        try:
            targets = await caughtup.read_targets(self.config, self.herder)
            done = await caughtup.watch(self.herder, targets)
        except (OSError, TimeoutError, KafkaError) as exc:
            log.error("until caught up: cannot read the topics' end offsets: %s", exc)
            self.exit_code = 1
            self.request_stop()
            return
        for name, why in done.failed.items():
            log.error("until caught up: connector %s failed: %s", name, why)
        if done.failed:
            self.exit_code = 1
        else:
            log.info(
                "until caught up: every connector is caught up (%s); stopping",
                ", ".join(done.done) or "none",
            )
        self.request_stop()

    async def reload(self) -> bool:
        """Read the configuration files again and apply them (RELOADING=1 ... READY=1 around
        it); False if a file was broken and nothing was changed."""
        assert self.herder is not None
        self.notifier.reloading()
        try:
            return await self._reload_files()
        finally:
            self.notifier.ready(self.status())

    async def _reload_files(self) -> bool:
        herder = self.herder
        assert herder is not None
        try:
            new = await asyncio.to_thread(reread, self.plan, self.registry)
        except InvalidConfig as exc:
            log.error(
                "Reload rejected, the running connectors are kept as they were (and the settings);"
                " fix and send SIGHUP again (systemctl reload):\n  %s",
                "\n  ".join(str(p) for p in exc.problems),
            )
            return False
        self._apply_worker(new.worker)
        self.plan = new
        if isinstance(herder, StandaloneHerder):  # distributed: connectors live in the config log
            await herder.reload(new)
        return True

    def _apply_worker(self, new: WorkerConfig) -> None:
        """Logging settings apply now; the others (pool, listeners, consumers) at a restart."""
        old = self.config
        if (new.log_level, new.log_format) != (old.log_level, old.log_format):
            from daemon.logs import setup_logging

            setup_logging(new.log_level.value, new.log_format.value)
        before, after = old.model_dump(by_alias=True), new.model_dump(by_alias=True)
        changed = sorted(k for k in after if before.get(k) != after[k] and not k.startswith("log."))
        if changed:
            log.warning(
                "Worker settings changed but apply at the next restart only: %s", ", ".join(changed)
            )
        self.config = old.model_copy(
            update={"log_level": new.log_level, "log_format": new.log_format}
        )

    async def shutdown(self) -> None:
        """Stop every task (stop sequence, in parallel), the REST server, the pool."""
        if self._closed:
            return
        self._closed = True
        if not self._running:  # refused before anything started (a bad file, a locked state.dir)
            return
        started = time.monotonic()
        log.info("connectd is shutting down")
        self.notifier.stopping()
        if self._pool is not None:
            # Executors that end from now on (a task killed by its stop) are not replaced: a
            # JVM start outlasts the shutdown and would only be killed.
            self._pool.begin_shutdown()
        if self.herder is not None:
            await self.herder.stop()
        if self.rest is not None:
            with contextlib.suppress(Exception):
                await self.rest.close()
        if self._pool is not None:
            await self._pool.close(graceful_timeout=1.0)
        if self._relay is not None:
            await self._relay.close()
        await self.lag.stop()
        await self.notifier.stop()  # the watchdog pings until the end of the shutdown
        self._state_lock.release()  # last: nothing this daemon started is left
        log.info("connectd stopped in %.2f s", time.monotonic() - started)

    # ---- the way out ----

    def force_kill(self) -> None:
        """Kill every executor's process tree now (blocking; only on the way out)."""
        from daemon.executor.process import kill_tree

        pool = self._pool
        for pid in list(pool.pids()) if pool is not None else []:
            with contextlib.suppress(Exception):
                kill_tree(pid, reap_leader=True, session=pid, timeout=2.0)

    # ---- the CLI ----

    def run(self) -> int:
        """Run until SIGTERM/SIGINT on uvloop (asyncio if uvloop cannot load); the exit code."""
        from daemon.logs import setup_logging

        setup_logging(self.config.log_level.value, self.config.log_format.value)
        # A broker outage: a line when it starts, a minute's summary, a line when it ends.
        self.outages.install()
        self.notifier = Notifier.from_env(os.environ)
        # Slow imports (the REST app: ~0.5 s) before the loop runs, not on it: at start-up the
        # watchdog already pings from the loop, and a second-long import would stall it.
        for module in ("daemon.rest", "daemon.executor", "daemon.kafkacheck", "aiokafka.conn"):
            importlib.import_module(module)
        settle_heap()
        factory: Callable[[], asyncio.AbstractEventLoop] | None = None
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError as exc:
            log.warning("uvloop cannot be loaded (%s); running on plain asyncio", exc)
        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(self.serve())
        finally:
            self.outages.remove()
        # A subreaper's last duty, once nothing else waits for children: a process of a killed
        # tree that ended after its tree was confirmed gone (a grandchild still exiting) came
        # back to us; reaped here, it does not outlive the daemon as someone else's zombie.
        reap_exited_children(ORPHAN_GRACE)
        return self.exit_code
