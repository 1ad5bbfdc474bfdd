"""The stop sequence against stand-in incarnations: graceful, killed, and refusing to die.

The "executor" is a real child process (``sleep``), so the reap is checked through /proc as in
production; the stand-in kills it when its write is cancelled, as the pool does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest

from daemon.connectors.api import TaskId
from daemon.errors import StopFailed
from daemon.executor.process import read_stat
from daemon.runtime.slot.stop import StopReport, stop_incarnation


class StandIn:
    """Quacks like ``Incarnation`` for the stop sequence."""

    def __init__(self, behaviour: str) -> None:
        self.id = TaskId("conn", 0)
        self.epoch = 7
        self.failure: BaseException | None = None
        self.behaviour = behaviour
        self.executor = subprocess.Popen(["sleep", "600"])
        self.holding = True
        self.closed_gracefully = False
        self.immortal = behaviour == "immortal"
        self.binding = SimpleNamespace(current_pid=self._pid, released=self._released)
        self._asked = asyncio.Event()
        self._runner = asyncio.get_running_loop().create_task(self._run())

    def _pid(self) -> int | None:
        return self.executor.pid if self.holding else None

    def _released(self, pid: int) -> bool:
        """The pool took the executor back (idle): only after a write that finished."""
        return self.behaviour == "finished" and not self.holding

    async def _run(self) -> None:
        if self.behaviour == "graceful":
            await self._asked.wait()
            self.holding = False
            self.closed_gracefully = True
            return
        try:
            await asyncio.Event().wait()  # a write that never returns
        except asyncio.CancelledError:
            if self.behaviour == "hang":
                self.executor.kill()
                await asyncio.to_thread(self.executor.wait)
                self.holding = False
                raise
            if self.behaviour == "finished":  # the write ended just before the cancel came
                self.holding = False
                raise
            if self.behaviour == "survivor":  # "forgets" its executor without killing it
                self.holding = False
                raise
        while self.immortal:  # swallows every cancellation until the test is over
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)

    @property
    def done(self) -> bool:
        return self._runner.done()

    async def wait(self) -> None:
        if not self._runner.done():
            await asyncio.wait([self._runner])

    def ask(self) -> None:
        self._asked.set()

    def kill(self, reason: str) -> None:
        self._runner.cancel()

    def cleanup(self) -> None:
        self.immortal = False
        self.executor.kill()
        self.executor.wait()
        self._runner.cancel()


async def _stop(inc: StandIn, graceful: float = 0.2, kill: float = 2.0) -> Any:
    return await stop_incarnation(
        inc,  # type: ignore[arg-type]
        graceful_timeout=graceful,
        kill_timeout=kill,
        reason="test",
    )


async def test_graceful_stop_needs_no_kill(caplog: pytest.LogCaptureFixture) -> None:
    inc = StandIn("graceful")
    try:
        with caplog.at_level(logging.INFO):
            report = await _stop(inc)
        assert report == StopReport("conn-0", 7, True, report.seconds)  # no kill, no tree
        assert report.seconds < 0.2  # it ended when asked, not at the graceful deadline
        assert inc.closed_gracefully
        assert read_stat(inc.executor.pid) is not None  # a graceful stop kills nothing
        assert "stopped gracefully" in caplog.text
    finally:
        inc.cleanup()


async def test_hung_task_is_killed_and_reaped_before_return(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inc = StandIn("hang")
    pid = inc.executor.pid
    try:
        with caplog.at_level(logging.INFO):
            report = await _stop(inc, graceful=0.3)
        assert not report.graceful
        assert (report.task, report.epoch) == ("conn-0", 7)
        assert report.killed_pid == pid and report.tree == (pid,)  # `sleep` has no children
        assert report.reap_seconds is not None and report.reap_seconds < 2.0
        # The kill came at the graceful deadline (0.3 s), the reap after it.
        assert 0.3 <= report.seconds < 0.3 + 2.0
        assert report.seconds >= report.reap_seconds
        assert read_stat(pid) is None  # gone from /proc when the sequence returns
        assert "timed out after 300 ms; killed executor pid" in caplog.text
        assert "reaped in" in caplog.text
    finally:
        inc.cleanup()


async def test_an_executor_that_survives_the_kill_is_stop_failed() -> None:
    inc = StandIn("survivor")
    try:
        with pytest.raises(StopFailed, match="could not be reaped: executor pid"):
            await _stop(inc, graceful=0.1, kill=0.5)
        assert read_stat(inc.executor.pid) is not None  # so no new incarnation may start
    finally:
        inc.cleanup()


async def test_a_write_that_ended_just_before_the_kill_leaves_its_executor_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The deadline saw the executor writing; the write then ended with its outcome and the
    pool took the executor back (idle) before the kill. It must not be waited for to die: that
    stalled a connector for good in the soak (every restart waited for an idle executor)."""
    inc = StandIn("finished")
    try:
        with caplog.at_level(logging.INFO):
            report = await _stop(inc, graceful=0.1, kill=0.5)
        assert not report.graceful and report.killed_pid is None and report.tree == ()
        assert read_stat(inc.executor.pid) is not None  # alive, back in the pool
        assert "cancelled it (no executor was writing for it)" in caplog.text
    finally:
        inc.cleanup()


async def test_a_coroutine_that_swallows_cancellation_is_stop_failed() -> None:
    inc = StandIn("immortal")
    try:
        with pytest.raises(StopFailed, match=r"did not end within 0\.3 s after it was cancelled"):
            await _stop(inc, graceful=0.1, kill=0.3)
    finally:
        inc.cleanup()


async def test_stopping_an_ended_incarnation_is_a_no_op(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inc = StandIn("graceful")
    try:
        await _stop(inc)
        assert inc.done
        caplog.clear()
        with caplog.at_level(logging.INFO):
            report = await _stop(inc, graceful=5.0)
        # Graceful, nothing killed, no tree walked, no reap, and no wait for the (5 s)
        # graceful deadline: the incarnation had already ended.
        assert report == StopReport("conn-0", 7, True, report.seconds)
        assert report.seconds < 1.0
        assert "Stopping task" not in caplog.text  # nothing to stop, so not logged as a stop
        assert read_stat(inc.executor.pid) is not None  # and its (stand-in) executor untouched
    finally:
        inc.cleanup()
