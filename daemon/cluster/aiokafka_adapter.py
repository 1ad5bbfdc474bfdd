"""The only place that touches aiokafka's private group-coordinator state.

aiokafka keeps the generation, the member id and the rejoin trigger on
``AIOKafkaConsumer._coordinator`` (a ``GroupCoordinator``), none of it public. This module was
written against aiokafka 0.14.0 (consumer/group_coordinator.py): ``generation`` and ``member_id``
are set at L1314-1315 before ``_on_join_leader`` runs, ``request_rejoin()`` is at L538 and
``reset_generation()`` puts ``member_id`` back to ``JoinGroupRequest.UNKNOWN_MEMBER_ID``.
Importing it with any other aiokafka version raises ``ImportError``, so an upgrade is a
deliberate step: re-read those lines, then add the version to ``SUPPORTED``.
"""

from __future__ import annotations

from typing import Any

import aiokafka
from aiokafka.protocol.group import JoinGroupRequest

SUPPORTED = frozenset({"0.14.0"})

if aiokafka.__version__ not in SUPPORTED:  # pragma: no cover - depends on the install
    raise ImportError(
        f"daemon.cluster needs aiokafka {' or '.join(sorted(SUPPORTED))} (it reads private "
        f"group-coordinator state), found {aiokafka.__version__}: install a supported version"
    )

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
