"""The base classes a connector extends: ``SinkConnector`` and its ``SinkTask``.

The guarantees the runtime gives them are in ``daemon.connectors.api``'s docstring.
"""

from __future__ import annotations

import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from typing import ClassVar

from daemon.config.definitions import ConfigDef
from daemon.connectors.protocols import ConnectorContext, ExecutorCall, SinkTaskContext
from daemon.connectors.records import RecordBatch
from daemon.structs import Problem, TopicPartition

log = logging.getLogger("connectd.connector")


class _Detached:
    """The context of an instance the runtime does not run (a throw-away instance that
    validates, the REST API's plugin listing): its requests have nothing to act on."""

    def request_task_reconfiguration(self) -> None:
        log.warning("A connector instance not run by a worker asked for task reconfiguration")

    def raise_error(self, error: BaseException) -> None:
        log.warning("A connector instance not run by a worker raised an error: %r", error)


def _module_version(obj: object) -> str:
    module = sys.modules.get(type(obj).__module__)
    return str(getattr(module, "__version__", "unknown"))


class SinkTask(ABC):
    """A sink task (Connect's ``SinkTask``). See the module docstring for the guarantees."""

    def version(self) -> str:
        """The task's version; by default its module's ``__version__``."""
        return _module_version(self)

    @abstractmethod
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        """Called once, first. Keep ``context``; read the task configuration."""

    def max_poll_records(self) -> int | None:
        """The most records one ``put`` should get, asked once after ``start``: the task's
        polls take at most this many unless ``max.poll.records`` is set (the worker's
        ``consumer.*``, the connector's ``consumer.override.*``), and at most 10,000 by default
        (``daemon.runtime.incarnation.consumer.MAX_POLL_RECORDS``). A sink that buffers up to a
        bound says it, so one poll does not go far past the bound. Default: ``None``."""
        return None

    async def open(self, partitions: Collection[TopicPartition]) -> None:  # noqa: B027 (optional hook)
        """Partitions were assigned; no ``put`` has delivered their records yet. Exactly-once
        sinks read their committed offsets here and seek with ``context.offset``."""

    @abstractmethod
    async def put(self, batch: RecordBatch) -> None:
        """Write a batch (may be empty). Records of one partition arrive in offset order; a
        batch never repeats records already given unless a seek asked for them."""

    async def reject(self, batch: RecordBatch) -> Mapping[int, BaseException]:
        """Rows of ``batch.table`` this sink will not write, by row index, each with the
        exception that says why (its class and message go to the log and the dead-letter
        headers). Called before each ``put`` of a non-empty batch, under the callback deadline.
        The runtime takes those rows out of the batch ``put`` receives (``ranges`` still cover
        them) and applies ``errors.tolerance`` as to records a converter rejected: ``none``
        fails the task naming the first one's topic, partition and offset; ``all`` skips them
        (to the dead-letter topic, stage ``TASK_PUT``). Must not change the sink's state (a
        retry may call it again with the same rows). Check with vectorised ``pyarrow.compute``,
        not a Python loop over rows. Default: nothing rejected."""
        return {}

    async def flush(self, offsets: Mapping[TopicPartition, int]) -> None:  # noqa: B027 (optional hook)
        """Make everything given to ``put`` durable (Connect's ``flush``)."""

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        """``offsets``: per partition, the offset after the last record given to ``put``.
        Return the offsets that are durable in the sink (those get committed to the consumer
        group); return fewer or smaller ones for data not yet durable. ``context.is_closing``
        tells whether the partitions are about to be closed. Default: ``flush``, then all."""
        await self.flush(offsets)
        return offsets

    async def offsets_skipped(  # noqa: B027 (optional hook)
        self, tp: TopicPartition, start: int, end: int
    ) -> None:
        """Offsets ``start``..``end - 1`` of ``tp`` were deleted from the log before they were
        consumed (retention), and ``errors.offset.out.of.range=earliest`` skips them: the next
        record of ``tp`` given to ``put`` is at ``end`` or later, and the offsets offered to
        ``pre_commit`` continue from ``end``. ``start`` is where ``tp`` stood: after the last
        record given to ``put``, or where the sink sought. Called between two ``put`` calls,
        under the callback deadline. A sink that records where its data came from records the
        gap here (ParquetSink: a skip record in its commit log, after writing what it
        buffered), so an audit sees why those offsets are missing; if it raises, nothing is
        skipped and the error is handled like one from ``put``. Default: nothing (the runtime
        logs a warning and counts the offsets in ``connectd_offsets_skipped_total``)."""

    async def close(self, partitions: Collection[TopicPartition]) -> None:  # noqa: B027 (optional hook)
        """The partitions were revoked (after the closing ``pre_commit``): drop their state."""

    @abstractmethod
    async def stop(self) -> None:
        """Called last, once, after ``close`` of every open partition (unless killed)."""


