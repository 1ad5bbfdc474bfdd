"""What a connector and a sink task may ask of the runtime: their contexts and the executor pool.

Protocols only; the runtime implements them (``daemon.runtime.incarnation.context``'s
``TaskContext``, ``daemon.runtime.connector``'s context of a connector instance), and a test
may pass its own (``daemon.connectors.testing.LocalRunner`` is an
``ExecutorRunner``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from typing import Any, Protocol, overload

import pyarrow as pa

from daemon.structs import TaskId, TopicPartition

#: ``SinkTaskContext.run_in_executor`` as a bare callable, bound to a pool and a task id: what
#: the offsets hooks of ``SinkConnector`` receive (``formats=`` included, see ``ExecutorRunner``).
ExecutorCall = Callable[..., Awaitable[Any]]


class ExecutorRunner(Protocol):
    """The runtime's hook to the executor pool (a Spark process that can be killed any time).

    ``fn`` is an importable ``"package.module:function"`` called in the executor as
    ``fn(spark, batch, **kwargs)`` (``batch`` handed over as Arrow, not pickled rows); its
    return value must be picklable. Past ``timeout`` seconds (counted from the call, including
    waiting for a free executor) the executor's process tree is killed and reaped and the call
    raises ``WriteTimeout``; ``ExecutorDied`` / ``WriteFailed`` report other failures. When the
    awaiting coroutine is cancelled the executor is killed too: no write outlives its caller.

    ``formats`` names the table formats (``"delta"``, ``"iceberg"``) whose jars and SQL
    extensions ``fn``'s session needs; it is not passed on to ``fn``. The pool loads a format
    into its executors' sessions when a write first asks for it (executors without it are
    replaced, which costs the first such write one executor start); when the format's jars are
    not installed the call raises at once, not retriable, saying how to fetch them.

    ``spark`` False says ``fn`` never uses its ``spark`` argument (a pyarrow write): any
    executor may run it, one that opened no SparkSession included, where ``spark`` is None
    (``executor.spark.session=on-demand``). True, the default: the executors open sessions
    from then on if they had none (the first such call waits for a JVM start). It is not passed
    on to ``fn``.
    """

    async def run_in_executor(
        self,
        fn: str,
        batch: pa.Table | None,
        *,
        timeout: float,
        formats: Collection[str] = (),
        spark: bool = True,
        **kwargs: Any,
    ) -> Any: ...


class SinkTaskContext(Protocol):
    """What a ``SinkTask`` can ask of the runtime (Connect's ``SinkTaskContext``, plus
    ``is_closing`` from KIP-275, the incarnation's ``epoch`` and the executor).

    Every method is non-blocking and only records a request; the runtime acts on it after the
    current callback returns (seeks before the next fetch, commits at the next opportunity).
    """

    @property
    def task_id(self) -> TaskId: ...

    @property
    def epoch(self) -> int:
        """This incarnation's epoch: larger than every earlier incarnation's of the connector."""
        ...

    async def raise_epoch(self, *, above: int) -> int:
        """Take an epoch larger than ``above`` (the newest epoch of this connector the sink's
        own store has seen) and return the epoch now held; ``epoch`` reads it from then on.

        For ``open`` only: a sink that keeps epochs with its data calls it there when its
        store has seen a newer epoch than ``epoch`` (the runtime's counter lives in the
        daemon's state directory, which may have been lost or replaced), so the newest starter
        always wins. Elsewhere (a ``put``, a commit) the epoch is returned unchanged: an older
        incarnation that meets a newer epoch there is a zombie and must be refused."""
        ...

    @property
    def config(self) -> Mapping[str, str]:
        """The task configuration ``start`` received."""
        ...

    @property
    def is_closing(self) -> bool:
        """True only while ``pre_commit`` runs just before the task's partitions are closed
        (rebalance, stop, restart, shutdown): the last chance to make progress durable."""
        ...

    @overload
    def offset(self, tp: TopicPartition, offset: int, /) -> None: ...
    @overload
    def offset(self, offsets: Mapping[TopicPartition, int], /) -> None: ...
    def offset(self, *args: Any) -> None:
        """Seek: the next record fetched for each partition has this offset."""
        ...

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching from these assigned partitions until ``resume``."""
        ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def paused(self) -> frozenset[TopicPartition]: ...

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this task."""
        ...

    def request_commit(self) -> None:
        """Ask for ``pre_commit`` (and the consumer-group commit) as soon as possible."""
        ...

    def timeout(self, ms: int, /) -> None:
        """Connect's ``SinkTaskContext.timeout``: after this call, the next retry of a batch
        whose ``put`` (or a ``pre_commit``) raised ``RetriableError`` waits ``ms`` milliseconds
        (once; a negative value clears it)."""
        ...

    async def group_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        """connectd: the offsets the connector's consumer group committed for ``partitions``
        (a partition without one is left out). For a sink that keeps its offsets with its
        data, to notice that its storage lost them (the group's are for lag tools only)."""
        ...

    async def run_in_executor(
        self,
        fn: str,
        batch: pa.Table | None,
        *,
        timeout: float,
        formats: Collection[str] = (),
        spark: bool = True,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn`` in an executor process; see ``ExecutorRunner``."""
        ...

    def start_background(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run ``coro`` beside the task's callbacks (a writer that works while the task reads)
        for at most as long as this incarnation: the runtime cancels it and waits for it to
        end before the incarnation counts as over, so an executor write it holds is killed and
        reaped first (a kill cancels it at once; after a graceful end, once ``stop`` returned).
        Its exceptions are the task's to collect; the runtime only logs what nobody did."""
        ...


class ConnectorContext(Protocol):
    """What a running ``SinkConnector`` instance may ask of the runtime (Connect's
    ``ConnectorContext``), handed over by ``SinkConnector.initialize`` before ``start``. Both
    calls return at once and may come from any thread; they do nothing once the instance was
    stopped."""

    def request_task_reconfiguration(self) -> None:
        """The task configurations may have changed (the connector watches something outside,
        a topic list, a table's partitions): the runtime calls ``task_configs`` again, and if
        they differ it restarts the tasks with them. In distributed mode the worker running the
        instance sends them to the leader, which writes them to the config log; every worker
        then runs its tasks with them (Connect's ``POST /connectors/{name}/tasks``). Repeated
        requests while one is handled make one more round."""
        ...

    def raise_error(self, error: BaseException) -> None:
        """The connector failed: its status becomes FAILED with this error's trace and the
        restart policy applies to it (not to its tasks, which keep running, as in Connect)."""
        ...
