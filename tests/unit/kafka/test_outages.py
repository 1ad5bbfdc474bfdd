"""Issue 13, item 11: aiokafka's line per failed connection attempt becomes one line when a
broker becomes unreachable, a summary a minute, one line when it is back (fake records, a fake
clock, fake clients standing for aiokafka's)."""

from __future__ import annotations

import gc
import io
import logging
import re
import threading
from collections.abc import Iterator
from typing import NamedTuple

import pytest
from aiokafka import errors as Errors

from daemon.kafka.outages import KAFKA_CLIENT_LOGGERS, BrokerOutageFilter
from daemon.logs import setup_logging


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Broker(NamedTuple):  # aiokafka's BrokerMetadata
    nodeId: int  # aiokafka's name
    host: str
    port: int


class Cluster:
    """aiokafka's ``ClusterMetadata``, as far as the filter looks: the brokers it names."""

    def __init__(self, *nodes: int) -> None:
        self.nodes = nodes
        self.listeners: list[object] = []

    def brokers(self) -> set[Broker]:
        return {Broker(n, f"kafka-{n}", 9092) for n in self.nodes}

    def add_listener(self, listener: object) -> None:
        self.listeners.append(listener)


class Conn:
    """An aiokafka connection: made, or last answered, at ``_last_action``."""

    def __init__(self, host: str, last_action: float, *, up: bool = True) -> None:
        self.host, self.port = host, 9092
        self._last_action = last_action
        self.up = up

    def connected(self) -> bool:
        return self.up


class Client:
    """An ``AIOKafkaClient``: its cluster, its connections by ``(node id, group)``."""

    def __init__(self, cluster: Cluster, request_timeout_ms: int = 40000) -> None:
        self.cluster = cluster
        self._conns: dict[tuple[object, int], Conn] = {}
        self._request_timeout_ms = request_timeout_ms

    def answered(self, node: object, at: float, host: str | None = None) -> None:
        self._conns[(node, 0)] = Conn(host or f"kafka-{node}", at)


def _record(msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", level, "client.py", 1, msg, args, None)


CONNECT = "Unable connect to node with id %s: %s"
REFUSED = "[Errno 111] Connect call failed ('127.0.0.1', 9092)"


def _not_ready(node: int) -> Errors.KafkaError:
    return Errors.NodeNotReadyError(
        f"Attempt to send a request to node which is not ready (node id {node})."
    )


class ProduceRequest:  # stands for an aiokafka request class (logged as ``%r`` of the class)
    pass


def _fail(flt: BrokerOutageFilter, node: object = 1) -> logging.LogRecord:
    """One failed connection attempt (the record as the filter left it)."""
    record = _record(CONNECT, node, REFUSED)
    flt.filter(record)
    return record


def _down(flt: BrokerOutageFilter) -> tuple[str, ...]:
    return flt.down  # (a call: mypy narrows ``flt.down`` after one assert on it)


def _back_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]


def test_one_line_per_outage_a_summary_a_minute_and_one_when_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    flt = BrokerOutageFilter(every=60.0, clock=clock)
    written: list[str] = []

    def log(msg: str, *args: object) -> None:
        record = _record(msg, *args)
        if flt.filter(record):
            written.append(f"{record.levelname} {record.getMessage()}")

    for _ in range(3100):  # 62 s of attempts, 3 clients: ~7,600 lines before
        log(CONNECT, "1", REFUSED)
        log("Unable to update metadata from %s", [1])
        log("Failed fetch messages from %s: %s", 1, _not_ready(1))
        clock.now += 0.02
    assert written[0] == (
        f"WARNING Kafka broker node 1 is unreachable: {REFUSED}; retrying (a summary every 60 s"
        " until it is back)"
    )
    assert len(written) == 2, written
    assert written[1].startswith("WARNING Kafka broker node 1 still unreachable after 60 s:")
    counts = re.search(
        r"(\d+) connection attempts in the last 60 s \(and (\d+) related", written[1]
    )
    assert counts is not None, written[1]
    attempts, related = int(counts[1]), int(counts[2])
    assert attempts >= 2999 and related == 2 * (attempts - 1)  # the follow-ons since the first
    assert _down(flt) == ("node 1",)

    # Back: the next metadata update, its client's connection to node 1 having answered since
    # the last failed attempt (a moment ago: the connection is the evidence, not the quiet).
    cluster = Cluster(1)
    client = Client(cluster)
    client.answered(1, clock.now)
    clock.now += 0.1
    with caplog.at_level(logging.INFO, "connectd.kafka"):
        flt.reachable(cluster, client)
    assert _down(flt) == ()
    assert _back_lines(caplog) == [
        "Kafka broker node 1 is reachable again after 62 s (3100 failed connection attempts)"
    ]

    # Other lines pass untouched, also during an outage; the follow-ups only while one is down.
    assert flt.filter(_record("Unable to update metadata from %s", [1]))
    assert flt.filter(_record("Topic %s not found in cluster metadata", "t"))
    log('Unable connect to "%s:%s": %s', "h", 9092, REFUSED)
    assert written[-1].startswith("WARNING Kafka broker h:9092 is unreachable")
    assert flt.filter(_record("Topic %s not found in cluster metadata", "t"))
    bootstrap_md = 'Unable to request metadata from "%s:%s": %s'
    assert not flt.filter(_record(bootstrap_md, "h", 9092, Errors.RequestTimedOutError()))
    assert flt.filter(_record(bootstrap_md, "h", 9092, Errors.UnsupportedVersionError()))
    # The bootstrap address is back when a connection to it answers.
    client.answered("bootstrap", clock.now + 1, host="h")
    clock.now += 2
    flt.reachable(cluster, client)
    assert _down(flt) == ()


