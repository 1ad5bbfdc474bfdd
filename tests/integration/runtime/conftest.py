"""Fixtures of the runtime's integration tests: daemons (tests/support/daemon.py) and pools.

``runtime_pool`` is the session's warm Spark pool (``spark_pool``, tests/support/spark.py).
``plain_pool`` is a
pool without Spark (executors start in a fraction of a second) for tests about the runtime's
bookkeeping, not about Spark.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import procs
from support.spark import ThreadedPool, spark_settings


@pytest.fixture(scope="session")
def runtime_pool(spark_pool: ThreadedPool) -> ThreadedPool:
    """The session's warm Spark pool (tests/support/spark.py, loaded by tests/conftest.py)."""
    return spark_pool


@pytest.fixture(scope="session")
def plain_pool() -> Iterator[ThreadedPool]:
    pool = ThreadedPool(spark_settings(with_spark=False, cds=False, start_timeout=30.0))
    unregister = procs.register_session_owner(pool.pids)
    try:
        pool.start()
        pool.wait_ready(2, timeout=30.0)
        yield pool
    finally:
        pool.close()
        unregister()


@pytest.fixture
def warm_spark(runtime_pool: ThreadedPool) -> ThreadedPool:
    """The session's Spark pool with both executors ready (size 1 + 1 spare).

    An earlier test may have had one of them killed; its replacement is a JVM start (seconds to
    a minute on a loaded machine). Waiting here keeps that out of the test's own deadlines.
    """
    runtime_pool.wait_ready(2)
    return runtime_pool
