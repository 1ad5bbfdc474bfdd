"""Distributed mode's herder loop: group membership, the config log and the work it runs.

One ``HerderLoop`` per daemon, held by its ``DistributedHerder`` (together, Connect's
``DistributedHerder``, seed 001). ``start`` creates the
internal topics if missing (refusing unusable ones: ``InternalTopicInvalid``, exit 78), reads the
config log and the status topic to their ends, starts the executors if the connectors there
need them and waits (``executor.start.timeout.ms`` at most) until one can take a write, joins
the group and returns once the first assignment is applied: READY means joined and read. A
returning worker so takes work only once it can write it: the group's tasks go on running warm
where they are while its JVM starts, rather than moving to it and waiting there. Then one
coroutine (``_main``) acts on everything in order:

- **an assignment** (``Assigned``): read the config log at least to the offset the leader
  assigned from; stop what is revoked (stop sequence: killed and reaped before this worker
  rejoins, so the work never runs twice); start what is assigned; the leader (re)claims the
  config log's transactional writer (which fences a replaced leader), a member that is no longer
  leader drops it;
- **a lost membership** (``Lost``: the session expired while this process was stopped or cut
  off): every task here stops and its executors are killed before the member rejoins;
- **a config change** read from the log: connectors added or removed, or a task count changed,
  make this worker rejoin (a new round with its new config offset); other changes (a
  configuration, a target state, a restart request) apply at once to the work running here.

Statuses of the work here are written to the status topic with this member's generation
(``daemon.storage.kafka.statusstore``: an older generation never overwrites a newer one) after
every change and every ``STATUS_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from daemon.cluster import (
    Allocation,
    Assigned,
    AssignmentError,
    ClusterConfig,
    Event,
    Lost,
    Member,
)
from daemon.config import WorkerConfig
from daemon.errors import ConfigError, ConnectdError
from daemon.logs.levels import LoggerLevels, level_name, parse_level
from daemon.runtime.distributed.rejoin import BatchedRejoin, LeaderWriter
from daemon.runtime.distributed.settings import member_settings, storage_topics, topic_specs
from daemon.runtime.distributed.statuses import StatusPublisher
from daemon.runtime.distributed.warmup import warm_executors
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.worker import Worker
from daemon.storage.kafka import (
    ConfigLogReader,
    ConfigSnapshot,
    Departure,
    StatusReader,
    StatusSnapshot,
    StatusWriter,
    StoreTimeout,
    ensure_topics,
)
from daemon.storage.kafka.epochs import KafkaEpochs

log = logging.getLogger("connectd.herder")

#: How often the config log and the status topic are read for changes.
POLL_INTERVAL = 0.25
#: How often the statuses of the work here are written again even without a change.
STATUS_INTERVAL = 30.0
#: How long a member waits to rejoin while a member keeping other topics (the leader) leaves.
FOREIGN_REJOIN = 1.0
#: Config changes that need a rebalance are batched: a worker rejoins once none came for
#: this long, and at most ``REJOIN_MAX_WAIT`` s after the first.
REJOIN_QUIET = 0.5
REJOIN_MAX_WAIT = 3.0
#: How long a worker leaving on purpose waits between saying so and its LeaveGroup.
LEFT_NOTICE = 3 * POLL_INTERVAL
#: How often the loop checks that it was not frozen longer than the session timeout.
FREEZE_TICK = 0.2
#: Bound on one read of an internal topic to its end while running.
READ_TIMEOUT = 10.0


@dataclass(frozen=True)
class Role:
    """This member's place in the group as of its last completed rebalance."""

    generation: int = -1
    member_id: str = ""
    leader: bool = False
    leader_url: str | None = None


