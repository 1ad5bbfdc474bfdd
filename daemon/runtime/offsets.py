"""Connect's sink offsets API (KIP-875): read, alter and reset a connector's committed offsets.

The truth for an exactly-once sink is the sink itself (its commit log): a connector class that
keeps its own offsets overrides the offsets hooks of ``SinkConnector`` and is asked first. For
the others the consumer group ``connect-<name>`` holds the offsets, read and changed with
Kafka's group APIs. Altering and resetting also update the group, so lag tools agree with the
sink.

A connector that keeps its own offsets overrides ``SinkConnector.read_offsets``,
``alter_offsets`` and ``reset_offsets`` (``daemon.connectors.base``, where their guarantees are
stated; ``ParquetSink`` has all three). They are called on a fresh instance with the resolved
connector configuration, under a deadline of ``HOOK_TIMEOUT`` seconds, with ``run_in_executor``
bound to the worker's executor pool under the task id ``<connector>-offsets`` (``None`` when the
runtime has no pool). The defaults keep nothing, so the group alone answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    KafkaError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    for_code,
)
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata

from daemon.config import WorkerConfig
from daemon.config.clients import CONSUMER_KEYS
from daemon.connectors.api import ExecutorCall, SinkConnector
from daemon.connectors.records import TopicPartition
from daemon.errors import Conflict
from daemon.kafka.client import send_to_node
from daemon.runtime.clients import client_settings
from daemon.runtime.executors import ExecutorBinding, Executors
from daemon.runtime.incarnation.consumer import group_id, to_kafka
from daemon.runtime.model import SinkOffset

log = logging.getLogger("connectd.offsets")

TIMEOUT = 30.0
#: Deadline of a connector's offsets hook (it may wait for an executor, then run a job in it).
HOOK_TIMEOUT = 150.0
#: Seconds past the task consumers' session timeout that an offsets change waits for the
#: connector's stopping tasks to leave its group (a crashed member is dropped at the session's end).
LEAVE_MARGIN = 5.0
_GROUP_ID_NOT_FOUND = 69
_GROUP_NOT_EMPTY = 68
#: Errors of a commit made while the group still has members (only members may commit then).
_MEMBERS_LEFT = (
    CommitFailedError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)


class GroupNotEmpty(Conflict):
    """The connector is STOPPED but its consumer group still has members (tasks that have not
    finished stopping, or zombies), so its offsets cannot be changed yet. Answered 500 with
    Connect's message; the request can be retried."""

    def __init__(self, name: str, verb: str, members: Sequence[str] = ()) -> None:
        who = f" (members still in group {group_id(name)}: {', '.join(members)})" if members else ""
        super().__init__(
            f"Failed to {verb} consumer group offsets for connector {name} either because its"
            f" tasks haven't stopped completely yet or the connector was resumed before the"
            f" request to {verb} its offsets could be successfully completed{who}. If the"
            f" connector is in a stopped state, this operation can be safely retried. If it"
            f" doesn't eventually succeed, the Connect cluster may need to be restarted to get"
            f" rid of the zombie sink tasks.",
            status=500,
        )


def executor_call(executors: Executors | None, name: str, timeout: float) -> ExecutorCall | None:
    """``run_in_executor`` for connector ``name``'s offsets hooks (``None`` without a pool);
    ``timeout`` applies when a job passes none."""
    if executors is None:
        return None
    return ExecutorBinding(executors, f"{name}-offsets", timeout, group=name).run_in_executor


def _client_kwargs(worker: WorkerConfig, name: str) -> dict[str, Any]:
    return client_settings(worker, f"{name}-offsets")


def as_rest(offsets: Mapping[TopicPartition, int]) -> list[SinkOffset]:
    return [SinkOffset(tp.topic, tp.partition, o) for tp, o in sorted(offsets.items())]


async def read_offsets(
    worker: WorkerConfig,
    name: str,
    connector: SinkConnector,
    config: Mapping[str, str],
    executors: Executors | None = None,
) -> list[SinkOffset]:
    """The connector's committed offsets: from the sink's hook if it has one, else the group."""
    async with asyncio.timeout(HOOK_TIMEOUT):
        own = await connector.read_offsets(config, run_in_executor=_run(worker, executors, name))
    if own is not None:
        return as_rest(own)
    async with asyncio.timeout(TIMEOUT):
        return as_rest(await group_offsets(worker, name))


def _run(worker: WorkerConfig, executors: Executors | None, name: str) -> ExecutorCall | None:
    return executor_call(executors, name, worker.task_write_timeout.total_seconds())


async def group_offsets(worker: WorkerConfig, name: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(**_client_kwargs(worker, name))
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group_id(name))
    finally:
        await admin.close()
    return {
        TopicPartition(tp.topic, tp.partition): meta.offset
        for tp, meta in found.items()
        if meta.offset >= 0
    }


async def alter_offsets(
    worker: WorkerConfig,
    name: str,
    connector: SinkConnector,
    config: Mapping[str, str],
    offsets: Sequence[SinkOffset],
    executors: Executors | None = None,
) -> None:
    """Set partitions' next offsets in the sink (if it keeps them) and in the group. The caller
    checked that the connector is STOPPED (no task may commit meanwhile)."""
    wanted = {TopicPartition(o.topic, o.partition): o.offset for o in offsets}
    await wait_until_group_empty(worker, name, "alter", _leave_timeout(worker, config))
    run = _run(worker, executors, name)
    async with asyncio.timeout(HOOK_TIMEOUT):
        await connector.alter_offsets(config, dict(wanted), run_in_executor=run)
    async with asyncio.timeout(TIMEOUT):
        await commit_group_offsets(worker, name, wanted)


