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
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata

from daemon.config import WorkerConfig
from daemon.connectors.api import ExecutorCall, SinkConnector
from daemon.connectors.records import TopicPartition
from daemon.kafka.client import send_to_node
from daemon.runtime.executors import ExecutorBinding, Executors
from daemon.runtime.incarnation.consumer import client_settings, group_id, to_kafka
from daemon.runtime.model import SinkOffset

log = logging.getLogger("connectd.offsets")

TIMEOUT = 30.0
#: Deadline of a connector's offsets hook (it may wait for an executor, then run a job in it).
HOOK_TIMEOUT = 150.0
_GROUP_ID_NOT_FOUND = 69


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
    async with asyncio.timeout(HOOK_TIMEOUT):
        await connector.reset_offsets(config, run_in_executor=_run(worker, executors, name))
    async with asyncio.timeout(TIMEOUT):
        await delete_group(worker, name)


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
        await consumer.commit({to_kafka(tp): OffsetAndMetadata(o, "") for tp, o in offsets.items()})
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
            if code and code != _GROUP_ID_NOT_FOUND:
                raise for_code(code)(f"could not delete consumer group {group_id(name)}")
    finally:
        await admin.close()