class HerderLoop:
    """``set_address`` (the REST URL other workers reach this one at) before ``start``."""

    def __init__(self, config: WorkerConfig, env: RuntimeEnv) -> None:
        assert config.group_id and config.config_storage_topic
        assert config.offset_storage_topic and config.status_storage_topic
        from daemon.runtime.clients import security_settings

        self.config = config
        self.url = ""
        self.worker_id = ""
        client = security_settings(config)
        boot = ",".join(config.bootstrap_servers)
        self._boot = boot
        self._client = client
        self._specs = topic_specs(config)
        self.epochs = KafkaEpochs(config.offset_storage_topic, boot, "", client_settings=client)
        self.worker = Worker(
            dataclasses.replace(env, epochs=self.epochs, publish_task_configs=self._publish)
        )
        #: Where a connector's new task configurations go: ``DistributedHerder.put_task_configs``
        #: (the leader writes them, any other worker forwards them there).
        self.put_task_configs: Callable[[str, list[dict[str, str]]], Awaitable[None]] | None = None
        self.reader = ConfigLogReader(config.config_storage_topic, boot, client_settings=client)
        self.status_reader = StatusReader(config.status_storage_topic, boot, client_settings=client)
        self.status_writer = StatusWriter(config.status_storage_topic, boot, client_settings=client)
        self.leader_writer = LeaderWriter(config, boot, client)
        self.member: Member | None = None
        self.role = Role()
        self.running = Allocation()
        self.snapshot = ConfigSnapshot()
        self.statuses = StatusSnapshot({}, {}, {})
        self.rebalances = 0
        self.rebalance_seconds = 0.0
        self.rebalancing = False  # applying an assignment now
        #: (monotonic end, seconds) of the latest rebalances: Connect's rebalance metrics.
        self.rebalance_log: collections.deque[tuple[float, float]] = collections.deque(maxlen=64)
        self._read_lock = asyncio.Lock()  # one reader of the config log at a time
        self._wake = asyncio.Event()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._applied_offset = -1  # the config offset the work here reflects
        self._applied_snapshot = ConfigSnapshot()
        # Restart requests and cluster-wide log levels at or after this offset are new: as in
        # Connect, those written before this worker started are not acted on.
        self._requests_from = 0
        self.publisher = StatusPublisher(self.status_writer, self.worker, "")
        self.rejoins = BatchedRejoin(self.rejoin, REJOIN_QUIET, REJOIN_MAX_WAIT)
        self._tasks: list[asyncio.Task[None]] = []
        self._first = asyncio.Event()
        self._start_error: ConfigError | None = None  # the group refused this worker
        self.loaded = False  # the config log and the statuses were read once

    # ---- lifecycle ----

    async def _publish(self, name: str, configs: list[dict[str, str]]) -> None:
        if self.put_task_configs is None:
            raise ConnectdError("this worker's herder takes no task configurations yet")
        await self.put_task_configs(name, configs)

    def set_address(self, url: str, worker_id: str) -> None:
        self.url = url
        self.worker_id = worker_id
        self.epochs.worker_id = worker_id
        self.publisher.worker_id = worker_id

    def _member(self) -> Member:
        settings = member_settings(self.config, self._boot, self.url, self._client)
        return Member(
            settings,
            lambda: ClusterConfig.from_snapshot(self.snapshot),
            left_on_purpose=lambda: self.statuses.left,
            departed=self._departed,
        )

    def _departed(self) -> dict[str, tuple[str, Allocation, int]]:
        """What the members that left on purpose said they ran, and how long ago (ms)."""
        now = int(time.time() * 1000)
        return {
            member: (d.url, Allocation(d.connectors, d.tasks), now - d.at_ms)
            for member, d in self.statuses.departures.items()
            if d.url
        }

    async def start(self, timeout: float) -> None:
        """Topics, stores, the group, the first assignment applied (see the module docstring)."""
        await ensure_topics(self._boot, self._specs, timeout=timeout, client_settings=self._client)
        await self.reader.start(timeout)
        await self.status_reader.start(timeout)
        await self.status_writer.start()
        await self.epochs.start()
        self.snapshot = await self.reader.read_to_end(timeout)
        self.statuses = await self.status_reader.read_to_end(timeout)
        self.loaded = True
        self._requests_from = self.snapshot.offset
        await warm_executors(self.config, self.snapshot, self.worker.env)
        self.member = self._member()
        await self.member.start()
        self._tasks = [
            asyncio.create_task(self._forward_events(), name="herder-events"),
            asyncio.create_task(self._main(), name="herder-main"),
            asyncio.create_task(self._poll(), name="herder-poll"),
            asyncio.create_task(self._watch_freeze(), name="herder-freeze"),
        ]
        try:
            async with asyncio.timeout(timeout):
                await self._first.wait()
        except TimeoutError:
            raise StoreTimeout(
                f"group {self.config.group_id!r}: no assignment within {timeout:g}s; is the "
                "broker's group coordinator up?"
            ) from None
        if self._start_error is not None:
            raise self._start_error

    async def stop(self) -> None:
        """Say this member leaves on purpose, stop the work here (stop sequence), report it
        UNASSIGNED, leave the group."""
        self.rejoins.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        loop = asyncio.get_running_loop()
        said = loop.time()
        if self.role.member_id:  # first: the leader must have read it before the LeaveGroup
            with contextlib.suppress(Exception):
                ran = Departure(
                    self.url,
                    self.running.connectors,
                    self.running.tasks,
                    int(time.time() * 1000),
                )
                await self.status_writer.put_left(self.role.member_id, self.worker_id, ran)
        await self.worker.stop_all("the worker is shutting down")
        with contextlib.suppress(Exception):
            await self.publisher.unassign_all()
        # The leader reads the status topic every POLL_INTERVAL; the round our LeaveGroup
        # starts must find the record, or our work is moved at once instead of reserved.
        await asyncio.sleep(max(0.0, said + LEFT_NOTICE - loop.time()))
        if self.member is not None:
            with contextlib.suppress(Exception):
                await self.member.leave()
        await self.leader_writer.drop()
        for closing in (self.reader, self.status_reader, self.status_writer, self.epochs):
            with contextlib.suppress(Exception):
                await closing.stop()

    @property
    def config_lag(self) -> int:
        """Config-log records read and not yet applied to the work here."""
        return max(0, self.snapshot.offset - max(self._applied_offset, 0))

    # ---- reading the stores ----

    async def sync(self, at_least: int = 0, timeout: float = READ_TIMEOUT) -> ConfigSnapshot:
        """Read the config log to its end (and at least to ``at_least``); wakes the loop when
        something changed."""
        async with self._read_lock:
            snapshot = await self.reader.read_to_end(timeout, at_least=at_least)
        if snapshot.offset != self.snapshot.offset:
            self.snapshot = snapshot
            self._wake.set()
        return self.snapshot

    async def _poll(self) -> None:
        last_status = 0.0
        while True:
            try:
                await self.sync()
                self.statuses = await self.status_reader.read_to_end(READ_TIMEOUT)
                force = time.monotonic() - last_status > STATUS_INTERVAL
                if force:
                    last_status = time.monotonic()
                await self.publisher.publish(force=force)  # a task that failed since, at once
            except (ConnectdError, Exception) as exc:  # the broker away: keep trying
                log.warning("Reading the cluster's topics failed: %s; retrying", exc)
            await asyncio.sleep(POLL_INTERVAL)

    async def _watch_freeze(self) -> None:
        """A loop that did not run for a whole session timeout (the process was stopped,
        paused or starved) sent no heartbeats: the group has given this worker's work to
        others. Its tasks are stopped at once, before any of them restarts itself with a new
        epoch, and the worker rejoins; the group's own verdict (``Lost``) may come later."""
        loop = asyncio.get_running_loop()
        limit = self.config.session_timeout.total_seconds()
        last = loop.time()
        while True:
            await asyncio.sleep(FREEZE_TICK)
            now = loop.time()
            if now - last > limit and self.running:
                log.warning(
                    "This worker's loop did not run for %.1f s, longer than session.timeout.ms:"
                    " its work belongs to others now; stopping it and rejoining",
                    now - last,
                )
                self._events.put_nowait(Lost(self.running))
                self._wake.set()
                self.rejoin()
            last = now

    async def _forward_events(self) -> None:
        assert self.member is not None
        while True:
            self._events.put_nowait(await self.member.next_event())
            self._wake.set()

    # ---- the loop ----

    async def _main(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                while not self._events.empty():
                    await self._on_event(self._events.get_nowait())
                if self._applied_offset >= 0 and self.snapshot.offset != self._applied_offset:
                    await self._on_config()
                await self.publisher.publish()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("The distributed worker's loop failed on an event; continuing")

    async def _on_event(self, event: Event) -> None:
        if isinstance(event, Lost):
            if self.role.generation < 0 and not self.running:
                return  # handled already (the freeze watcher saw it first)
            log.warning(
                "This worker is no longer a member of group %s (its session expired: it was"
                " stopped, paused or cut off): stopping its %d task(s) before it rejoins",
                self.config.group_id,
                len(event.running.tasks),
            )
            self.role = Role()
            self.running = Allocation()
            await self.leader_writer.drop()
            await self.worker.stop_all("this worker lost its group membership")
            # The stop sequences killed the executors that were writing; the idle ones go
            # too: nothing that lived through this worker's time as a zombie is kept.
            recycle = getattr(self.worker.env.executors, "recycle_idle", None)
            if recycle is not None:
                await recycle("this worker lost its group membership")
            return
        if not isinstance(event, Assigned):
            log.error("Group %s: %s; not taking work", self.config.group_id, event.error)
            return
        started = time.monotonic()
        self.rebalancing = True
        try:
            await self._assigned(event, started)
        finally:
            self.rebalancing = False

    async def _assigned(self, event: Assigned, started: float) -> None:
        a = event.assignment
        if a.error is AssignmentError.FOREIGN_STORAGE:
            await self._foreign_storage(a.storage)
            return
        if a.error is AssignmentError.CONFIG_MISMATCH:
            log.info("Config log behind the group's (offset %d): reading it", a.config_offset)
            await self._sync_or_back_off(a.config_offset)
            self.rejoin()
            return
        self.role = Role(event.generation, event.member_id, event.leader, a.leader_url)
        # Statuses carry a number that only grows, even across a group that emptied (Kafka
        # then starts its generations at 1 again): drawn from Kafka once per rebalance.
        try:
            self.publisher.generation = await self.epochs.draw(
                f"connectd-generation-{self.config.group_id}", "the status generation"
            )
        except ConnectdError as exc:  # statuses keep the previous number; the work goes on
            log.warning("No new status generation drawn: %s", exc)
        if not await self._sync_or_back_off(a.config_offset):
            return
        if event.leader:
            try:
                await self.leader_writer.claim()
            except Exception as exc:  # the work goes on; each write tries again
                log.error("As the leader, could not start the config log's writer: %r", exc)
        else:
            await self.leader_writer.drop()
        revoked = self.running - event.running
        self.running = event.running
        await self._apply()
        self.rebalances += 1
        ended = time.monotonic()
        self.rebalance_seconds += ended - started
        self.rebalance_log.append((ended, ended - started))
        log.info(
            "Joined group %s at generation %d as %s (%s); running %d connector(s), %d task(s)",
            self.config.group_id,
            event.generation,
            event.member_id,
            "leader" if event.leader else f"leader {a.leader_url}",
            len(self.running.connectors),
            len(self.running.tasks),
        )
        self._first.set()
        if self.snapshot.offset > a.config_offset:
            self.rejoins.soon()  # the config changed while this round ran: place the change
        else:  # this round placed every change read here
            self.rejoins.cancel()
        if revoked or a.revoked:
            self.rejoin()  # work stopped here: the next round places it

    async def _sync_or_back_off(self, offset: int) -> bool:
        timeout = self.config.worker_sync_timeout.total_seconds()
        try:
            await self.sync(at_least=offset, timeout=timeout)
            return True
        except ConnectdError as exc:
            backoff = self.config.worker_unsync_backoff.total_seconds()
            log.error(
                "Could not read the config log to offset %d within %g s (%s): stopping the"
                " work here and rejoining in %g s",
                offset,
                timeout,
                exc,
                backoff,
            )
            self.running = Allocation()
            await self.worker.stop_all("this worker could not read the config log")
            loop = asyncio.get_running_loop()
            loop.call_later(backoff, self.rejoin)
            return False

    async def _foreign_storage(self, group: tuple[str, ...]) -> None:
        """The group keeps its state in ``group``'s topics. Where this worker keeps the same,
        another member is the odd one (the leader, now): it leaves, and this worker rejoins a
        moment later without stopping anything. Otherwise this worker must not take work: at
        start, ``start`` raises (exit 78); later, it stops its work and asks again after a
        back-off."""
        own = storage_topics(self.config)
        if tuple(group) == own:
            log.warning(
                "Group %s: a member keeps its state in other topics than (%s); it leaves the"
                " group, this worker rejoins",
                self.config.group_id,
                ", ".join(own),
            )
            asyncio.get_running_loop().call_later(FOREIGN_REJOIN, self.rejoin)
            return
        error = ConfigError(
            f"group {self.config.group_id!r} keeps its configs, offsets and statuses in topics "
            f"{', '.join(group)} (config.storage.topic, offset.storage.topic, "
            f"status.storage.topic of its workers), but this worker's are {', '.join(own)}: "
            "every worker of a group must name the same three; fix these settings, or set "
            "another group.id to start a cluster of its own"
        )
        if not self._first.is_set():
            self._start_error = error
            self._first.set()
            return
        backoff = self.config.worker_unsync_backoff.total_seconds()
        log.error("%s; stopping the work here and asking again in %g s", error, backoff)
        self.running = Allocation()
        await self.worker.stop_all("this worker's topics are not its group's")
        asyncio.get_running_loop().call_later(backoff, self.rejoin)

    def rejoin(self) -> None:
        if self.member is not None:
            self.member.request_rejoin()

    async def _on_config(self) -> None:
        old = ClusterConfig.from_snapshot(self._applied_snapshot).task_counts
        new = ClusterConfig.from_snapshot(self.snapshot).task_counts
        await self._apply()
        if old != new:  # connectors or task counts changed: a new round (every worker asks,
            # as in Connect: a follower waiting for its next heartbeat to hear of the leader's
            # round cost a create up to heartbeat.interval.ms)
            self.rejoins.soon()

    async def _apply(self) -> None:
        snapshot = self.snapshot
        await self.worker.reconcile(snapshot, self.running)
        for request in snapshot.restarts_since(self._requests_from):
            rt = self.worker.get(request.connector)
            if rt is not None:
                async with rt.lock:
                    if rt.runs_instance or request.include_tasks:
                        await rt.restart(
                            include_tasks=request.include_tasks, only_failed=request.only_failed
                        )
        for wanted in snapshot.levels_since(self._requests_from):
            level = parse_level(wanted.level)
            if level is None:
                log.warning(
                    "config log: cluster-wide level %r for logger %s is not a log level; ignored",
                    wanted.level,
                    wanted.namespace,
                )
                continue
            changed = LoggerLevels().set_level(wanted.namespace, level)
            log.info(
                "Logger %s set to %s cluster-wide (scope=cluster): %d logger(s) changed",
                *(wanted.namespace, level_name(level), len(changed)),
            )
        self._requests_from = snapshot.offset
        self._applied_offset = snapshot.offset
        self._applied_snapshot = snapshot
