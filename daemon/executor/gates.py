"""One write per task id at a time: a task id's next write waits until the previous one's
executor is idle again or reaped, so two incarnations of one task never write at once."""

from __future__ import annotations

import asyncio

from daemon.errors import ExecutorUnavailable
from daemon.executor.process import KillReport


class TaskGates:
    """A gate per task id with a write in progress; closed from ``enter`` to ``leave``."""

    def __init__(self) -> None:
        self._gates: dict[str, asyncio.Future[None]] = {}

    async def enter(self, task_id: str, deadline: float) -> None:
        """Wait (until loop time ``deadline``, else ``ExecutorUnavailable``) for the task id's
        previous write to be over, then close its gate."""
        while (gate := self._gates.get(task_id)) is not None:
            try:
                async with asyncio.timeout_at(deadline):
                    await asyncio.shield(gate)
            except TimeoutError:
                raise ExecutorUnavailable(
                    f"task {task_id}: its previous write still holds an executor (being killed"
                    " or still running); try again once it is over"
                ) from None
        self._gates[task_id] = asyncio.get_running_loop().create_future()

    def leave(self, task_id: str, after: asyncio.Task[KillReport] | None) -> None:
        """Open the task id's gate now, or once ``after`` (its executor's kill) is done."""
        gate = self._gates.get(task_id)

        def release(_: object = None) -> None:
            if self._gates.get(task_id) is gate:
                del self._gates[task_id]
            if gate is not None and not gate.done():
                gate.set_result(None)

        if after is None or after.done():
            release()
        else:
            after.add_done_callback(release)
