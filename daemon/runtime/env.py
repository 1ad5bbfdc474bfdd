"""What every connector and task of one worker shares: ``RuntimeEnv``.

Built once per daemon from the worker configuration (``RuntimeEnv.of_worker``) and handed to
the ``Worker``; each connector runtime, task slot and incarnation reads its parts from it and
holds none of them. ``executors_needed`` is where ``executor.pool.start=auto`` acts: a task of a
connector class that needs executors starts them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from daemon.config import Providers, WorkerConfig
from daemon.config.executors import PoolStart
from daemon.connectors.api import ConnectorRegistry, default_registry
from daemon.kafka.outages import BrokerOutageFilter
from daemon.runtime.executors import Executors
from daemon.runtime.settings import TaskMetrics, TaskSettings
from daemon.runtime.slot.autorestart import REAL_CLOCK, Clock
from daemon.storage.epochs import Epochs, EpochStore

#: Bound on the kill + reap + /proc confirmation of one incarnation in the stop sequence.
DEFAULT_KILL_TIMEOUT = 15.0


@dataclass(frozen=True)
class RuntimeEnv:
    """What every connector of a worker shares."""

    worker: WorkerConfig
    executors: Executors
    epochs: Epochs
    providers: Providers
    registry: ConnectorRegistry
    settings: TaskSettings
    graceful_timeout: float
    kill_timeout: float
    metrics: TaskMetrics | None = None
    #: Time for the restart policy (tests drive its schedule with a clock of their own).
    clock: Clock = REAL_CLOCK
    #: The daemon's broker-outage filter: each task's consumer lets it watch its client.
    outages: BrokerOutageFilter | None = None
    #: Distributed mode: where a connector's new task configurations go (to the leader, which
    #: writes them to the config log); None (standalone): the connector restarts its tasks with
    #: them itself (``ConnectorRuntime._reconfigure_tasks``).
    publish_task_configs: Callable[[str, list[dict[str, str]]], Awaitable[None]] | None = None

    def executors_needed(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        """A task of a connector class that needs executors (``SinkConnector.needs_executors``)
        is being set up on this worker: under ``executor.pool.start=auto`` the executors start
        now, in the background, so its first write waits no longer than after an eager start.
        (``eager``: they started with the daemon; ``on-demand``: the first write starts them.)
        ``formats``: the table formats its sessions need (``SinkConnector.executor_formats``),
        loaded from the start rather than by a second JVM start at the first write; ``spark``:
        whether they need a SparkSession from the start (``SinkConnector.executor_spark``).
        Returns at once; called for every such task."""
        if self.worker.executor_pool_start is PoolStart.AUTO:
            self.start_executors(formats, spark=spark)

    def start_executors(self, formats: Collection[str] = (), *, spark: bool = True) -> None:
        """``executors.start_soon(formats)``, with ``spark`` passed only when False: an
        ``Executors`` written before ``spark`` would refuse it."""
        if spark:
            self.executors.start_soon(formats)
        else:
            self.executors.start_soon(formats, spark=False)

    @classmethod
    def of_worker(
        cls,
        config: WorkerConfig,
        executors: Executors,
        *,
        epochs: Epochs | None = None,
        registry: ConnectorRegistry = default_registry,
        kill_timeout: float = DEFAULT_KILL_TIMEOUT,
        metrics: TaskMetrics | None = None,
        clock: Clock = REAL_CLOCK,
        outages: BrokerOutageFilter | None = None,
    ) -> RuntimeEnv:
        """The worker configuration's environment (epochs default to ``state.dir``'s)."""
        return cls(
            worker=config,
            executors=executors,
            epochs=epochs if epochs is not None else EpochStore(config.state_dir),
            providers=Providers.from_worker(config),
            registry=registry,
            settings=TaskSettings.from_worker(config),
            graceful_timeout=config.task_shutdown_graceful_timeout.total_seconds(),
            kill_timeout=kill_timeout,
            metrics=metrics,
            clock=clock,
            outages=outages,
        )