async def reset_offsets(
    worker: WorkerConfig,
    name: str,
    connector: SinkConnector,
    config: Mapping[str, str],
    executors: Executors | None = None,
) -> None:
    """Forget every committed offset: in the sink (if it keeps them) and in the group (which
    is deleted, as Connect does)."""
    await wait_until_group_empty(worker, name, "reset", _leave_timeout(worker, config))
    async with asyncio.timeout(HOOK_TIMEOUT):
        await connector.reset_offsets(config, run_in_executor=_run(worker, executors, name))
    async with asyncio.timeout(TIMEOUT):
        await delete_group(worker, name)


def _leave_timeout(worker: WorkerConfig, config: Mapping[str, str]) -> float:
    """The task consumers' session timeout (the connector's ``consumer.override.``, else the
    worker's ``consumer.``, else the worker's own) plus ``LEAVE_MARGIN``, in seconds."""
    seconds = worker.session_timeout.total_seconds()
    key = "session.timeout.ms"
    for raw in (worker.consumer.get(key), config.get(f"consumer.override.{key}")):
        if raw is not None:
            with contextlib.suppress(ValueError):  # checked when the tasks start
                seconds = cast(int, CONSUMER_KEYS[key].parse(raw)) / 1000.0
    return seconds + LEAVE_MARGIN


async def wait_until_group_empty(
    worker: WorkerConfig, name: str, verb: str, timeout: float
) -> None:
    """Wait until the connector's consumer group has no members, polling with a backoff.

    A STOPPED connector's tasks may still be finishing their last write and leaving the group
    (on another worker, in distributed mode), and while any member remains only members may
    commit. Nothing is changed before the group is empty, so a change that cannot be made
    leaves the sink and the group as they were. ``timeout`` (``_leave_timeout``: past the
    task consumers' session, when the broker has dropped a crashed member): a member still
    there then is a live zombie, and ``GroupNotEmpty`` names it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    admin = AIOKafkaAdminClient(**_client_kwargs(worker, name))
    await admin.start()
    try:
        pause = 0.05
        while True:
            left = deadline - loop.time()
            try:
                async with asyncio.timeout(max(min(TIMEOUT, left), 1.0)):
                    members = await _group_members(admin, group_id(name))
            except (KafkaError, TimeoutError) as exc:
                retriable = isinstance(exc, TimeoutError) or exc.retriable
                if not retriable or deadline - loop.time() <= 0:
                    raise
                log.info("offsets of %s: group %s not described yet: %r", name, group_id(name), exc)
                members = None
            if members == []:
                return
            left = deadline - loop.time()
            if left <= 0:
                raise GroupNotEmpty(name, verb, members or ())
            if members:
                log.info(
                    "offsets of %s: waiting for %d member(s) to leave group %s",
                    name,
                    len(members),
                    group_id(name),
                )
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)
    finally:
        await admin.close()


async def _group_members(admin: AIOKafkaAdminClient, group: str) -> list[str]:
    """The client ids of the group's members (none for a group that does not exist)."""
    members: list[str] = []
    for response in await admin.describe_consumer_groups([group]):
        for described in response.groups:
            code, _group, _state, _ptype, _protocol, found = described[:6]
            if code == _GROUP_ID_NOT_FOUND:
                continue
            if code:
                raise for_code(code)(f"could not describe consumer group {group}")
            members.extend(str(m[1]) or str(m[0]) for m in found)
    return sorted(members)


async def commit_group_offsets(
    worker: WorkerConfig, name: str, offsets: Mapping[TopicPartition, int]
) -> None:
    if not offsets:
        return
    consumer = AIOKafkaConsumer(
        group_id=group_id(name), enable_auto_commit=False, **_client_kwargs(worker, name)
    )
    await consumer.start()
    try:
        consumer.assign([to_kafka(tp) for tp in offsets])
        try:
            await consumer.commit(
                {to_kafka(tp): OffsetAndMetadata(o, "") for tp, o in offsets.items()}
            )
        except _MEMBERS_LEFT as exc:  # a member joined since the group was seen empty
            raise GroupNotEmpty(name, "alter") from exc
    finally:
        await consumer.stop()


async def delete_group(worker: WorkerConfig, name: str) -> None:
    """Delete the connector's consumer group (its members must be gone: the connector is
    STOPPED). aiokafka's admin client has no call for it, so the request is sent directly."""
    admin = AIOKafkaAdminClient(**_client_kwargs(worker, name))
    await admin.start()
    try:
        node = await admin.find_coordinator(group_id(name))
        response = await send_to_node(admin, node, DeleteGroupsRequest([group_id(name)]))
        for _, code in response.results:
            if code == _GROUP_NOT_EMPTY:
                raise GroupNotEmpty(name, "reset")
            if code and code != _GROUP_ID_NOT_FOUND:
                raise for_code(code)(f"could not delete consumer group {group_id(name)}")
    finally:
        await admin.close()
