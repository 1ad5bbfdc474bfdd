"""pytest plugin: a real Kafka broker for the session, and topics made (and deleted) per test.

Loaded from tests/conftest.py with `pytest_plugins = ["support.kafka_fixtures"]`.

- `kafka_bootstrap` (session): "host:port" of the cluster under test. With KAFKA_BOOTSTRAP set
  (e.g. `KAFKA_BOOTSTRAP=$(python3 dev/kafka/kafkactl.py up)`), that cluster is used and nothing
  is started. Otherwise a broker (KAFKA_VERSION, default 4.1.2) is started on free ports for the
  session and stopped by PID at session end, whatever the tests did. Under pytest-xdist
  (``make test``: two workers) each worker process is a session of its own, with its own broker.
- `kafka_broker` (session): the `KafkaBroker` behind it, or None for an external cluster.
- `kafka_topic` (function, async): `await kafka_topic(partitions=1, config=None)` creates a topic
  named `t-<test name>-<uuid8>` and returns its name; every topic it made is deleted at teardown.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping

import pytest

from support import kafka_sockets, procs
from support.kafka import KafkaBroker, create_topic, delete_topic, kafkactl, unique_topic_name

TopicFactory = Callable[..., Awaitable[str]]


@pytest.fixture
def own_broker() -> Iterator[KafkaBroker]:
    """A broker of the test's own, for tests that stop and restart it (``halt``/``resume``):
    the session's broker is shared and never stopped."""
    broker = KafkaBroker()
    unregister = procs.register_session_owner(broker.pids)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        unregister()


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker | None]:
    """The session's own broker; None when KAFKA_BOOTSTRAP names an external cluster."""
    if os.environ.get("KAFKA_BOOTSTRAP"):
        yield None
        return
    broker = KafkaBroker()
    # The broker outlives single tests on purpose: keep it out of the per-test leak check.
    unregister = procs.register_session_owner(broker.pids)
    try:
        try:
            broker.start()
        except kafkactl.ToolMissing as e:
            pytest.skip(f"no Kafka broker for this session: {e}")
        yield broker
    finally:
        broker.stop()
        unregister()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: KafkaBroker | None) -> str:
    """Bootstrap address ("host:port") of the Kafka cluster the tests run against."""
    bootstrap = os.environ["KAFKA_BOOTSTRAP"] if kafka_broker is None else kafka_broker.bootstrap
    kafka_sockets.register(bootstrap)
    return bootstrap


@pytest.fixture
async def kafka_topic(
    kafka_bootstrap: str, request: pytest.FixtureRequest
) -> AsyncIterator[TopicFactory]:
    """Factory for fresh, uniquely named topics; deletes them when the test ends."""
    created: list[str] = []

    async def make(partitions: int = 1, *, config: Mapping[str, str] | None = None) -> str:
        name = unique_topic_name(request.node.name)
        created.append(name)  # before creating: a half-made topic is still cleaned up
        await create_topic(kafka_bootstrap, name, partitions, config=config)
        return name

    yield make
    for name in created:
        await delete_topic(kafka_bootstrap, name)
