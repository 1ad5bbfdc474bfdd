"""The statuses one distributed worker reports for the work it runs.

Each record carries ``generation``: a number drawn from Kafka at each rebalance (it only grows,
even across a group that emptied and whose generations start again at 1), so under Connect's
putSafe rule (``daemon.storage.kafka.statusstore``) a worker that lost the work never overwrites
its new owner's report. Only changes are written, plus everything again on ``force``.
"""

from __future__ import annotations

import asyncio

from daemon.runtime.worker import Worker
from daemon.storage.kafka import Status, StatusWriter
from daemon.structs import State, TaskId

Key = str | TaskId  # a connector's name or a task
Reported = tuple[State, str | None, int]


class StatusPublisher:
    def __init__(self, writer: StatusWriter, worker: Worker, worker_id: str) -> None:
        self.writer = writer
        self.worker = worker
        self.worker_id = worker_id
        self.generation = -1  # none drawn yet: nothing is written
        self._published: dict[Key, Reported] = {}
        self._lock = asyncio.Lock()

    async def publish(self, *, force: bool = False) -> None:
        """Write the statuses of the work here that changed (all of them with ``force``)."""
        async with self._lock:
            if self.generation < 0:
                return
            connectors, tasks = self.worker.reported()
            wanted: dict[Key, Reported] = {}
            for name, (state, trace) in connectors.items():
                wanted[name] = (state, trace, self.generation)
            for task, (state, trace) in tasks.items():
                wanted[task] = (state, trace, self.generation)
            for key, value in wanted.items():
                if force or self._published.get(key) != value:
                    await self._put(key, Status(value[0], self.worker_id, value[2], value[1]))
                    self._published[key] = value
            for key in [k for k in self._published if k not in wanted]:
                del self._published[key]

    async def unassign_all(self) -> None:
        """Connect's last word on work a worker stops for good: UNASSIGNED (an owner with a
        newer generation has already replaced it, or will)."""
        async with self._lock:
            for key in list(self._published):
                await self._put(key, Status(State.UNASSIGNED, self.worker_id, self.generation))
            self._published.clear()

    async def _put(self, key: Key, status: Status) -> None:
        if isinstance(key, TaskId):
            await self.writer.put_task(key, status)
        else:
            await self.writer.put_connector(key, status)
