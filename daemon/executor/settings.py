"""Settings of the executor pool."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from daemon.errors import ConfigError
from daemon.executor import formats as table_formats

# What every executor's SparkSession gets unless the operator says otherwise.
SPARK_DEFAULTS: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
#: With ``local`` masters only. On a cluster the driver must be reachable from the cluster's
#: executors (the operator says at which address), and Python workers run on the cluster's
#: nodes, where connectd is not installed: PySpark's own worker daemon runs there, and a Spark
#: worker ends an application's executors (and so their Python workers) once its driver is gone.
LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # PySpark's worker daemon, wrapped so it and its workers die with their JVM.
    "spark.python.daemon.module": "daemon.executor.pyworker",
}


@dataclass(frozen=True)
class PoolSettings:
    """How many executors, how their Spark sessions look, and the pool's deadlines (seconds).

    ``size`` writes run at once; ``size + spares`` processes are kept alive, so a killed
    executor's place is taken at once by a warm spare while the replacement starts. While none
    is ready (a fresh pool, or all of them replaced), one starts alone and the rest follow once
    it is ready: the first write waits for one JVM start, not for all of them at once. A write
    still running after ``overdue_after`` while another connector's write waits steps aside
    (``queue.py``): the pool then keeps one more executor, up to ``max_size`` in all.
    """

    size: int = 1
    spares: int = 1
    #: The most executors that may exist at once, counting the ones being killed (default
    #: ``2 * size + spares``: one connector's writes may hang on ``size`` executors while the
    #: others keep ``size`` places and the spares).
    max_size: int | None = None
    #: A write running this long while another connector's write waits steps aside.
    overdue_after: float = 2.0
    #: Executors beyond what the pool keeps (the long writes they stood in for are over) are
    #: retired once the excess has lasted this long: slow writes that step aside now and then
    #: reuse them instead of paying a JVM start each time.
    excess_idle: float = 60.0
    spark_master: str = "local[*]"
    #: A ``spark://`` master's web UI URLs, where an executor reads the master's Spark line
    #: before its session opens (``sparkcheck.master_ui_urls``: empty means port 8080 of each host).
    spark_master_ui: tuple[str, ...] = ()
    #: Any ``spark.*`` setting (``executor.spark.conf.*`` in the worker config).
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    #: Table formats (``formats.FORMATS``) every executor's session loads from the start; the
    #: others are loaded when a write first asks for them (``ExecutorPool.submit``).
    formats: frozenset[str] = frozenset()
    #: Where the formats' jars are (default ``formats.default_jars_dir()``).
    jars_dir: Path | None = None
    #: False: executors run write functions without a SparkSession (``spark`` is None). For
    #: tests of the process machinery and for checking a deployment without a JVM.
    with_spark: bool = True
    #: True: executors start without a SparkSession (a Python process with pyarrow: no JVM, no
    #: PySpark workers) until a write asks for one (``ExecutorPool.submit(spark=True)``, the
    #: default) or a table format is loaded; from then on every executor opens one, and those
    #: without are replaced as for a table format (``formats.SessionFormats``). False: every
    #: executor opens one at its start (with ``with_spark``).
    spark_on_demand: bool = False
    #: An executor not ready (session up, warm-up job done) within this is killed and replaced.
    start_timeout: float = 120.0
    #: Default bound on waiting for a free executor in ``run`` (``ExecutorUnavailable``).
    acquire_timeout: float = 120.0
    #: An idle executor must acknowledge a write within this; the write deadline starts then.
    accept_timeout: float = 10.0
    #: Bound on kill + reap + /proc confirmation of one executor's tree.
    kill_timeout: float = 5.0
    heartbeat_interval: float = 1.0
    #: An idle executor silent for this long is treated as hung: killed and replaced.
    heartbeat_timeout: float = 15.0
    #: Niceness added to executors (and their JVMs), so the event loop stays responsive.
    nice: int = 10
    #: Spares start once no write ran for this long (``startorder.py``) ...
    spare_quiet: float = 1.0
    #: ... or at the latest this long after their start was first put off.
    spare_wait_max: float = 60.0
    #: Run a small write during start-up, so the first real write finds classes loaded.
    warmup: bool = True
    #: Hand-off files go under ``<handoff_dir>/connectd-<pid>/`` (default: /dev/shm).
    handoff_dir: Path | None = None
    #: Executors' scratch (spark.local.dir, TMPDIR) under ``<work_dir>/connectd-<pid>/``.
    work_dir: Path | None = None
    #: Build and use a JDK class-data-sharing archive (faster executor starts).
    cds: bool = True
    #: Build the archive in the background when it is missing (else only use an existing one).
    cds_build: bool = True
    #: Where the archive is kept (default ``~/.cache/connectd``).
    cds_dir: Path | None = None
    #: Give up on building the archive after this long.
    cds_build_timeout: float = 300.0
    #: Backoff after consecutive start failures: initial, doubling up to the maximum.
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    #: Executors' stdout/stderr (default: the daemon's stderr).
    log_path: Path | None = None
    #: How often the pool samples each executor's process tree (pids, RSS) from /proc.
    sample_interval: float = 5.0

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ConfigError(f"executor pool size must be at least 1, got {self.size}")
        if self.spares < 0:
            raise ConfigError(f"executor spares must be 0 or more, got {self.spares}")
        if self.max_size is not None and self.max_size < self.size + self.spares:
            raise ConfigError(
                f"executor pool max size must be at least size + spares ({self.size} +"
                f" {self.spares}), got {self.max_size}"
            )
        for name in (
            "start_timeout",
            "acquire_timeout",
            "accept_timeout",
            "kill_timeout",
            "heartbeat_interval",
            "heartbeat_timeout",
            "backoff_initial",
            "backoff_max",
            "sample_interval",
            "overdue_after",
            "excess_idle",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"executor setting {name} must be positive")
        if self.heartbeat_timeout <= self.heartbeat_interval:
            raise ConfigError("executor heartbeat_timeout must exceed heartbeat_interval")
        bad = [k for k in self.spark_conf if not k.startswith("spark.")]
        if bad:
            raise ConfigError(f"executor Spark settings must start with 'spark.': {bad}")
        object.__setattr__(self, "formats", table_formats.check_names(self.formats))

    @property
    def local(self) -> bool:
        """Spark runs inside each executor process (``local``, ``local[N]``): no cluster."""
        return self.spark_master.startswith("local")

    @property
    def target(self) -> int:
        """Processes the pool keeps alive while no write stepped aside."""
        return self.size + self.spares

    @property
    def most(self) -> int:
        """The most processes that may exist at once (``max_size``)."""
        return 2 * self.size + self.spares if self.max_size is None else self.max_size

    def base_conf(self) -> dict[str, str]:
        """The SparkSession settings without table formats: defaults, then the operator's."""
        conf = dict(SPARK_DEFAULTS)
        if self.local:
            conf.update(LOCAL_DEFAULTS)
        conf.update(self.spark_conf)
        return conf

    def session_conf(self, extra_formats: Iterable[str] = ()) -> dict[str, str]:
        """The SparkSession settings with ``formats`` and ``extra_formats`` loaded."""
        names = self.formats | table_formats.check_names(extra_formats)
        return table_formats.session_conf(self.base_conf(), names, self.jars_dir)
