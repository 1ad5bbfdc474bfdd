"""``GET``/``PATCH``/``DELETE /connectors/{c}/offsets`` in Connect's sink shape (KIP-875).

For connectd's exactly-once sinks these are the offsets committed with the data in the sink;
altering them is durable and honoured at the next start. PATCH and DELETE need the connector
STOPPED: the worker answers otherwise with Connect's 400 message. Request bodies get Connect's
messages for each malformed part. One difference: a ``null`` offset (Connect: reset that one
partition) is refused with 400, since a sink's commit log cannot forget one partition; give
the offset to start from, or DELETE to reset them all.
"""

from __future__ import annotations

import json
import re

from aiohttp import web

from daemon.config.jsonfile import scalar_text
from daemon.rest import models as m
from daemon.rest.api import Reply, Routes, body
from daemon.rest.context import context
from daemon.rest.errors import bad_request, json_reply
from daemon.runtime.model import SinkOffset

routes = Routes("offsets")

ALTERED = "The offsets for this connector have been altered successfully"
RESET = "The offsets for this connector have been reset successfully"
_SHOWN = 5  # partitions named in the reset warning
_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")
_E400 = Reply(400, "Invalid offsets, or the connector is not STOPPED", m.ErrorMessage)
_E404 = Reply(404, "No such connector", m.ErrorMessage)


def _java_text(value: object) -> str:
    text = scalar_text(value)
    return text if text is not None else json.dumps(value)


def _java_int(value: object, bits: int) -> int | None:
    """``Integer.parseInt(String.valueOf(value))`` / ``Long.parseLong``: None if it fails."""
    if isinstance(value, bool):
        return None
    text = str(value) if isinstance(value, int) else value if isinstance(value, str) else None
    if text is None or not _JAVA_INT.match(text):
        return None
    number = int(text)
    return number if -(2 ** (bits - 1)) <= number < 2 ** (bits - 1) else None


def parse_offsets(entries: list[m.OffsetEntry] | None) -> list[SinkOffset]:
    """Connect's ``SinkUtils.parseSinkConnectorOffsets``, with its messages; later entries for
    the same partition win."""
    if not entries:
        raise bad_request("Partitions / offsets need to be provided for an alter offsets request")
    parsed: dict[tuple[str, int], int] = {}
    for entry in entries:
        partition_map = entry.partition
        if partition_map is None:
            raise bad_request("The partition for a sink connector offset cannot be null or missing")
        if "kafka_topic" not in partition_map or "kafka_partition" not in partition_map:
            raise bad_request(
                "The partition for a sink connector offset must contain the keys 'kafka_topic'"
                " and 'kafka_partition'"
            )
        topic = partition_map["kafka_topic"]
        if topic is None or scalar_text(topic) is None:
            raise bad_request("Kafka topic names must be valid strings and may not be null")
        raw_partition = partition_map["kafka_partition"]
        if raw_partition is None:
            raise bad_request("Kafka partitions must be valid numbers and may not be null")
        partition = _java_int(raw_partition, 32)
        if partition is not None and partition < 0:
            raise bad_request(f"Kafka partitions must not be negative: {partition}")
        if partition is None:
            raise bad_request(
                "Failed to parse the following Kafka partition value in the provided offsets:"
                f" '{_java_text(raw_partition)}'. Partition values for sink connectors need to"
                " be integers."
            )
        offset_map = entry.offset
        if offset_map is None:
            raise bad_request(
                f"A null offset (reset of partition {_java_text(topic)}-{partition} alone) is not"
                " supported by connectd's sinks; give the offset to resume from, or DELETE the"
                " connector's offsets to reset them all"
            )
        if "kafka_offset" not in offset_map:
            raise bad_request(
                "The offset for a sink connector should either be null or contain the key"
                " 'kafka_offset'"
            )
        raw_offset = offset_map["kafka_offset"]
        offset = _java_int(raw_offset, 64)
        if offset is not None and offset < 0:
            raise bad_request(f"Kafka offsets must not be negative: {offset}")
        if offset is None:
            raise bad_request(
                "Failed to parse the following Kafka offset value in the provided offsets:"
                f" '{_java_text(raw_offset)}'. Offset values for sink connectors need to be"
                " integers."
            )
        parsed[(str(scalar_text(topic)), partition)] = offset
    return [SinkOffset(topic, partition, offset) for (topic, partition), offset in parsed.items()]


@routes.op(
    "GET",
    "/connectors/{connector}/offsets",
    "The connector's committed offsets",
    Reply(200, "The offsets", m.ConnectorOffsets),
    _E404,
)
async def get_offsets(request: web.Request) -> web.Response:
    ctx = context(request)
    offsets = await ctx.call(ctx.herder.get_offsets(request.match_info["connector"]))
    return json_reply({"offsets": [o.to_json() for o in offsets]})


@routes.op(
    "PATCH",
    "/connectors/{connector}/offsets",
    "Alter a STOPPED connector's offsets; the next start resumes from them",
    Reply(200, "Altered", m.Message),
    _E400,
    _E404,
    body=m.OffsetsBody,
)
async def alter_offsets(request: web.Request) -> web.Response:
    ctx = context(request)
    offsets = parse_offsets(body(request, m.OffsetsBody).offsets)
    await ctx.call(ctx.herder.alter_offsets(request.match_info["connector"], offsets))
    return json_reply({"message": ALTERED})


@routes.op(
    "DELETE",
    "/connectors/{connector}/offsets",
    "Reset a STOPPED connector's offsets; the next start begins anew (the records the sink"
    " holds already are written again)",
    Reply(200, "Reset; the message warns when the sink held committed records", m.Message),
    _E400,
    _E404,
)
async def reset_offsets(request: web.Request) -> web.Response:
    ctx = context(request)
    name = request.match_info["connector"]
    # What the sink had committed: the records before those offsets are in it already.
    before = await ctx.call(ctx.herder.get_offsets(name))
    await ctx.call(ctx.herder.reset_offsets(name))
    return json_reply({"message": reset_message(before)})


def reset_message(before: list[SinkOffset]) -> str:
    """Connect's answer to a reset, and when the sink had committed offsets, what resuming
    does: a reset is not undone by the sink, so every record before them is written again."""
    held = [o for o in before if o.offset > 0]
    if not held:
        return RESET
    shown = ", ".join(f"{o.topic}-{o.partition} before offset {o.offset}" for o in held[:_SHOWN])
    more = f" and {len(held) - _SHOWN} more partition(s)" if len(held) > _SHOWN else ""
    return (
        f"{RESET}. Warning: the sink already holds the records before the offsets it had"
        f" committed ({shown}{more}). A reset does not remove them: resuming the connector"
        " consumes those partitions again from auto.offset.reset (earliest by default) and"
        " writes those records into the table a second time, unless it is emptied first"
    )