# aiokafka's real errors (their wording from aiokafka 0.14), logged while node 1 is down: none
# is the outage's doing, every one must be written.
REAL_ERRORS: list[tuple[str, tuple[object, ...]]] = [
    (
        "Heartbeat failed: %r",
        (Errors.KafkaError(f"Unexpected exception in heartbeat task: {Errors.UnknownError()!r}"),),
    ),
    ("Heartbeat failed for group %s: generation id is not  current.", ("g",)),
    ("Heartbeat failed: local member_id was not recognized; resetting and re-joining group", ()),
    ("OffsetCommit failed for group %s - %s", ("g", "GroupAuthorizationFailedError")),
    ("OffsetCommit failed for group %s due to group error (%s), will rejoin", ("g", "x")),
    (
        "Failed to commit on finallization: %s",
        (Errors.KafkaConnectionError("Connection at kafka-1:9092 closed"),),
    ),
    ("Heartbeat session expired - marking coordinator dead", ()),
    ("Heartbeat send request failed: %s. Will retry.", (Errors.NotCoordinatorForGroupError(),)),
    ("Group Coordinator Request failed: %s", (Errors.GroupCoordinatorNotAvailableError(),)),
    ("Failed fetch messages from %s: %s", (1, Errors.CorrelationIdError("bad id"))),
    # Connection-class, but about a broker that is not down:
    ("Failed fetch messages from %s: %s", (2, _not_ready(2))),
    ("Heartbeat send request failed: %s. Will retry.", (_not_ready(2),)),
    ("Unable to update metadata from %s", ([1, 2],)),
    ("Topic %s not found in cluster metadata", ("t",)),
    ("Unexpected error in fetcher routine", ()),
]


@pytest.mark.parametrize(("msg", "args"), REAL_ERRORS, ids=[m[:30] for m, _ in REAL_ERRORS])
def test_a_real_error_during_an_outage_is_written(msg: str, args: tuple[object, ...]) -> None:
    flt = BrokerOutageFilter(clock=Clock())
    _fail(flt)
    _fail(flt)
    record = _record(msg, *args)
    before = record.getMessage()
    assert flt.filter(record)
    assert (record.getMessage(), record.levelno) == (before, logging.ERROR)


# What plainly follows from node 1's failed connections: hidden, and counted.
FOLLOW_ONS: list[tuple[str, tuple[object, ...]]] = [
    ("Unable to update metadata from %s", ([1],)),
    (
        "Unable to request metadata from node with id %s: %r",
        (1, Errors.KafkaConnectionError("Connection at kafka-1:9092 closed")),
    ),
    ("Failed fetch messages from %s: %s", (1, _not_ready(1))),
    ("Failed fetch offsets from %s: %s", (1, Errors.RequestTimedOutError())),
    (
        "Error sending %s to node %s [%s] -- marking coordinator dead",
        ("HeartbeatRequest_v1", 1, _not_ready(1)),
    ),
    ("Heartbeat send request failed: %s. Will retry.", (_not_ready(1),)),
    ("Heartbeat send request failed: %s. Will retry.", (Errors.RequestTimedOutError(),)),
    ("Group Coordinator Request failed: %s", (_not_ready(1),)),
    ("Cannot send %r to %s: %r", (ProduceRequest, 1, Errors.RequestTimedOutError())),
    ("Could not send %r: %r", (ProduceRequest, Errors.KafkaConnectionError("closed"))),
    ("Auto offset commit failed: %s", (_not_ready(1),)),
]


