"""The daemon's parts, built from the worker configuration: the executor pool (with the relay
of its output into logging) and the REST server (on the worker's loop, or fronted by a child
process). ``daemon.daemon.Daemon`` owns what these return and closes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from daemon.config import WorkerConfig
from daemon.config.executors import SparkSession
from daemon.connectors.registry import ConnectorRegistry
from daemon.executor.settings import PoolSettings
from daemon.metrics import Metrics
from daemon.runtime.executors import Executors
from daemon.runtime.model import Herder

if TYPE_CHECKING:
    from daemon.executor import ExecutorPool


class RestServer(Protocol):
    @property
    def urls(self) -> list[str]: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


def start_relay(c: WorkerConfig) -> Any:
    """The relay of executors' output into logging, started; ``None`` unless ``log.format``
    needs one (Spark's lines become JSON / journal lines too). Closed by its owner."""
    from daemon.logs.relay import OutputRelay, relay_output

    if not relay_output(c.log_format.value):
        return None
    relay = OutputRelay()
    relay.start()
    return relay


def new_pool(c: WorkerConfig, relay: Any) -> ExecutorPool:
    """The executor pool the worker configuration describes, not started yet; its executors
    write their output to ``relay`` if there is one."""
    from daemon.executor import ExecutorPool

    return ExecutorPool(
        PoolSettings(
            size=c.executor_pool_size,
            spares=c.executor_pool_spares,
            max_size=c.executor_pool_max_size,
            overdue_after=c.executor_write_overdue.total_seconds(),
            spark_master=c.executor_spark_master,
            spark_master_ui=tuple(c.executor_spark_master_ui_url),
            spark_conf=dict(c.executor_spark_conf),
            formats=frozenset(c.executor_spark_formats),
            spark_on_demand=c.executor_spark_session is SparkSession.ON_DEMAND,
            jars_dir=c.executor_jars_dir,
            start_timeout=c.executor_start_timeout.total_seconds(),
            log_path=Path(relay.path) if relay is not None else None,
        )
    )


@runtime_checkable
class _Configured(Protocol):
    """A pool that says how it is configured (``ExecutorPool``, and the tests' Spark pool)."""

    @property
    def settings(self) -> PoolSettings: ...


def kill_timeout(executors: Executors | None) -> float:
    """The stop sequence's bound on kill + reap + /proc confirmation: the pool's own kill
    timeout (the default one for a pool that does not say) plus 10 s of margin."""
    settings = executors.settings if isinstance(executors, _Configured) else PoolSettings()
    return settings.kill_timeout + 10.0


def rest_server(
    herder: Herder, config: WorkerConfig, metrics: Metrics, registry: ConnectorRegistry
) -> RestServer:
    from daemon.rest import FrontedRestServer, RestSettings, create_app
    from daemon.rest import RestServer as Server

    settings = RestSettings.from_worker_config(config)
    if not config.rest_front_process:
        app = create_app(herder, settings=settings, metrics=metrics, registry=registry)
        return Server(app, settings)
    # Status answered from a child process with its own GIL (daemon.rest.front.child): requests do
    # not wait behind the consumers on this loop.
    token = FrontedRestServer.new_token()
    app = create_app(
        herder, settings=settings, metrics=metrics, registry=registry, front_token=token
    )
    return FrontedRestServer(
        app,
        settings,
        token=token,
        log_level=config.log_level.value,
        log_format=config.log_format.value,
    )


def advertised_url(c: WorkerConfig, urls: list[str]) -> str:
    """The URL other workers reach this one at: ``rest.advertised.*`` over the first bound
    listener of ``urls``, as Connect advertises."""
    assert urls, "no REST listener is bound"
    scheme, _, address = urls[0].partition("://")
    host, _, port = address.rpartition(":")
    scheme = c.rest_advertised_listener or scheme
    host = c.rest_advertised_host_name or host
    port = str(c.rest_advertised_port) if c.rest_advertised_port else port
    return f"{scheme}://{host}:{port}"
