"""An incarnation that ended is freed as soon as nothing holds it: its parts (rebalancer,
retrier, offset gaps) reach it through a weak proxy, so no reference cycle waits for the
cycle collector. A storm of 1,000 failed task starts used to leave ~58 objects of cycles per
incarnation (its thread pool, its pipeline, its task) and three full collections of 0.1 s each
on the event loop (tests/integration/runtime/test_failing_starts.py)."""

from __future__ import annotations

import gc
import weakref

import pytest
from support.failing_sinks import IdleTask, StartFailingTask
from support.fake_task_consumer import incarnation, install

from daemon.connectors.api import SinkTask


@pytest.mark.parametrize("task_class", [StartFailingTask, IdleTask])
async def test_an_ended_incarnation_is_freed_without_the_cycle_collector(
    monkeypatch: pytest.MonkeyPatch, task_class: type[SinkTask]
) -> None:
    install(monkeypatch)
    inc = incarnation(task_class)
    runner = inc.start()
    if task_class is IdleTask:
        inc.ask()
    await inc.wait()
    assert runner.done()
    assert (inc.failure is not None) is (task_class is StartFailingTask)
    gone = weakref.ref(inc)
    gc.disable()
    try:
        del inc, runner
        assert gone() is None, gc.get_referrers(gone())
    finally:
        gc.enable()