@pytest.mark.parametrize(("msg", "args"), FOLLOW_ONS, ids=[m[:30] for m, _ in FOLLOW_ONS])
def test_a_follow_on_line_is_counted_into_the_summary(msg: str, args: tuple[object, ...]) -> None:
    clock = Clock()
    flt = BrokerOutageFilter(every=60.0, clock=clock)
    assert flt.filter(_record(msg, *args)), "before the outage: written"
    _fail(flt)
    assert not flt.filter(_record(msg, *args))
    clock.now += 60
    summary = _fail(flt).getMessage()
    assert "2 connection attempts in the last 60 s (and 1 related client errors)" in summary


def test_an_outage_nothing_ends_expires(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing may ever say a broker is back (connectors paused, a decommissioned node): after
    EXPIRE_S without a failed attempt its outage ends, and its follow-on lines pass again."""
    clock = Clock()
    flt = BrokerOutageFilter(clock=clock, expire=300.0)
    follow_on = ("Failed fetch messages from %s: %s", 7, _not_ready(7))
    for _ in range(10):
        _fail(flt, 7)
        clock.now += 1
    assert not flt.filter(_record(*follow_on))
    clock.now += 298  # 299 s since the last attempt: still down
    assert not flt.filter(_record(*follow_on))
    clock.now += 1
    with caplog.at_level(logging.INFO, "connectd.kafka"):
        assert flt.filter(_record(*follow_on))
    assert _down(flt) == ()
    (note,) = [r.getMessage() for r in caplog.records if r.name == "connectd.kafka"]
    assert note.startswith("Kafka broker node 7: no failed connection attempt for 300 s")
    assert "no longer reported as unreachable (10 failed attempts in 9 s)" in note
    # The next failure is a new outage, with its own first line.
    assert "is unreachable" in _fail(flt, 7).getMessage()

    # A metadata update expires an outage too (one the metadata no longer names).
    clock.now += 300
    flt.reachable(Cluster(1, 2))
    assert _down(flt) == ()


def test_metadata_from_another_broker_does_not_end_an_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A broker that drops packets fails an attempt every request timeout (40 s); metadata
    from the other brokers keeps coming meanwhile: no unreachable/back pairs."""
    clock = Clock()
    flt = BrokerOutageFilter(every=60.0, clock=clock)
    cluster = Cluster(1, 2, 3)
    client = Client(cluster)
    client.answered(1, clock.now - 5)  # made before the outage, not yet found dead
    caplog.set_level(logging.INFO, "connectd.kafka")
    lines = []
    for _ in range(10):
        record = _fail(flt)
        if record.levelno == logging.WARNING:
            lines.append(record.getMessage())
        for _ in range(4):  # metadata from nodes 2 and 3 every 10 s
            clock.now += 10
            client.answered(2, clock.now)
            flt.reachable(cluster, client)
    assert _back_lines(caplog) == []
    assert _down(flt) == ("node 1",)
    assert len([line for line in lines if "is unreachable" in line]) == 1

    # The attempts stop (nothing needs node 1 now): the metadata naming it, and no failure for
    # longer than an attempt can take, end the outage.
    last = clock.now - 40
    clock.now = last + 59
    flt.reachable(cluster, client)
    assert _down(flt) == ("node 1",)
    clock.now = last + 60
    flt.reachable(cluster, client)
    assert _down(flt) == ()
    assert len(_back_lines(caplog)) == 1


def test_quiet_is_longer_than_a_clients_request_timeout() -> None:
    clock = Clock()
    flt = BrokerOutageFilter(clock=clock)
    cluster = Cluster(1, 2)
    slow = Client(cluster, request_timeout_ms=100_000)  # an attempt may take 100 s to fail
    _fail(flt)
    clock.now += 120
    flt.reachable(cluster, slow)
    assert _down(flt) == ("node 1",)
    clock.now += 30
    flt.reachable(cluster, slow)
    assert _down(flt) == ()


def test_a_broker_the_metadata_no_longer_names_is_not_back() -> None:
    clock = Clock()
    flt = BrokerOutageFilter(clock=clock)
    _fail(flt, 3)
    clock.now += 120
    flt.reachable(Cluster(1, 2))  # node 3 fenced, or decommissioned
    assert _down(flt) == ("node 3",)
    flt.reachable()  # no metadata, no client: no evidence at all
    assert _down(flt) == ("node 3",)


def test_watch_listens_to_a_clients_metadata_without_holding_it() -> None:
    clock = Clock()
    flt = BrokerOutageFilter(clock=clock)
    cluster = Cluster(1)
    client = Client(cluster)
    flt.watch(client)
    flt.watch(None)  # no client (a consumer not started): nothing
    (listener,) = cluster.listeners
    assert callable(listener)
    _fail(flt)
    clock.now += 0.5
    listener(cluster)
    assert _down(flt) == ("node 1",)  # no connection answered since
    client.answered(1, clock.now)
    clock.now += 0.1
    listener(cluster)
    assert _down(flt) == ()

    _fail(flt)
    del client
    gc.collect()  # the listener's reference is weak: the client is gone
    listener(cluster)
    assert _down(flt) == ("node 1",)


def test_an_error_inside_the_filter_never_reaches_aiokafka() -> None:
    def broken() -> float:
        raise RuntimeError("bug")

    flt = BrokerOutageFilter(clock=broken)
    record = _record(CONNECT, 1, REFUSED)
    assert flt.filter(record)  # written as logged
    assert (record.getMessage(), record.levelno) == (
        f"Unable connect to node with id 1: {REFUSED}",
        logging.ERROR,
    )
    assert flt.filter(_record("Unable connect to node with id %s: %s", 1))  # a bad format

    class BadCluster:
        def brokers(self) -> object:
            raise RuntimeError("bug")

    ok = BrokerOutageFilter(clock=Clock())
    _fail(ok)
    ok.reachable(BadCluster(), object())  # called inside aiokafka's metadata update: no raise
    assert _down(ok) == ("node 1",)


def test_threads_share_the_bookkeeping() -> None:
    clock = Clock()
    flt = BrokerOutageFilter(every=1e9, clock=clock, expire=1e10)
    start = threading.Barrier(8)

    def hammer() -> None:
        start.wait()
        for _ in range(2500):
            _fail(flt)
            flt.filter(_record("Failed fetch messages from %s: %s", 1, _not_ready(1)))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    clock.now += 1e9
    summary = _fail(flt).getMessage()
    assert "20001 connection attempts in the last" in summary
    assert "(and 20000 related client errors)" in summary


@pytest.fixture
def process_logging() -> Iterator[list[BrokerOutageFilter]]:
    """``setup_logging`` changes the process's logging, ``install`` aiokafka's loggers: put
    both back (the filters the test appends are taken off again)."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    installed: list[BrokerOutageFilter] = []
    yield installed
    for flt in installed:
        flt.remove()
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)


def _outage_filters(name: str) -> list[BrokerOutageFilter]:
    return [f for f in logging.getLogger(name).filters if isinstance(f, BrokerOutageFilter)]


def test_an_installed_filter_turns_aiokafkas_lines_into_one(
    process_logging: list[BrokerOutageFilter],
) -> None:
    out = io.StringIO()
    setup_logging("INFO", "text", stream=out, threaded=False)
    for name in KAFKA_CLIENT_LOGGERS:  # the daemon that owns a filter installs it, not logging
        assert _outage_filters(name) == [], name
    flt = BrokerOutageFilter()
    process_logging.append(flt)
    flt.install()
    for name in KAFKA_CLIENT_LOGGERS:
        assert _outage_filters(name) == [flt], name
    # Through the real loggers, as aiokafka logs: one line where there were 200.
    for _ in range(100):
        logging.getLogger("aiokafka").error(CONNECT, 1, REFUSED)
        logging.getLogger("aiokafka.consumer.fetcher").error(
            "Failed fetch messages from %s: %s", 1, _not_ready(1)
        )
    logging.getLogger("aiokafka.consumer.group_coordinator").error(
        "Heartbeat failed: %r", Errors.KafkaError("Unexpected exception in heartbeat task")
    )
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "WARNING aiokafka: Kafka broker node 1 is unreachable" in lines[0]
    assert "ERROR aiokafka.consumer.group_coordinator: Heartbeat failed" in lines[1]


def test_installed_on_aiokafka_loggers_once() -> None:
    flt = BrokerOutageFilter()
    try:
        flt.install()
        flt.install()
        assert logging.getLogger("aiokafka").filters.count(flt) == 1
        assert flt in logging.getLogger("aiokafka.consumer.fetcher").filters
    finally:
        flt.remove()
    assert flt not in logging.getLogger("aiokafka").filters
    flt.remove()  # not on them: nothing


def test_two_daemons_filters_neither_share_nor_clobber(
    process_logging: list[BrokerOutageFilter],
) -> None:
    """Two daemons in one process: each owns a filter; one's outages are not the other's, and
    taking one off aiokafka's loggers (its daemon ended) leaves the other on them."""
    first, second = BrokerOutageFilter(clock=Clock()), BrokerOutageFilter(clock=Clock())
    process_logging.extend((first, second))
    first.install()
    second.install()
    _fail(first)
    assert (_down(first), _down(second)) == (("node 1",), ())
    first.remove()
    for name in KAFKA_CLIENT_LOGGERS:
        assert _outage_filters(name) == [second], name
