"""A consumer's fetch positions and highwaters, read without waiting, and a reset without
waiting, through aiokafka's private ``SubscriptionState`` and ``Fetcher``.

aiokafka's public ``position()`` waits (for a reset, or the committed offset) when a position
is not known yet, and ``seek_to_beginning``/``seek_to_end`` wait for the new position: a task
polling on the event loop wants neither (what this relies on: the package docstring).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from aiokafka import TopicPartition
from aiokafka.consumer.fetcher import OffsetResetStrategy


@dataclass(frozen=True)
class FetchState:
    """Where an assigned partition's next fetch starts (``None`` while unknown: not yet read
    from the group, or being reset) and its log end as the last fetch response gave it
    (``None`` until one came)."""

    position: int | None
    highwater: int | None


def _assignment(consumer: Any) -> Any:
    subscription = consumer._subscription.subscription
    return None if subscription is None else subscription.assignment


def _state(assignment: Any, tp: TopicPartition) -> FetchState | None:
    state = assignment.state_value(tp)
    if state is None:
        return None
    position = int(state.position) if state.has_valid_position else None
    highwater = None if state.highwater is None else int(state.highwater)
    return FetchState(position, highwater)


def fetch_state(consumer: Any, tp: TopicPartition) -> FetchState | None:
    """``tp``'s state on ``consumer`` (an ``AIOKafkaConsumer``); ``None`` unless assigned."""
    assignment = _assignment(consumer)
    return None if assignment is None else _state(assignment, tp)


def fetch_states(consumer: Any) -> dict[TopicPartition, FetchState | None]:
    """Every assigned partition's state (``None`` for one aiokafka holds none for)."""
    assignment = _assignment(consumer)
    if assignment is None:
        return {}
    return {tp: _state(assignment, tp) for tp in assignment.tps}


def request_reset(
    consumer: Any, tps: Collection[TopicPartition], to: Literal["earliest", "latest"]
) -> asyncio.Future[Any]:
    """Move ``tps``' positions to their logs' start or end, as ``seek_to_beginning`` /
    ``seek_to_end`` do, without awaiting the new positions (the next fetch waits for them).
    The returned future ends when they are known."""
    strategy = OffsetResetStrategy.LATEST if to == "latest" else OffsetResetStrategy.EARLIEST
    waiter: asyncio.Future[Any] = consumer._fetcher.request_offset_reset(list(tps), strategy)
    return waiter
