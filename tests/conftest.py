"""Session-wide test setup: process-leak checking, skips that fail under CI, and the shared
fixtures' plugins."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Generator, Iterator

import pytest
from support import kafka_sockets, procs

pytest_plugins = [
    "support.kafka_fixtures",
    "support.spark",
    "support.spark_cluster",
    "support.delta",
    "support.iceberg",
    "support.daemon",
    "support.cluster",
    "support.registry",
    "support.ordering",
]

ALLOWED_CI_SKIPS: dict[str, str] = {
    # Docker's default bridge network gives containers no IPv6 at all; the listener code is the
    # same for both families and the IPv4 tests cover it. Skips only when ::1 cannot be bound.
    "tests/unit/rest/test_server.py::test_ipv6_loopback_when_available": (
        "a CI container may have no IPv6 loopback"
    ),
}
"""Tests that may skip under CI (node id without parameters) and why. Every other skip fails
the run when ``CI=true``: a suite that goes green by skipping proves nothing."""


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _skip_reason(longrepr: object) -> str:
    # A skip's longrepr is (path, line, "Skipped: reason").
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return f"{longrepr[2]} ({longrepr[0]}:{longrepr[1]})"
    return str(longrepr)


def _ci_failure(what: str, longrepr: object) -> str:
    return (
        f"{what} skipped under CI (CI={os.environ.get('CI')}): {_skip_reason(longrepr)}\n"
        "Under CI every test must run: install what it needs (the README's setup, the Makefile),"
        " or list it in ALLOWED_CI_SKIPS in tests/conftest.py with the reason it may skip."
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if (
        _under_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")  # an expected failure is reported as skipped too
        and item.nodeid.split("[")[0] not in ALLOWED_CI_SKIPS
    ):
        report.outcome = "failed"
        report.longrepr = _ci_failure(item.nodeid, report.longrepr)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    if _under_ci() and report.skipped and collector.nodeid not in ALLOWED_CI_SKIPS:
        report.outcome = "failed"
        report.longrepr = _ci_failure(collector.nodeid or "collection", report.longrepr)
    return report


def pytest_configure(config: pytest.Config) -> None:
    procs.become_subreaper()


@pytest.fixture(autouse=True)
def _no_leaked_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test that leaves a process behind, running or as an unreaped zombie (after its
    fixtures are torn down)."""
    baseline = set(procs.leftovers())
    yield
    leaked = procs.wait_gone(baseline, deadline_s=10.0)
    if leaked:
        procs.clean_up(baseline, deadline_s=5.0)
        lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in sorted(leaked.items()))
        pytest.fail(f"test left {len(leaked)} process(es) behind (now killed and reaped):\n{lines}")


_FULL_GC_EVERY = 100
_tests_run = 0


@pytest.fixture(autouse=True, scope="session")
def _broker_socket_leaks_tolerated() -> Iterator[None]:
    """The one ResourceWarning let through: aiokafka's, see ``support.kafka_sockets``."""
    restore = kafka_sockets.install()
    yield
    # Collect what the session left while the tolerance still holds: a connection aiokafka
    # leaked in the last tests would otherwise be found by pytest's own collection at exit,
    # after the tolerance is gone, and fail the run for a leak it already names.
    gc.collect()
    restore()


@pytest.fixture(autouse=True)
def _garbage_collected_in_its_test() -> Iterator[None]:
    """Collect the test's cyclic garbage at its teardown. An unclosed file or socket held in a
    reference cycle warns only when the collector frees it (a ResourceWarning raised in
    ``__del__``, which pytest reports as PytestUnraisableExceptionWarning, an error here), and
    pytest blames whichever test runs at that moment, or the end of the session.

    ``gc.freeze()`` at setup keeps the collection to what this test made (a full collection
    costs ~60 ms, too much per test); every ``_FULL_GC_EVERY`` tests the older objects get a
    full collection too.
    """
    global _tests_run
    _tests_run += 1
    if _tests_run % _FULL_GC_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
    yield
    gc.collect()


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
    gc.unfreeze()
    leftover = procs.wait_gone(set(), deadline_s=15.0)
    if leftover:
        procs.clean_up(set(), deadline_s=5.0)
        lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in sorted(leftover.items()))
        print(f"\nERROR: processes left at session end (killed and reaped):\n{lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
