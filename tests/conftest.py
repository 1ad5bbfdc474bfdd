"""Session-wide test setup: process-leak checking and the shared fixtures' plugins."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from support import procs

pytest_plugins = ["support.kafka_fixtures", "support.spark", "support.daemon"]


def pytest_configure(config: pytest.Config) -> None:
    procs.become_subreaper()


@pytest.fixture(autouse=True)
def _no_leaked_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test that leaves a process behind (after its fixtures are torn down)."""
    baseline = set(procs.live_descendants())
    yield
    leaked = procs.wait_gone(baseline, deadline_s=10.0)
    if leaked:
        procs.kill_pids(leaked)
        procs.wait_gone(baseline, deadline_s=5.0)
        lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in sorted(leaked.items()))
        pytest.fail(f"test left {len(leaked)} process(es) running (now killed):\n{lines}")


@pytest.fixture(autouse=True)
def _log_levels_restored() -> Iterator[None]:
    """Put back every logger's level: a test may change them process-wide (the REST
    ``/admin/loggers`` endpoint, schemathesis calling it with any logger name and level)."""
    loggers = logging.Logger.manager.loggerDict
    saved = {n: lg.level for n, lg in loggers.items() if isinstance(lg, logging.Logger)}
    root = logging.getLogger().level
    yield
    for name, logger in list(loggers.items()):
        if isinstance(logger, logging.Logger):
            logger.setLevel(saved.get(name, logging.NOTSET))
    logging.getLogger().setLevel(root)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    leftover = procs.wait_gone(set(), deadline_s=15.0)
    if leftover:
        procs.kill_pids(leftover)
        lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in sorted(leftover.items()))
        print(f"\nERROR: processes left at session end (killed):\n{lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
