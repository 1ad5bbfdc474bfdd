"""Connector offsets (KIP-875) in Connect's sink shape, with Connect's messages."""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_worker import Client

NAME = "sink"
NOT_STOPPED = (
    "Connectors must be in the STOPPED state before their offsets can be modified. This can be"
    f" done for the specified connector by issuing a 'PUT' request to the '/connectors/{NAME}/stop'"
    " endpoint"
)


def _offset(topic: str, partition: Any, offset: Any) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": partition},
        "offset": {"kafka_offset": offset},
    }


async def _stopped(client: Client) -> None:
    await client.create(NAME)
    assert (await client.call("PUT", f"/connectors/{NAME}/stop")).status == 204


async def test_get_offsets_empty_and_404(client: Client) -> None:
    await client.create(NAME)
    answer = await client.get(f"/connectors/{NAME}/offsets")
    assert answer.status == 200
    assert answer.json == {"offsets": []}
    assert (await client.get("/connectors/nope/offsets")).error(404) == "Connector nope not found"


async def test_alter_then_get_then_reset(client: Client) -> None:
    await _stopped(client)
    body = {"offsets": [_offset("t", 0, 10), _offset("t", "1", "20"), _offset("u", 0, 5)]}
    answer = await client.call("PATCH", f"/connectors/{NAME}/offsets", json=body)
    assert answer.status == 200
    assert answer.json == {
        "message": "The offsets for this connector have been altered successfully"
    }
    offsets = (await client.get(f"/connectors/{NAME}/offsets")).json["offsets"]
    assert offsets == [_offset("t", 0, 10), _offset("t", 1, 20), _offset("u", 0, 5)]
    answer = await client.call("DELETE", f"/connectors/{NAME}/offsets")
    assert answer.status == 200
    # Connect's message, then the warning that the records before those offsets are written
    # again (tests/unit/rest/test_startup_and_reset.py has its text).
    assert answer.json["message"].startswith(
        "The offsets for this connector have been reset successfully. Warning: "
    )
    assert (await client.get(f"/connectors/{NAME}/offsets")).json == {"offsets": []}


async def test_alter_and_reset_need_stopped(client: Client) -> None:
    await client.create(NAME)
    body = {"offsets": [_offset("t", 0, 10)]}
    assert (await client.call("PATCH", f"/connectors/{NAME}/offsets", json=body)).error(
        400
    ) == NOT_STOPPED
    assert (await client.call("DELETE", f"/connectors/{NAME}/offsets")).error(400) == NOT_STOPPED
    assert (await client.call("PUT", f"/connectors/{NAME}/pause")).status == 202
    (await client.call("DELETE", f"/connectors/{NAME}/offsets")).error(400)


async def test_alter_and_reset_unknown_is_404(client: Client) -> None:
    body = {"offsets": [_offset("t", 0, 10)]}
    (await client.call("PATCH", "/connectors/nope/offsets", json=body)).error(404)
    (await client.call("DELETE", "/connectors/nope/offsets")).error(404)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Partitions / offsets need to be provided for an alter offsets request"),
        ({"offsets": []}, "Partitions / offsets need to be provided for an alter offsets request"),
        ({"offsets": [{}]}, "The partition for a sink connector offset cannot be null or missing"),
        (
            {"offsets": [{"partition": None, "offset": None}]},
            "The partition for a sink connector offset cannot be null or missing",
        ),
        (
            {"offsets": [{"partition": {"kafka_topic": "t"}, "offset": None}]},
            "must contain the keys 'kafka_topic' and 'kafka_partition'",
        ),
        (
            {"offsets": [_offset("t", "not a number", 1)]},
            "Partition values for sink connectors need to be integers",
        ),
        (
            {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {}}]},
            "should either be null or contain the key 'kafka_offset'",
        ),
        (
            {"offsets": [_offset("t", 1, "not a number")]},
            "Offset values for sink connectors need to be integers",
        ),
        ({"offsets": [_offset(None, 1, 1)]}, "Kafka topic names must be valid strings"),
        ({"offsets": [_offset("t", None, 1)]}, "Kafka partitions must be valid numbers"),
        ({"offsets": [_offset("t", 1, -5)]}, "must not be negative"),
        ({"offsets": [_offset("t", 1.5, 1)]}, "need to be integers"),
        (
            {
                "offsets": [
                    {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None}
                ]
            },
            "null offset",
        ),
        ({"offsets": "all"}, "offsets"),
        ({"offsets": [{"partition": {}, "extra": 1}]}, "unrecognized"),
    ],
)
async def test_alter_rejects_malformed_offsets(
    client: Client, body: dict[str, Any], message: str
) -> None:
    await _stopped(client)
    assert message in (await client.call("PATCH", f"/connectors/{NAME}/offsets", json=body)).error(
        400
    )


async def test_later_entries_for_a_partition_win(client: Client) -> None:
    await _stopped(client)
    body = {"offsets": [_offset("t", 0, 10), _offset("t", 0, 11)]}
    assert (await client.call("PATCH", f"/connectors/{NAME}/offsets", json=body)).status == 200
    offsets = (await client.get(f"/connectors/{NAME}/offsets")).json["offsets"]
    assert offsets == [_offset("t", 0, 11)]
