"""Bounds on an incarnation's awaits: a sink callback under its deadline, a wait that a stop
request ends early, and the steps of a close that go on after one failed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

from daemon.connectors.records import TopicPartition
from daemon.errors import ConnectdError, TaskTimeout

log = logging.getLogger("connectd.task")
T = TypeVar("T")


async def with_deadline(what: str, coro: Awaitable[T], timeout: float) -> T:
    """Await ``coro`` for at most ``timeout`` seconds; ``TaskTimeout`` naming ``what`` past it
    (a ``TimeoutError`` raised by ``coro`` itself passes through unchanged)."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await coro
    except TimeoutError:
        if not deadline.expired():
            raise
        raise TaskTimeout(
            f"{what} did not return within {timeout:g} s; it was cancelled (an executor write"
            " it waited for was killed). Raise task.write.timeout.ms if writes really take that"
            " long"
        ) from None


async def unless_set(
    coro: Awaitable[T], event: asyncio.Event, timeout: float, late: Exception
) -> T | None:
    """``coro``'s result, or ``None`` as soon as ``event`` is set (``coro`` is then cancelled);
    ``late`` is raised if neither happened within ``timeout`` seconds."""
    work = asyncio.ensure_future(coro)
    stop = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait(
            {work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for fut in (work, stop):
            if not fut.done():
                fut.cancel()
    if work in done:
        return work.result()
    if stop in done:
        return None
    raise late


async def log_failure(what: str, coro: Awaitable[Any]) -> None:
    """Await ``coro``; an exception (not a cancel) is logged as ``<what> failed``, not raised
    (for the steps of a close, which go on after one failed)."""
    try:
        await coro
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.error("%s failed: %s", what, exc, exc_info=not isinstance(exc, ConnectdError))


def names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(tps))
