"""A connector's stopped tasks are settled (slot dropped, metric series forgotten) a few at a time,
so a 500-task delete never holds the event loop for all of them in one turn; cancelled while it
settles, the rest are settled at once: no stopped task stays behind as a slot."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support.daemon import NoExecutors

from daemon.config import parse_worker
from daemon.runtime.connector import STARTS_AT_ONCE, ConnectorRuntime
from daemon.runtime.model import TargetState
from daemon.runtime.standalone import StandaloneHerder
from daemon.storage.standalone import StandaloneStore
from daemon.structs import TaskId

TASKS = 5 * STARTS_AT_ONCE


class StoppedSlot:
    """A task slot whose stop sequence has nothing left to do."""

    def __init__(self, connector: str, index: int) -> None:
        self.id = TaskId(connector, index)
        self.inc = None

    async def stop(self, reason: str) -> None:
        await asyncio.sleep(0)


class Forgetting:
    """Metrics that note each forgotten task, and call ``during`` as each is forgotten."""

    def __init__(self) -> None:
        self.forgotten: list[int] = []
        self.turns: list[int] = []  # how many were forgotten before each turn of the loop
        self.during: Any = None

    def forget_task(self, connector: str, task: int) -> None:
        self.forgotten.append(task)
        if self.during is not None:
            self.during(task)


def _runtime(tmp_path: Path, metrics: Forgetting) -> ConnectorRuntime:
    config = parse_worker(
        {"bootstrap.servers": "127.0.0.1:1", "state.dir": str(tmp_path), "listeners": "http://h:9"}
    ).config
    herder = StandaloneHerder(config, NoExecutors(), store=StandaloneStore(tmp_path))
    env = dataclasses.replace(herder.worker.env, metrics=metrics)  # type: ignore[arg-type]
    config_ = {"connector.class": "support.daemon:RecordingSink", "topics": "t"}
    rt = ConnectorRuntime("c", config_, TargetState.RUNNING, env)
    rt.slots = {i: StoppedSlot("c", i) for i in range(TASKS)}  # type: ignore[misc]
    return rt


async def test_stopped_tasks_are_settled_a_few_a_turn(tmp_path: Path) -> None:
    metrics = Forgetting()
    rt = _runtime(tmp_path, metrics)
    stopping = asyncio.ensure_future(rt.stop_tasks("test"))
    while not stopping.done():
        metrics.turns.append(len(metrics.forgotten))
        await asyncio.sleep(0)
    await stopping
    metrics.turns.append(len(metrics.forgotten))
    assert rt.slots == {} and metrics.forgotten == list(range(TASKS))
    steps = [b - a for a, b in zip(metrics.turns, metrics.turns[1:], strict=False)]
    assert max(steps) <= STARTS_AT_ONCE, metrics.turns


async def test_cancelled_while_settling_it_settles_the_rest_at_once(tmp_path: Path) -> None:
    metrics = Forgetting()
    rt = _runtime(tmp_path, metrics)
    stopping = asyncio.ensure_future(rt.stop_tasks("test"))

    def cancel_at(task: int) -> None:
        if task == STARTS_AT_ONCE + 1:
            stopping.cancel()

    metrics.during = cancel_at
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert rt.slots == {}
    assert metrics.forgotten == list(range(TASKS))
