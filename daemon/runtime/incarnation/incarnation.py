"""One incarnation of a sink task: the coroutine that polls, converts, puts and commits.

An ``Incarnation`` is created with an epoch (from the connector's ``EpochStore`` counter) and
runs ``run()`` as one asyncio task. Every sink callback runs under a deadline, one at a time
(a lock serialises the coroutine's own calls with the rebalance listener's ``open``/``close``,
which aiokafka runs in its coordinator task); every await that crosses a boundary has a bound.

Stopping is the stop sequence's business (``daemon.runtime.slot.stop``): ``ask()`` marks the
incarnation closing and interrupts a poll or a backoff, but lets a callback in progress run; the
coroutine then runs the close path — ``pre_commit`` with ``context.is_closing``, ``close`` of
the open partitions, ``stop``. ``kill()`` cancels whatever is left: an executor write in progress
is cancelled, which kills and reaps its executor's process tree before the cancellation returns.

The incarnation holds its parts, each with its own state: ``progress`` (partition positions,
the batch in delivery, the rebalance generation: ``progress.py``), ``rebalancer`` (the consumer's
rebalance listener: ``rebalance.py``), ``retrier`` (``errors.retry.*``: ``retry.py``),
``gaps`` (offsets no longer in the log, ``errors.offset.out.of.range``: ``gaps.py``) and,
once started, ``pipeline`` (conversion and ``errors.*`` before ``put``: ``pipeline.py``). The
rebalance and retry parts see the incarnation only through a narrow protocol (``RebalanceHost``,
``RetryHost``). Deadlines other than the sink callbacks' are named in ``TaskSettings``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import traceback
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

from daemon.config import Providers, WorkerConfig, parse_connector, resolve
from daemon.config.worker import WRITE_TIMEOUT_KEY
from daemon.connectors.api import SinkTask, TaskId
from daemon.connectors.records import RecordBatch, TopicPartition
from daemon.errors import ConnectdError, TaskTimeout
from daemon.kafka.outages import BrokerOutageFilter
from daemon.logs import set_task_context
from daemon.runtime.executors import ExecutorBinding, Executors
from daemon.runtime.incarnation.ahead import Fetched, PollAhead
from daemon.runtime.incarnation.consumer import OutOfRange, TaskConsumer, poll_bound
from daemon.runtime.incarnation.context import TaskContext
from daemon.runtime.incarnation.deadlines import log_failure, unless_set, with_deadline
from daemon.runtime.incarnation.gaps import OffsetGaps
from daemon.runtime.incarnation.pipeline import Converted, RecordPipeline
from daemon.runtime.incarnation.progress import PartitionProgress, offset_ranges
from daemon.runtime.incarnation.rebalance import Rebalancer
from daemon.runtime.incarnation.retry import Retrier
from daemon.runtime.settings import TaskMetrics, TaskSettings

log = logging.getLogger("connectd.task")
T = TypeVar("T")


class Incarnation:
    """One incarnation of one task id. Create, then ``start()``; see the module docstring."""

    def __init__(
        self,
        task_id: TaskId,
        epoch: int,
        *,
        worker: WorkerConfig,
        connector_config: Mapping[str, str],
        task_config: Mapping[str, str],
        task_class: type[SinkTask],
        executors: Executors,
        providers: Providers,
        settings: TaskSettings,
        paused: bool = False,
        metrics: TaskMetrics | None = None,
        draw_epoch: Callable[..., Awaitable[int]] | None = None,
        outages: BrokerOutageFilter | None = None,
    ) -> None:
        self.id = task_id
        self.epoch = epoch
        self.first_epoch = epoch  # names this incarnation; ``epoch`` grows with rebalances
        self.worker = worker
        self.settings = settings
        self._raw_connector = dict(connector_config)
        self._raw_task = dict(task_config)
        self._task_class = task_class
        self._providers = providers
        self.binding = ExecutorBinding(
            executors, str(task_id), settings.write_timeout, metrics=metrics
        )
        self.task: SinkTask | None = None
        self.context: TaskContext | None = None
        self.consumer: TaskConsumer | None = None
        self.running = False  # started and polling
        #: Set once it runs (started and polling) or its coroutine is over, whichever first.
        self.settled = asyncio.Event()
        self.running_since: float | None = None
        self.failure: BaseException | None = None
        self.trace: str | None = None
        self.killed = False
        self.topics: set[str] = set()
        self._paused = paused
        self._metrics = metrics
        self._outages = outages
        self._stopping = False
        self._stop_event = asyncio.Event()  # set when asked to stop, or to wake the main loop
        #: Held around every sink callback: the main loop's and the rebalance listener's.
        self.lock = asyncio.Lock()
        self.progress = PartitionProgress()
        # Its parts reach it through a weak proxy: no reference cycle, so an incarnation that
        # ended is freed when its slot lets it go, not by a full collection (a storm of 1,000
        # failed starts left 58,000 objects of cycles, and three collections of 0.1 s each on
        # the loop).
        host = cast("Incarnation", weakref.proxy(self))
        self.rebalancer = Rebalancer(
            host, self._stop_event, draw_epoch, settings.epoch_timeout, settings.assign_budget
        )
        self.retrier = Retrier(host, self._stop_event)
        self.gaps = OffsetGaps(host, metrics, wake=self._stop_event)
        self.pipeline: RecordPipeline | None = None
        self.ahead = PollAhead()
        self._runner: asyncio.Task[None] | None = None

    # ---- control (the stop sequence and the worker call these) ----

    def start(self) -> asyncio.Task[None]:
        self._runner = asyncio.get_running_loop().create_task(self.run(), name=f"task {self.id}")
        self._runner.add_done_callback(lambda _: self.settled.set())
        return self._runner

    @property
    def done(self) -> bool:
        return self._runner is None or self._runner.done()

    async def wait(self) -> None:
        """Until the coroutine is over (never raises; shielded from the caller's cancel)."""
        if self._runner is not None and not self._runner.done():
            await asyncio.wait([self._runner])

    def ask(self) -> None:
        """Step 1 of the stop sequence: stop taking records, close after the current callback."""
        self._stopping = True
        self._stop_event.set()

    def kill(self, reason: str) -> None:
        """Step 3: cancel the coroutine and the listener's callbacks; no new writes."""
        self.killed = True
        self.ask()
        self.binding.close(reason)
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
        self.rebalancer.cancel()

    def set_paused(self, paused: bool) -> None:
        """Connector pause: fetch nothing, deliver nothing, keep the partitions."""
        self._paused = paused
        if self.running:
            self._record_state("paused" if paused else "running")
        if self.consumer is not None and self.context is not None and self.running:
            self._apply_pause()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def asked(self) -> bool:
        """The stop sequence has asked it to stop (its end is not a failure to act on)."""
        return self._stopping

    # ---- the coroutine ----

    async def run(self) -> None:
        set_task_context(self.id.connector, self.id.task)
        self._record_state("started")
        try:
            try:
                await self._startup()
            except Exception:
                if self._metrics is not None:
                    self._metrics.record_startup("task", False)
                raise
            if self._metrics is not None and not self._stopping:
                self._metrics.record_startup("task", True)
            if not self._stopping:
                self.running = True
                self.running_since = time.monotonic()
                self._record_state("paused" if self._paused else "running")
                self.settled.set()
                log.info("Task %s (epoch %d) is running", self.id, self.epoch)
                await self._main_loop()
            if self.rebalancer.failure is not None:
                raise self.rebalancer.failure
            await self._close_path()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Connect's shape: what failed, in one line, first (a failed write's root cause:
            # ``WriteFailed: task t-0: No space left on device on /path (...)``), then the trace.
            text = str(exc)
            headline = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
            formatted = traceback.format_exc()
            self.trace = f"{headline}\n{formatted}"
            log.error(
                "Task %s (epoch %d) failed: %s\n%s",
                *(self.id, self.epoch, headline, formatted.rstrip()),
            )
            # Kept for what it is (the restart schedule reads it), not for its frames: the
            # trace is text now, and frames kept alive are garbage cycles for the collector
            # once the slot moves on (a storm of failed starts: thousands of them).
            self.failure = exc.with_traceback(None)
            await self._close_after_failure()
        finally:
            self.running = False
            if self.context is not None:  # the sink's writer: a write it holds is killed
                await self.context.end_background()
            self.binding.close("the incarnation is over")
            await self.ahead.drop()
            await self._close_consumer()
            if self.pipeline is not None:
                await self.pipeline.close()
            self._record_state("stopped")

    async def _startup(self) -> None:
        conn = await self._resolve(self._raw_connector)
        task_config = await self._resolve(self._raw_task)
        cfg = parse_connector(conn).config
        self.binding.group_limit = cfg.executor_writes_max
        self.pipeline = RecordPipeline(
            self.id, self.worker, cfg, task_config, self.settings, self._metrics
        )
        self.retrier.configure(cfg)
        self.gaps.configure(cfg)
        await self.pipeline.start()
        if self._metrics is not None:  # Connect's task counters exist, at 0, from the start
            self._metrics.record_task_counts(self.id.connector, self.id.task)
        # The worker's write deadline, for sinks that read it from their configuration.
        task_config.setdefault(WRITE_TIMEOUT_KEY, str(int(self.settings.write_timeout * 1000)))
        self.task = self._task_class()
        self.context = TaskContext(self.id, self.epoch, task_config, self.binding)
        log.info("Starting task %s (epoch %d)", self.id, self.epoch)
        await self._call("start", self.task.start(task_config, self.context))
        if self._stopping:
            return
        # Off the loop: a connector's own key or trust store (consumer.override.ssl.*) is read
        # when its first task starts, and a JKS store costs a keytool run.
        self.consumer = await asyncio.to_thread(
            TaskConsumer.for_task,
            self.worker,
            cfg,
            self.id,
            put_timeout=self.settings.callback_timeout,
            target=self.rebalancer,
            metrics=self._metrics,
            outages=self._outages,
            poll_records=self.task.max_poll_records(),
        )
        self.context.set_group_reader(self.consumer.committed_offsets)
        async with asyncio.timeout(self.settings.consumer_start_timeout):
            await self.consumer.start()

    async def _resolve(self, config: Mapping[str, str]) -> dict[str, str]:
        # Providers may read files: off the loop, under a deadline.
        async with asyncio.timeout(self.settings.resolve_timeout):
            return await asyncio.to_thread(resolve, config, self._providers)

    async def _main_loop(self) -> None:
        try:
            await self._loop()
        finally:
            await self.ahead.drop()  # its records were not delivered: nothing to give back

    async def _loop(self) -> None:
        next_flush = time.monotonic() + self.settings.flush_interval
        while not self._stopping:
            self._apply_pause()
            ahead = await self.ahead.take()
            if ahead is not None and ahead.fetched is not None:
                generation, polled, out_of_range = ahead.fetched
            else:
                ahead = None
                generation, polled, out_of_range = await self._poll()
            if self._stopping:
                return
            delay: float | None = None
            step = "deliver"  # the step under way, for the retry's bookkeeping
            async with self.lock:
                if self._stopping:
                    return
                if self.rebalancer.failure is not None:
                    raise self.rebalancer.failure
                assert self.context is not None
                try:
                    # Records handed out before a rebalance callback ran are not delivered: the
                    # callback's commit did not cover them; the new assignment fetches them again
                    # (aiokafka resets every position of a new assignment: to the sink's seeks,
                    # else to the group's offsets, which the closing commit set to what the sink
                    # made durable). Records handed out before a pause are sought back.
                    # A poll made ahead whose partitions were sought or paused since it began
                    # is given back the same way (``ahead.py``).
                    current = generation == self.progress.generation
                    stale = ahead is not None and ahead.stale(self.context.paused())
                    if current and (self._paused or stale):
                        self._fetch_again(polled)  # see ``PartitionProgress.refetch``
                    elif current:
                        if out_of_range:
                            await self.gaps.handle(out_of_range)
                        owned = self.context.assignment()
                        mine = {tp: rs for tp, rs in polled.items() if tp in owned}
                        converted = None
                        if ahead is not None and len(mine) == len(polled):
                            converted = ahead.converted
                        step = "deliver"
                        if await self._deliver(mine, converted):
                            self.retrier.succeeded(step)
                    if time.monotonic() >= next_flush or self.context.take_commit_request():
                        step = "commit"
                        await self._commit(closing=False)
                        next_flush = time.monotonic() + self.settings.flush_interval
                        self.retrier.succeeded(step)
                except ConnectdError as exc:
                    delay = self.retrier.after(exc, step)  # rewinds the batch for a retry
                    if delay is None:
                        raise
                    if self._metrics is not None:
                        self._metrics.record_task_counts(
                            self.id.connector, self.id.task, total_retries=1
                        )
            if delay is not None:
                await self.retrier.wait(delay)

    async def _fetch(self) -> Fetched:
        assert self.consumer is not None
        try:
            records = await self.consumer.poll(int(self.settings.poll_timeout * 1000))
        except OutOfRange as exc:
            # Handled under the lock, unless a rebalance callback runs first (``gaps.py``).
            return self.progress.generation, {}, exc.offsets
        # Read in the same step as the records were handed out: no callback ran in between.
        return self.progress.generation, records, {}

    async def _poll(self) -> Fetched:
        """One fetch, the rebalance generation it belongs to and the offsets it found out of
        range; returns early (empty) when the stop sequence asks."""
        # getmany waits for a rebalance to finish: bound that too.
        fetched = await unless_set(
            self._fetch(),
            self._stop_event,
            poll_bound(self.settings.callback_timeout),
            TaskTimeout(f"task {self.id}: a poll did not return (a rebalance never ended?)"),
        )
        return fetched if fetched is not None else (self.progress.generation, {}, {})

    async def _deliver(
        self, polled: Mapping[TopicPartition, list[Any]], converted: Converted | None = None
    ) -> int:
        """Convert (unless ``converted`` ahead), apply the error policy
        (``deadletter/policy.py``), ``put``; how many records. The next poll begins once the
        records are converted (``ahead.py``)."""
        assert self.pipeline is not None and self.task is not None
        # Before anything can fail: a retry re-reads these ranges (``retry.py``).
        ranges = self.progress.begin(polled)
        if converted is None:
            count, result, marks = await self.pipeline.convert(polled, ranges)
        else:  # converted before the ranges were known: they start where delivery continues
            count, result, marks = converted
            batch = dataclasses.replace(result.batch, ranges=tuple(sorted(ranges)))
            result = dataclasses.replace(result, batch=batch)
        self._look_ahead()
        if self._metrics is not None:  # the task's freshness: what may be committed next
            self._metrics.record_delivering(self.id.connector, self.id.task, ranges, marks)
        self.topics.update(tp.topic for tp in polled)
        batch = result.batch
        rejected = await self._call("reject", self.task.reject(batch)) if len(batch) else {}
        batch = await self.pipeline.sift(
            polled, result, rejected, type(self.task), ranges, self.progress.generation
        )
        await self._put(batch)
        self.progress.delivered()
        if self._metrics is not None and count:
            self._metrics.record_consumed(self.id.connector, self.id.task, count)
            self._metrics.record_task_counts(
                self.id.connector, self.id.task, sink_record_send=len(batch)
            )
        self.apply_seeks()
        return count

    def _look_ahead(self) -> None:
        """Begin the next poll and its conversion (``ahead.py``), unless the loop is to stop or
        the connector is paused (the next poll would hand nothing out)."""
        if self._stopping or self._paused or self.rebalancer.failure is not None:
            return
        assert self.context is not None
        self.ahead.begin(self._poll_ahead(), self.context.paused(), f"task {self.id}: poll")

    async def _poll_ahead(self) -> tuple[Fetched | None, Converted | None]:
        try:
            fetched = await self._poll()
        except TaskTimeout:  # made again, with its own bound, when its turn comes
            return None, None
        generation, polled, _ = fetched
        if not polled or self._stopping or generation != self.progress.generation:
            return fetched, None
        assert self.pipeline is not None
        try:
            # Ranges from the first records: the delivery sets them from its own positions.
            return fetched, await self.pipeline.convert(polled, offset_ranges(polled, {}))
        except Exception as exc:  # converted again at delivery, where a failure is handled
            log.debug(
                "Task %s: converting a poll ahead failed (%s); at delivery then", self.id, exc
            )
            return fetched, None

    async def _put(self, batch: RecordBatch) -> None:
        """``put``. A failure is retried (``retry.py``) or fails the incarnation: the slot's
        restart policy decides what next (a new incarnation resumes from what the sink
        committed; see ``daemon.runtime.slot``)."""
        assert self.task is not None
        began = time.monotonic()
        await self._call("put", self.task.put(batch))
        took = time.monotonic() - began
        self._record("a put", lambda m, c, t: m.record_put(c, t, len(batch), took))

    async def _commit(
        self, *, closing: bool, partitions: frozenset[TopicPartition] | None = None
    ) -> None:
        """``pre_commit`` (under ``is_closing`` if ``closing``), then the group commit."""
        assert self.task is not None and self.context is not None
        scope = partitions if partitions is not None else self.context.assignment()
        current = self.progress.positions(scope)
        began = time.monotonic()
        try:
            if closing:
                with self.context.closing():
                    durable = await self._call("pre_commit", self.task.pre_commit(current))
            else:
                durable = await self._call("pre_commit", self.task.pre_commit(current))
        except Exception:
            self._record_commit(began, ok=False)
            raise
        self._record_commit(began, ok=True)
        self.apply_seeks()
        offsets = {tp: o for tp, o in durable.items() if tp in scope}
        if self._metrics is not None:  # the task's freshness: committed offsets, stalls
            self._metrics.record_committed(self.id.connector, self.id.task, offsets)
        if offsets and self.consumer is not None:
            try:
                # With a dead-letter topic, each offset carries its dead-letter bound as
                # metadata (``deadletter/index.py``).
                bounds = self.pipeline.metadata(offsets) if self.pipeline is not None else None
                async with asyncio.timeout(self.settings.group_commit_timeout):
                    await self.consumer.commit(offsets, bounds)
            except Exception as exc:  # the group's offsets are for lag tools only
                log.warning("Could not commit offsets to the consumer group: %s", exc)

    # ---- helpers ----

    def _record(self, what: str, record: Callable[[TaskMetrics, str, int], object]) -> None:
        """Feed /metrics (``record(metrics, connector, task)``): a failure is logged, since a
        figure is never worth a task."""
        if self._metrics is not None:
            try:
                record(self._metrics, self.id.connector, self.id.task)
            except Exception:
                log.exception("Task %s: recording %s for /metrics failed", self.id, what)

    def _record_state(self, state: str) -> None:
        self._record("its state", lambda m, c, t: m.record_task_state(c, t, state))

    def _record_commit(self, began: float, *, ok: bool) -> None:
        took = time.monotonic() - began
        self._record("a commit", lambda m, c, t: m.record_commit_attempt(c, t, took, ok))

    async def call(self, name: str, coro: Awaitable[T]) -> T:
        """A sink callback under its deadline (for the parts: ``gaps``)."""
        return await self._call(name, coro)

    async def _call(self, name: str, coro: Awaitable[T]) -> T:
        """A sink callback under its deadline; ``TaskTimeout`` past it."""
        return await with_deadline(
            f"task {self.id}: {name}()", coro, self.settings.callback_timeout
        )

    # ---- what the parts see (``RebalanceHost``, ``RetryHost``) ----

    def assignment(self) -> frozenset[TopicPartition]:
        assert self.context is not None
        return self.context.assignment()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        assert self.consumer is not None
        self.consumer.seek(tp, offset)
        self.progress.seek(tp, offset)
        self.ahead.sought(tp)

    def _fetch_again(self, polled: Mapping[TopicPartition, list[Any]]) -> None:
        """Give a poll's records back: the connector was paused after the poll, or the poll was
        made ahead and went stale (``ahead.py``). A seek made since the poll began set where
        delivery continues (``progress.next``), so it wins."""
        assert self.consumer is not None and self.context is not None
        for tp, offset in self.progress.refetch(polled, self.context.assignment()):
            self.consumer.seek(tp, offset)
            if self._paused:
                log.info(
                    "Paused after a poll: %s is fetched again after the resume from %d", tp, offset
                )
            else:
                log.debug("A poll made ahead went stale: %s is fetched again from %d", tp, offset)

    def take_retry_wait(self) -> float | None:
        return self.context.take_retry_wait() if self.context is not None else None

    def apply_seeks(self) -> None:
        if self.context is None or self.consumer is None:
            return
        for tp, offset in self.context.take_seeks().items():
            self.seek(tp, offset)
            log.info("Seeking %s to offset %d", tp, offset)

    async def close_partitions(self, owned: frozenset[TopicPartition]) -> None:
        assert self.task is not None
        await self._commit(closing=True, partitions=owned)
        await self._call("close", self.task.close(owned))

    async def open_partitions(self, new: frozenset[TopicPartition]) -> None:
        assert self.task is not None
        await self._call("open", self.task.open(new))

    def adopt_epoch(self, epoch: int) -> None:
        assert self.context is not None
        self.epoch = epoch
        self.context.set_epoch(epoch)

    def release(self, partitions: frozenset[TopicPartition]) -> None:
        if self.consumer is None:
            return
        self.apply_seeks()
        self.topics.update(tp.topic for tp in partitions)
        self.consumer.release(partitions)
        self._apply_pause()

    def _apply_pause(self) -> None:
        if self.context is None or self.consumer is None:
            return
        wanted = self.context.assignment() if self._paused else self.context.paused()
        self.consumer.set_paused(wanted)

    async def _close_path(self) -> None:
        """The graceful end: closing ``pre_commit``, ``close``, ``stop`` (errors are logged)."""
        if self.task is None:
            return
        async with self.lock:
            await self._try("closing pre_commit and close", self._close_partitions())
            await self._try("stop", self._call("stop", self.task.stop()))
        log.info("Task %s (epoch %d) stopped", self.id, self.epoch)

    async def _close_partitions(self) -> None:
        if self.context is None or self.task is None:
            return
        owned = self.context.assignment()
        if owned:
            await self.close_partitions(owned)
        self.context.set_assignment(frozenset())

    async def _close_after_failure(self) -> None:
        # As Connect: the partitions are closed and the task stopped, without a last commit.
        if self.task is None or self.killed:
            return
        if self.context is not None and self.context.assignment():
            await self._try(
                "close", self._call("close", self.task.close(self.context.assignment()))
            )
        await self._try("stop", self._call("stop", self.task.stop()))

    async def _try(self, what: str, coro: Awaitable[Any]) -> None:
        await log_failure(f"Task {self.id}: {what}", coro)

    async def _close_consumer(self) -> None:
        if self.consumer is None:
            return
        try:
            async with asyncio.timeout(self.settings.consumer_close_timeout):
                await self.consumer.close()
        except Exception as exc:
            log.warning("Task %s: the consumer did not close cleanly: %s", self.id, exc)
