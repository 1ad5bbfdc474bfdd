"""A consumer's group membership, read from aiokafka's private ``GroupCoordinator``.

aiokafka keeps the generation, the member id and the rejoin trigger on
``AIOKafkaConsumer._coordinator``, none of it public (what this relies on: the package
docstring). Distributed mode's ``Member`` reads them here.
"""

from __future__ import annotations

from typing import Any

from aiokafka.protocol.group import JoinGroupRequest

UNKNOWN_MEMBER_ID: str = JoinGroupRequest.UNKNOWN_MEMBER_ID


def _coordinator(consumer: Any) -> Any:
    coordinator = getattr(consumer, "_coordinator", None)
    if coordinator is None:
        raise RuntimeError("the consumer has no group coordinator yet: start it with a group_id")
    return coordinator


def generation(consumer: Any) -> int:
    """The group generation of the last join (-1 before the first and after a reset)."""
    return int(_coordinator(consumer).generation)


def member_id(consumer: Any) -> str:
    """This member's id in the group ("" while it is not a member)."""
    return str(_coordinator(consumer).member_id)


def is_member(consumer: Any) -> bool:
    """True while the broker knows this member: aiokafka resets the id when the session expired,
    the member left, or the coordinator answered UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION."""
    coordinator = getattr(consumer, "_coordinator", None)
    return coordinator is not None and coordinator.member_id != UNKNOWN_MEMBER_ID


def request_rejoin(consumer: Any) -> None:
    """Make the coordination routine rejoin the group (it calls the assignor's ``metadata`` again,
    so changed metadata makes it a real rebalance)."""
    _coordinator(consumer).request_rejoin()