class SinkConnector(ABC):
    """A sink connector (Connect's ``SinkConnector``). Instantiated with no arguments.

    ``config_def``, ``validate``, ``task_class``, ``task_configs`` and ``version`` are cheap and
    synchronous (called from the event loop, also by the REST API on throw-away instances);
    ``check_existing`` may block (called in a thread); ``start`` and ``stop`` are coroutines
    with a deadline.
    """

    #: Whether this connector's tasks run work in executors (``run_in_executor``). Under
    #: ``executor.pool.start=auto`` a worker starts its executors as soon as a task of such a
    #: class is set up there, and never for classes that say False (a connector that only
    #: logs, counts or reads). True unless a class says otherwise: a connector that cannot
    #: tell may call an executor. A call from a class that says False still works: it starts
    #: the executors then and waits for the first one.
    needs_executors: ClassVar[bool] = True
    #: The table formats (``executor.spark.formats`` names: ``delta``, ``iceberg``) its
    #: tasks' sessions load. A worker starting executors for such a task starts them with
    #: these, where a session without them is replaced at the first write (a second JVM
    #: start). A write naming a format not listed here still loads it then.
    executor_formats: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def executor_spark(cls, config: Mapping[str, str]) -> bool:
        """Whether the tasks of a connector configured with ``config`` need a SparkSession in
        their executors from the start (under ``executor.spark.session=on-demand`` a worker
        starts its executors without one while no connector says so). True unless a class says
        otherwise; cheap, and never raises for a bad ``config`` (that fails elsewhere, saying
        why). A write that needs none says so itself (``run_in_executor(spark=False)``); one
        that does not still gets a session, at the cost of a JVM start then."""
        return True

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.context: ConnectorContext = _Detached()

    def initialize(self, context: ConnectorContext) -> None:
        """Called by the runtime before ``start`` with the instance's context (Connect's
        ``Connector.initialize``). Default: keep it as ``self.context``."""
        self.context = context

    def version(self) -> str:
        """The connector's version; by default its module's ``__version__``."""
        return _module_version(self)

    def config_def(self) -> ConfigDef:
        """The connector's own settings. Default: none."""
        return ConfigDef()

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        """Problems with ``config`` (the whole connector configuration). Never raises for bad
        values. Default: ``config_def().validate(config)``."""
        return self.config_def().validate(config)

    def check_existing(self, name: str, config: Mapping[str, str]) -> list[Problem]:
        """Problems of a configuration ``validate`` accepted, against what exists outside it:
        e.g. a table whose commit log shows another connector writing the same partitions.
        Called before the connector ``name`` is created or reconfigured (REST, the validate
        endpoint, ``check-config``, the daemon's start), in a thread, under a deadline
        (``daemon.connectors.registry.EXISTING_CHECK_TIMEOUT``; past it the check is skipped
        with a warning): it may block on I/O, must not change anything, and never raises for
        a problem it finds. Default: none."""
        return []

    async def start(self, config: Mapping[str, str]) -> None:
        """Called with the validated configuration before ``task_configs``. Default: keep it."""
        self.config = dict(config)

    @abstractmethod
    def task_class(self) -> type[SinkTask]: ...

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configurations. Default: ``max_tasks`` copies of the
        connector's configuration (partitions are spread by the consumer group)."""
        return [dict(self.config) for _ in range(max_tasks)]

    async def stop(self) -> None:  # noqa: B027 (optional hook)
        """Called once when the connector is stopped or deleted, after its tasks stopped."""

    # ---- offsets (Connect's KIP-875), for sinks that keep their own ----
    #
    # Called by the worker's offsets API (``daemon.runtime.offsets``) on a fresh instance, from
    # the event loop, with the resolved connector configuration (do file I/O in a thread),
    # under a deadline (``HOOK_TIMEOUT`` there); only while the connector is STOPPED for the
    # two that change offsets, so no task commits meanwhile. ``run_in_executor`` is
    # ``SinkTaskContext.run_in_executor``'s signature bound to the worker's executor pool under
    # the task id ``<connector>-offsets`` (``None`` when the runtime has no pool): for state
    # reachable only from an executor (a table on a Hadoop filesystem, through its JVM); a job
    # past its deadline is killed like any write. The consumer group ``connect-<name>`` is
    # read or changed as well by the runtime; these hooks only cover the sink's own copy.

    async def read_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> Mapping[TopicPartition, int] | None:
        """The sink's committed next offset per partition, or ``None`` to let the runtime ask
        the consumer group. Default: ``None`` (the sink keeps no offsets of its own)."""
        return None

    async def alter_offsets(  # noqa: B027 (optional hook)
        self,
        config: Mapping[str, str],
        offsets: Mapping[TopicPartition, int | None],
        *,
        run_in_executor: ExecutorCall | None = None,
    ) -> None:
        """Set (an int) or forget (``None``) partitions' next offsets in the sink. Default:
        nothing (the consumer group alone holds them)."""

    async def reset_offsets(  # noqa: B027 (optional hook)
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> None:
        """Forget every partition's offset kept in the sink. Default: nothing."""
