"""daemon.kafka's reads of aiokafka's private state, on aiokafka's own objects where they can be
made without a broker, and on stand-ins shaped as the package docstring says they are. An
aiokafka upgrade that moves one of them fails here first."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiokafka
import pytest
from aiokafka import AIOKafkaClient, AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import AIOKafkaConnection
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.consumer.group_coordinator import GroupCoordinator

from daemon.kafka import SUPPORTED, coordinator, traffic
from daemon.kafka.client import answered_since, client_of, request_timeout, send_to_node
from daemon.kafka.positions import FetchState, fetch_state, fetch_states, request_reset


def test_the_installed_aiokafka_is_the_one_checked() -> None:
    assert aiokafka.__version__ in SUPPORTED


@pytest.fixture
async def consumer() -> AsyncIterator[AIOKafkaConsumer]:
    """A consumer that is never started (no broker needed)."""
    made = AIOKafkaConsumer(group_id="g", bootstrap_servers="127.0.0.1:1", request_timeout_ms=7000)
    yield made
    await made.stop()


async def test_an_unstarted_consumer(consumer: AIOKafkaConsumer) -> None:
    client = client_of(consumer)
    assert isinstance(client, AIOKafkaClient)
    assert request_timeout(client) == 7.0
    assert request_timeout(object()) == 0.0
    assert fetch_states(consumer) == {}
    assert fetch_state(consumer, TopicPartition("t", 0)) is None
    assert not coordinator.is_member(consumer)  # no coordinator before start
    with pytest.raises(RuntimeError, match="no group coordinator yet"):
        coordinator.generation(consumer)


async def test_a_connection_counts_once_it_answered_after_the_failure(
    consumer: AIOKafkaConsumer,
) -> None:
    client: Any = client_of(consumer)
    conn = AIOKafkaConnection("kafka-1", 9092)  # stamped ``_last_action`` when made
    made = conn._last_action
    client._conns[(1, 0)] = conn
    try:
        assert not answered_since(client, "1", None, made - 1)  # not connected
        conn.connected = lambda: True  # type: ignore[method-assign]
        assert answered_since(client, "1", None, made - 1)
        assert answered_since(client, None, "kafka-1:9092", made - 1)  # by address
        assert not answered_since(client, "1", None, made)  # not after the failure
        assert not answered_since(client, "2", "kafka-2:9092", made - 1)  # another broker
    finally:
        del conn.connected  # its own again: not connected, so no warning when collected
        client._conns.clear()


def _fake_consumer(states: dict[TopicPartition, Any]) -> Any:
    assignment = SimpleNamespace(tps=frozenset(states), state_value=states.get)
    return SimpleNamespace(
        _subscription=SimpleNamespace(subscription=SimpleNamespace(assignment=assignment))
    )


def test_fetch_states_read_position_and_highwater_without_waiting() -> None:
    t0, t1, t2 = (TopicPartition("t", p) for p in range(3))
    consumer = _fake_consumer(
        {
            t0: SimpleNamespace(position=4, has_valid_position=True, highwater=10),
            t1: SimpleNamespace(position=None, has_valid_position=False, highwater=None),
            t2: None,
        }
    )
    assert fetch_states(consumer) == {t0: FetchState(4, 10), t1: FetchState(None, None), t2: None}
    assert fetch_state(consumer, t0) == FetchState(4, 10)
    assert fetch_state(consumer, TopicPartition("t", 9)) is None
    unassigned = SimpleNamespace(_subscription=SimpleNamespace(subscription=None))
    assert fetch_states(unassigned) == {}


def test_a_reset_asks_the_fetcher_with_aiokafkas_strategy() -> None:
    asked: list[tuple[list[TopicPartition], int]] = []

    def request_offset_reset(tps: list[TopicPartition], strategy: int) -> str:
        asked.append((tps, strategy))
        return "waiter"

    consumer = SimpleNamespace(_fetcher=SimpleNamespace(request_offset_reset=request_offset_reset))
    tp = TopicPartition("t", 0)
    assert request_reset(consumer, {tp}, "earliest") == "waiter"
    request_reset(consumer, [tp], "latest")
    assert asked == [([tp], -2), ([tp], -1)]  # aiokafka's EARLIEST, LATEST


async def test_send_to_node_is_the_admin_clients_request() -> None:
    sent: list[tuple[int, object]] = []

    class Admin:
        async def _send_request_to_node(self, node: int, request: object) -> str:
            sent.append((node, request))
            return "answer"

    assert await send_to_node(Admin(), 3, "request") == "answer"
    assert sent == [(3, "request")]


@pytest.mark.parametrize(
    ("owner", "name", "parameters"),
    [
        (Fetcher, "request_offset_reset", ["self", "tps", "strategy"]),
        (AIOKafkaAdminClient, "_send_request_to_node", ["self", "node_id", "request"]),
        (GroupCoordinator, "request_rejoin", ["self"]),
        (GroupCoordinator, "reset_generation", ["self"]),
        (AIOKafkaConnection, "_handle_frame", ["self", "resp"]),
    ],
)
def test_the_methods_called_are_there(owner: type, name: str, parameters: list[str]) -> None:
    assert list(inspect.signature(getattr(owner, name)).parameters) == parameters


def test_the_coordinator_keeps_generation_and_member_id() -> None:
    source = inspect.getsource(GroupCoordinator.__init__)
    assert "self.generation = " in source and "self.member_id = " in source
    assert coordinator.UNKNOWN_MEMBER_ID == ""


async def test_a_tracked_client_ids_frames_count_with_their_size_prefix() -> None:
    conn = AIOKafkaConnection("kafka-1", 9092, client_id="counted")
    other = AIOKafkaConnection("kafka-1", 9092, client_id="not-counted")
    first = traffic.track("counted")
    second = traffic.track("counted")  # a second user of the id shares its figures
    assert second is first
    loop = asyncio.get_running_loop()
    try:
        for c, frame in ((conn, b"abc"), (conn, b"x" * 1000), (other, b"zz")):
            answered: asyncio.Future[bytes] = loop.create_future()
            c._requests.append((None, None, answered))  # a SASL frame: handed back as is
            c._handle_frame(frame)
            assert answered.result() == frame  # aiokafka's handling still runs
        assert (first.bytes_in, first.responses) == (3 + 4 + 1000 + 4, 2)
        traffic.release(second)
        assert traffic.track("counted") is first  # still tracked: one user left
        traffic.release(first)
    finally:
        traffic.release(first)
    again = traffic.track("counted")  # the last release ended it: counting starts anew
    try:
        assert again is not first and (again.bytes_in, again.responses) == (0, 0)
    finally:
        traffic.release(again)
    traffic.install()  # once per process, however often asked
    assert not getattr(AIOKafkaConnection._handle_frame.__wrapped__, "_connectd_counts", False)


async def test_connections_are_the_attached_clients_live_ones(
    consumer: AIOKafkaConsumer,
) -> None:
    client: Any = client_of(consumer)
    other = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")  # the same client id, say
    second: Any = client_of(other)
    counted = traffic.ClientTraffic("c")
    assert counted.connections() == 0  # nothing attached
    counted.attach(client)
    counted.attach(second)
    counted.attach(object())  # not weakly referable: not a client, counts nothing
    live, dead = AIOKafkaConnection("kafka-1", 9092), AIOKafkaConnection("kafka-2", 9092)
    client._conns.update({(1, 0): live, (2, 0): dead, (1, 1): live})
    second._conns.update({(1, 0): live})
    try:
        live.connected = lambda: True  # type: ignore[method-assign]
        assert counted.connections() == 3  # a broker's and the coordinator's, and the other's
        counted.detach(second)  # its consumer closed: the first one's still count
        assert counted.connections() == 2
    finally:
        del live.connected
        client._conns.clear()
        second._conns.clear()
        await other.stop()
    counted.detach(client)
    assert counted.connections() == 0
