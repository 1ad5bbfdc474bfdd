"""The config log: every worker reads it, only the leader writes it, in transactions.

``ConfigLogReader`` reads the single-partition config topic with
``isolation_level="read_committed"`` and keeps a ``ConfigSnapshot`` (``configrecords``) of what it
has read; ``read_to_end`` brings it up to the end the broker reports when it is called.

``ConfigLogWriter`` is the leader's: one transactional producer whose ``transactional.id`` is
``connectd-cluster-<group.id>`` (Connect uses ``connect-cluster-<group.id>``), and every write one
transaction, so a connector's task configs and their commit record land together or not at all.
Starting a writer registers that id with the broker's transaction coordinator, which bumps the
producer epoch and aborts the previous holder's open transaction: a replaced leader (a zombie
that was paused, cut off, or slow) is fenced, its next write raises ``LeaderFenced`` and is
never visible to a ``read_committed`` reader. That is Connect's ``claimWritePrivileges`` /
``sendPrivileged`` (KIP-618) on aiokafka.

Limit, as in Connect: writes a zombie committed *before* the new leader's writer started stay
in the log; the new leader reads to the end before it acts on the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidProducerEpoch, ProducerFenced
from aiokafka.structs import ConsumerRecord

from daemon.errors import ConnectdError
from daemon.storage.kafka import configrecords as rec
from daemon.storage.kafka.configrecords import ConfigLogState, ConfigSnapshot, Properties
from daemon.storage.kafka.errors import ConfigWriteFailed, LeaderFenced, WriteOutcomeUnknown
from daemon.storage.kafka.tail import TopicTail, client_options, start_producer
from daemon.structs import TargetState, TaskId

log = logging.getLogger("connectd.storage.configlog")

#: Every config write is small; a transaction that takes longer than this is given up by the
#: broker (aiokafka then reports it as ProducerFenced), so keep it well above ``write_timeout``.
TRANSACTION_TIMEOUT_MS = 60_000
#: Bound on aborting a failed transaction before the writer closes.
ABORT_TIMEOUT = 5.0


def transactional_id(group_id: str) -> str:
    """The one transactional id every leader of ``group_id`` writes the config log with."""
    return f"connectd-cluster-{group_id}"


class ConfigLogReader:
    """Reads the config topic (``read_committed``) into immutable snapshots.

    ``snapshot`` is what has been read so far; ``read_to_end(timeout)`` reads up to the end
    offset it observes when called, under the deadline, and returns the new snapshot, or raises
    ``StoreTimeout`` naming the topic (whatever was read meanwhile is kept). One coroutine owns
    a reader at a time. Start it after ``topics.ensure_topics``: reading a missing topic may
    make a broker with ``auto.create.topics.enable`` create it with the wrong settings.
    """

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str | list[str],
        *,
        client_settings: Mapping[str, Any] | None = None,
        client_id: str = "connectd-config-log",
    ) -> None:
        self.topic = topic
        self._state = ConfigLogState()
        self._snapshot = ConfigSnapshot()
        self._tail = TopicTail(
            topic,
            bootstrap_servers,
            self._apply,
            isolation_level="read_committed",
            client_settings=client_settings,
            client_id=client_id,
        )

    @property
    def snapshot(self) -> ConfigSnapshot:
        return self._snapshot

    async def start(self, timeout: float = 30.0) -> None:
        await self._tail.start(timeout)

    async def stop(self) -> None:
        await self._tail.stop()

    async def read_to_end(self, timeout: float, *, at_least: int = 0) -> ConfigSnapshot:
        """Read to the end observed now, and at least up to ``at_least`` (the value a
        ``ConfigLogWriter`` write returned: the leader reads its own write back)."""
        await self._tail.read_to_end(timeout, {0: at_least})
        self._snapshot = self._state.snapshot()
        return self._snapshot

    def _apply(self, record: ConsumerRecord[bytes, bytes]) -> None:
        self._state.apply(record.key, record.value, record.offset)

    async def __aenter__(self) -> ConfigLogReader:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class ConfigLogWriter:
    """The leader's writer of the config topic: each public ``put_*`` / ``delete_*`` is one
    transaction that is committed, or raises and is never visible to ``read_committed`` readers.
    Each returns the offset after its last record, for ``ConfigLogReader.read_to_end(at_least=)``.

    - ``start()`` claims write privileges: any older writer with the same ``group_id`` is fenced
      from then on.
    - ``LeaderFenced``: a newer writer started; this one is closed and every later call raises
      it again. Only a worker that is still the leader starts a new writer.
    - ``WriteOutcomeUnknown``: the transaction did not end within ``write_timeout`` seconds; it
      may have committed. The writer is closed; read the log to its end to know.
    - ``ConfigWriteFailed``: any other failure; nothing was committed, the writer is closed.
      Every later call on a closed writer raises the same error again.

    Calls are serialised (one transaction at a time), so several coroutines may share a writer.
    """

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str | list[str],
        group_id: str,
        *,
        write_timeout: float = 30.0,
        client_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.transactional_id = transactional_id(group_id)
        self.write_timeout = write_timeout
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            acks="all",
            client_id=f"connectd-config-writer-{group_id}",
            **client_options(client_settings),
        )
        self._lock = asyncio.Lock()
        self._started = False
        self._closed: BaseException | None = None

    @property
    def closed(self) -> bool:
        """A write failed or the writer was fenced: it writes nothing more (start a new one)."""
        return self._closed is not None

    async def start(self) -> None:
        """Connect and register the transactional id (this fences every older writer)."""
        await start_producer(self._producer, self.write_timeout)
        self._started = True

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self._producer.stop()

    async def __aenter__(self) -> ConfigLogWriter:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- the writes ---------------------------------------------------------------------------

    async def put_connector_config(
        self, name: str, properties: Properties, *, target_state: TargetState | None = None
    ) -> int:
        """Create or update a connector; properties are stored as given (``${...}`` kept). With
        ``target_state`` (Connect's ``initial_state``), the state record goes first, in the
        same transaction."""
        records = [] if target_state is None else [rec.target_state_record(name, target_state)]
        return await self.write([*records, rec.connector_record(name, properties)])

    async def delete_connector(self, name: str) -> int:
        """The connector's tombstone and its target state's, in one transaction (Connect)."""
        return await self.write(
            [rec.connector_record(name, None), rec.target_state_record(name, None)]
        )

    async def put_task_configs(self, name: str, configs: Sequence[Properties]) -> int:
        """``task-<name>-0..n-1`` and ``commit-<name>`` in one transaction: readers see all of
        them or none."""
        tasks = [rec.task_record(TaskId(name, i), c) for i, c in enumerate(configs)]
        return await self.write([*tasks, rec.commit_record(name, len(configs))])

    async def put_target_state(self, name: str, state: TargetState) -> int:
        return await self.write([rec.target_state_record(name, state)])

    async def put_restart_request(
        self, name: str, *, include_tasks: bool = False, only_failed: bool = False
    ) -> int:
        return await self.write(
            [rec.restart_record(name, include_tasks=include_tasks, only_failed=only_failed)]
        )

    async def write(self, records: Sequence[tuple[str, bytes | None]]) -> int:
        """Write ``(key, value)`` records to the config topic's one partition in one transaction;
        returns the offset after the last one (pass it to ``read_to_end(at_least=...)``)."""
        async with self._lock:
            if self._closed is not None:
                raise self._closed_error() from self._closed
            if not self._started:
                raise RuntimeError("the config-log writer is not started")
            try:
                async with asyncio.timeout(self.write_timeout):
                    return await self._transaction(records)
            except (ProducerFenced, InvalidProducerEpoch) as exc:
                await self._close(exc, abort=False)  # the broker aborted it already
                raise self._closed_error() from exc
            except Exception as exc:  # any failure ends this writer, as in Connect
                await self._close(exc, abort=True)
                raise self._closed_error() from exc

    async def _transaction(self, records: Sequence[tuple[str, bytes | None]]) -> int:
        await self._producer.begin_transaction()
        futures = [
            await self._producer.send(self.topic, key=key.encode(), value=value, partition=0)
            for key, value in records
        ]
        last = -1
        for fut in futures:
            last = (await fut).offset
        await self._producer.commit_transaction()
        return last + 1

    async def _close(self, reason: BaseException, *, abort: bool) -> None:
        self._closed = reason
        if abort:  # lets readers' last stable offset move on now, not after the txn timeout
            with contextlib.suppress(Exception):
                async with asyncio.timeout(ABORT_TIMEOUT):
                    await self._producer.abort_transaction()
        try:
            await self.stop()
        except Exception:  # the producer is broken already; closing is best effort
            log.debug("closing the config-log writer failed", exc_info=True)
        log.warning("config log %r: %s", self.topic, self._closed_error())

    def _closed_error(self) -> ConnectdError:
        reason = self._closed
        if isinstance(reason, ProducerFenced | InvalidProducerEpoch):
            return LeaderFenced(
                f"config log {self.topic!r}: a newer leader's writer "
                f"(transactional.id={self.transactional_id}) fenced this one; the write was not "
                "committed. Only the current leader writes the config log"
            )
        if isinstance(reason, TimeoutError):
            return WriteOutcomeUnknown(
                f"config log {self.topic!r}: a transaction did not end within "
                f"{self.write_timeout:g}s and the writer was closed; the write may have "
                "committed: read the config log to its end to know"
            )
        return ConfigWriteFailed(
            f"config log {self.topic!r}: a write failed ({type(reason).__name__}: {reason}) and "
            "the writer was closed; it was not committed. Start a new writer if this worker is "
            "still the leader"
        )
