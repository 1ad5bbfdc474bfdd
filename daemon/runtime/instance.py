"""What a running connector instance can ask of its worker (Connect's ``ConnectorContext``):
``InstanceContext``, handed to ``SinkConnector.initialize`` before ``start``.

- ``request_task_reconfiguration``: ``TaskReconfigurations`` runs rounds of the owner's
  ``reconfigure_tasks`` (``task_configs`` called again and applied if they changed: standalone
  restarts the tasks with them, distributed mode sends them to the leader). Requests made while
  a round runs make one more round after it; a round that fails (the leader unreachable, the
  connector's ``task_configs`` raising) is tried again after a doubling wait (0.25 s to 60 s,
  Connect's backoff for the same step) until it succeeds or the instance is stopped.
- ``raise_error``: the owner's ``instance_failed`` (the connector FAILED, its restart policy
  applies).

Both may be called from any thread; they act on the event loop the instance was started on,
and only while that instance is the one running (``closed`` once it was stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger("connectd.worker")

BACKOFF_FIRST = 0.25
BACKOFF_MAX = 60.0


class InstanceOwner(Protocol):
    """What the context needs of the connector runtime that runs the instance."""

    @property
    def name(self) -> str: ...

    def reconfiguration_requested(self, context: InstanceContext) -> None:
        """From the event loop: ``context``'s instance asked for task reconfiguration."""
        ...

    def instance_failed(self, context: InstanceContext, error: BaseException) -> None:
        """From the event loop: ``context``'s instance raised ``error``."""
        ...


class InstanceContext:
    """One connector instance's context (see the module docstring)."""

    def __init__(self, owner: InstanceOwner, loop: asyncio.AbstractEventLoop) -> None:
        self._owner = owner
        self._loop = loop
        self.closed = False

    def request_task_reconfiguration(self) -> None:
        self._call(lambda: self._owner.reconfiguration_requested(self))

    def raise_error(self, error: BaseException) -> None:
        self._call(lambda: self._owner.instance_failed(self, error))

    def _call(self, act: Callable[[], None]) -> None:
        if self.closed:
            return
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is self._loop:
                act()
                return
        with contextlib.suppress(RuntimeError):  # the loop closed: the worker is gone
            self._loop.call_soon_threadsafe(lambda: None if self.closed else act())


class TaskReconfigurations:
    """Rounds of ``reconfigure`` for one connector, one at a time (see the module docstring).
    ``request`` from the event loop; ``cancel`` when the instance stops."""

    def __init__(self, name: str, reconfigure: Callable[[], Awaitable[None]]) -> None:
        self._name = name
        self._reconfigure = reconfigure
        self._task: asyncio.Task[None] | None = None
        self._again = False
        #: Rounds that ran to the end (changed or not).
        self.rounds = 0

    def request(self) -> None:
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._again = False
        self._task = asyncio.get_running_loop().create_task(
            self._rounds(), name=f"reconfigure-{self._name}"
        )

    def cancel(self) -> None:
        """End the rounds (from a round itself, which stops its instance on a failure: no
        more rounds after it, and it is not cancelled half-way through that stop)."""
        task, self._task = self._task, None
        self._again = False
        with contextlib.suppress(RuntimeError):  # no running loop: nothing runs a round
            if task is not None and task is not asyncio.current_task():
                task.cancel()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _rounds(self) -> None:
        wait = BACKOFF_FIRST
        while True:
            try:
                await self._reconfigure()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._task is not asyncio.current_task():
                    return  # the instance stopped meanwhile (cancel from the round itself)
                log.warning(
                    "Connector %s: its task reconfiguration failed (%s); trying again in %.2f s",
                    self._name,
                    exc,
                    wait,
                )
                await asyncio.sleep(wait)  # a backoff between attempts, not a synchronisation
                wait = min(BACKOFF_MAX, wait * 2)
                continue
            self.rounds += 1
            if not self._again or self._task is not asyncio.current_task():
                return
            self._again = False
            wait = BACKOFF_FIRST
