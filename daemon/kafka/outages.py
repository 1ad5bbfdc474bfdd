"""Broker outages in the log: aiokafka's line per failed connection attempt (thousands a minute
with a few tasks) becomes one line when a broker becomes unreachable, a summary a minute while it
stays so, and one line when it is back (``BrokerOutageFilter``).

The ``Daemon`` makes one filter and holds it for its lifetime: its task consumers ``watch`` their
clients with it (a metadata update may show a broker is back), and ``Daemon.run`` puts it on
aiokafka's loggers (``install``) with the process's logging and takes it off at the end. Nothing
here is global, so daemons embedded in one process each keep their own bookkeeping; aiokafka's
loggers are the process's, though, so a filter installed there sees every client's lines.

What this relies on in aiokafka (the wording of its lines, its loggers, its connections through
``daemon.kafka.client``): the package docstring.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from daemon.kafka.client import answered_since, request_timeout

#: aiokafka's loggers whose lines repeat for every attempt while a broker is unreachable. A
#: logger's filters see only the lines logged on it, not its children's: each is listed.
KAFKA_CLIENT_LOGGERS = (
    "aiokafka",
    "aiokafka.conn",
    "aiokafka.consumer.fetcher",
    "aiokafka.consumer.group_coordinator",
    "aiokafka.producer.sender",
)
#: A failed connection attempt (``aiokafka.client``): to a broker of the metadata, by its id, or
#: to a bootstrap address.
_UNREACHABLE = re.compile(r'^Unable connect to (?:node with id (?P<node>\S+?)|"(?P<addr>[^"]+)"): ')
#: Every candidate of a metadata update failed (the candidates' ids listed).
_METADATA_FAILED = re.compile(r"^Unable to update metadata from \[(?P<nodes>[^\]]*)\]$")
_LIST_ITEM = re.compile(r"[^\s,'\"]+")
#: aiokafka's lines that may follow from failed connections, naming the broker where they do.
#: One is the outage's doing only if the error it carries is connection-class
#: (``_CONNECTION_ERROR``): the same lines with a broker's error answer (an unknown member, a
#: failed authorization) are real errors. Lines not listed here always pass (a heartbeat's
#: unexpected error, a lost generation, a failed commit...).
_FOLLOW_ONS = tuple(
    re.compile(pattern)
    for pattern in (
        r'^Unable to request metadata from (?:node with id (?P<node>\S+?)|"(?P<addr>[^"]+)"): ',
        r"^Failed fetch (?:messages|offsets) from (?P<node>\S+?): ",
        r"^Error sending \w+ to node (?P<node>\S+) \[",
        r"^Cannot send .+? to (?P<node>[^\s:]+): ",
        r"^Could not send .+?: ",
        r"^Heartbeat send request failed: ",
        r"^Group Coordinator Request failed: ",
        r"^Auto offset commit failed: ",
    )
)
#: Errors that mean "could not talk to the broker", not "the broker said no".
_CONNECTION_ERROR = re.compile(
    r"NodeNotReadyError|KafkaConnectionError|RequestTimedOutError|StaleMetadata"
    r"|ConnectionError|TimeoutError|Connect call failed|\[Errno -?\d+\]"
)
#: ``NodeNotReadyError`` names the node: "... which is not ready (node id 1)."
_NODE_IN_ERROR = re.compile(r"\(node id (?P<node>[^)\s]+)\)")

QUIET_S = 60.0
"""How long no attempt to a broker may have failed, with fresh metadata naming it, before it
counts as back when no connection to it is seen. aiokafka 0.14 has no reconnect backoff
(``reconnect_backoff_ms`` is the Java client's): it connects again whenever a request needs the
node, its callers sleeping ``retry_backoff_ms`` (100 ms) in between, and an attempt gives up
after ``request_timeout_ms`` (40 s; a broker that drops packets takes that long to fail). So
while anything needs a down broker its failures come at most ~40 s apart; the window is longer
(and longer still for a client with a longer request timeout). ``connections_max_idle_ms`` (9
min) only closes idle connections: it plays no part."""

EXPIRE_S = 300.0
"""How long without a failed attempt before an outage is forgotten, with a line saying so. What
would tell that a broker is back may never come (every connector paused, a decommissioned node,
a dead bootstrap address), and the outage's follow-on lines are hidden only while it lasts: this
bounds that. A later failure starts a new outage (a new line)."""

_outage_log = logging.getLogger("connectd.kafka")
_Note = tuple[int, str, tuple[Any, ...]]  # a line of our own: level, message, arguments


@dataclasses.dataclass
class _Outage:
    """One unreachable broker: ``node`` (its id) or ``addr`` (a bootstrap ``host:port``)."""

    node: str | None
    addr: str | None
    since: float
    last_attempt: float
    last_line: float  # when the last line about it was written
    attempts: int = 1  # failed connection attempts in all
    recent: int = 1  # ... since the last line about it
    related: int = 0  # follow-on lines counted, not written, since the last line about it


class BrokerOutageFilter(logging.Filter):
    """Turns aiokafka's line per failed connection attempt (thousands a minute with a few tasks)
    into: one line when a broker becomes unreachable, naming it; one summary a minute while it
    stays so, with the number of attempts; one line when it is back (``reachable``, on a
    metadata update that shows it). The lines that plainly follow from the failed connections
    (a failed metadata update, fetch or heartbeat whose error is connection-class, naming that
    broker where they name one) are counted into the summary, not written; every other line
    passes, also during an outage. An outage without a failed attempt for ``expire`` seconds
    ends too (``EXPIRE_S``), so nothing stays hidden for good.

    ``install`` puts it on ``KAFKA_CLIENT_LOGGERS``; one instance serves every client of its
    daemon (the ``Daemon`` owns it and hands it to its task consumers, which ``watch`` their
    clients). ``clock`` is for tests (with a client given to ``reachable`` it must be
    ``time.monotonic``'s, which aiokafka stamps its connections with).
    """

    def __init__(
        self,
        every: float = 60.0,
        clock: Callable[[], float] | None = None,
        *,
        quiet: float = QUIET_S,
        expire: float = EXPIRE_S,
    ) -> None:
        super().__init__()
        self.every = every
        self.quiet = quiet
        self.expire = expire
        self.clock: Callable[[], float] = clock or time.monotonic
        # aiokafka logs from its loop's thread, but anything else may log on its loggers from
        # another (a second loop, setup code), and ``reachable`` runs in aiokafka's metadata
        # code: the bookkeeping is one critical section. Our own lines are logged after it.
        self._lock = threading.Lock()
        self._down: dict[str, _Outage] = {}

    @property
    def down(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._down)

    def reset(self) -> None:
        """Forget every outage (an embedding process, or a test, starting afresh)."""
        with self._lock:
            self._down.clear()

    def install(self) -> None:
        """Put this filter on aiokafka's loggers (``KAFKA_CLIENT_LOGGERS``); idempotent."""
        for name in KAFKA_CLIENT_LOGGERS:
            logger = logging.getLogger(name)
            if self not in logger.filters:
                logger.addFilter(self)

    def remove(self) -> None:
        """Take this filter off aiokafka's loggers again (nothing if it is not on them)."""
        for name in KAFKA_CLIENT_LOGGERS:
            logging.getLogger(name).removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        try:
            keep, notes = self._judge(record)
            _tell(notes)
            return keep
        except Exception:
            # The logging call is inside aiokafka's connection and fetch code: a bug here must
            # neither break it nor lose the line, which goes out as logged.
            _outage_log.debug("The broker outage filter failed on %r", record.msg, exc_info=True)
            return True

    def _judge(self, record: logging.LogRecord) -> tuple[bool, list[_Note]]:
        text = record.getMessage()
        now = self.clock()
        with self._lock:
            notes = self._expire(now)
            found = _UNREACHABLE.match(text)
            if found is not None:
                return self._attempt(record, found, text[found.end() :], now), notes
            outage = self._caused_by(text)
            if outage is None:
                return True, notes
            outage.related += 1
            return False, notes

    def _attempt(
        self, record: logging.LogRecord, found: re.Match[str], error: str, now: float
    ) -> bool:
        node, addr = found["node"], found["addr"]
        broker = f"node {node}" if node else addr
        outage = self._down.get(broker)
        if outage is None:
            self._down[broker] = _Outage(node, addr, since=now, last_attempt=now, last_line=now)
            return _rewrite(
                record,
                logging.WARNING,
                "Kafka broker %s is unreachable: %s; retrying (a summary every %.0f s until it"
                " is back)",
                (broker, error, self.every),
            )
        outage.last_attempt = now
        outage.attempts += 1
        outage.recent += 1
        if now - outage.last_line < self.every:
            return False
        args = (broker, now - outage.since, outage.recent, now - outage.last_line, outage.related)
        outage.last_line, outage.recent, outage.related = now, 0, 0
        return _rewrite(
            record,
            logging.WARNING,
            "Kafka broker %s still unreachable after %.0f s: %d connection attempts in the last"
            " %.0f s (and %d related client errors); last error: %s",
            (*args, error),
        )

    def _caused_by(self, text: str) -> _Outage | None:
        """The outage ``text`` plainly follows from, if any."""
        if not self._down:
            return None
        found = _METADATA_FAILED.match(text)
        if found is not None:
            # Every candidate failed: the outage's doing only if every one is down.
            outages = [self._down.get(f"node {n}") for n in _LIST_ITEM.findall(found["nodes"])]
            down = [o for o in outages if o is not None]
            if not down or len(down) < len(outages):
                return None
            return max(down, key=lambda o: o.last_attempt)
        for pattern in _FOLLOW_ONS:
            found = pattern.match(text)
            if found is not None:
                break
        else:
            return None
        error = text[found.end() :]
        if _CONNECTION_ERROR.search(error) is None:
            return None  # the broker answered with an error, or something else failed
        named = found.groupdict()
        node = named.get("node")
        if node is None:
            in_error = _NODE_IN_ERROR.search(error)
            node = in_error["node"] if in_error is not None else None
        if node is not None:
            return self._down.get(f"node {node}")
        if named.get("addr") is not None:
            return self._down.get(named["addr"])
        # No broker named (a heartbeat, a coordinator lookup): the one failing most recently.
        return max(self._down.values(), key=lambda o: o.last_attempt)

    def _expire(self, now: float) -> list[_Note]:
        notes: list[_Note] = []
        for broker, outage in list(self._down.items()):
            if now - outage.last_attempt < self.expire:
                continue
            del self._down[broker]
            silent, lasted = now - outage.last_attempt, outage.last_attempt - outage.since
            msg = (
                "Kafka broker %s: no failed connection attempt for %.0f s (back, or no longer"
                " used); no longer reported as unreachable (%d failed attempts in %.0f s)"
            )
            notes.append((logging.INFO, msg, (broker, silent, outage.attempts, lasted)))
        return notes

    def reachable(self, cluster: object = None, client: object = None) -> None:
        """``cluster`` (aiokafka's ``ClusterMetadata``) was just updated from a broker's answer;
        ``client`` is its ``AIOKafkaClient``, if known. A broker marked down is back (a line
        each) when ``client`` holds a connection to it made or answered after its last failed
        attempt, or when the metadata names it and no attempt to it has failed for ``quiet``
        seconds (``QUIET_S``). A broker the metadata no longer names (stopped, fenced,
        decommissioned) stays down until its outage expires."""
        try:
            now = self.clock()
            quiet = max(self.quiet, 1.5 * request_timeout(client))
            named = _named(cluster)
            notes: list[_Note] = []
            with self._lock:
                for broker, outage in list(self._down.items()):
                    seen = client is not None and _answered(client, outage)
                    known = outage.node in named or outage.addr in named
                    if not (seen or (known and now - outage.last_attempt >= quiet)):
                        continue
                    del self._down[broker]
                    msg = (
                        "Kafka broker %s is reachable again after %.0f s (%d failed connection"
                        " attempts)"
                    )
                    notes.append((logging.INFO, msg, (broker, now - outage.since, outage.attempts)))
                notes += self._expire(now)
            _tell(notes)
        except Exception:
            # Called from aiokafka's metadata update: a bug here must not break it.
            _outage_log.debug("The broker outage filter failed on a metadata update", exc_info=True)

    def watch(self, client: object) -> None:
        """Hear of ``client``'s (an ``AIOKafkaClient``'s) metadata updates: each may show that
        a broker is back (``reachable``). Does nothing for anything else (``None``)."""
        add = getattr(getattr(client, "cluster", None), "add_listener", None)
        if add is None:
            return
        try:
            # The cluster is the client's: a strong reference from its listener would be a cycle.
            ref = weakref.ref(client)
        except TypeError:  # no weak references to it: the metadata alone must tell
            add(self.reachable)
            return
        add(lambda cluster: self.reachable(cluster, ref()))


def _named(cluster: object) -> set[str | None]:
    """The ids and ``host:port`` addresses of the brokers ``cluster``'s metadata names."""
    brokers = getattr(cluster, "brokers", None)
    named: set[str | None] = set()
    for broker in brokers() if brokers is not None else ():
        named.add(str(broker.nodeId))
        named.add(f"{broker.host}:{broker.port}")
    named.discard(None)
    return named


def _answered(client: object, outage: _Outage) -> bool:
    """Whether ``client`` holds a live connection to ``outage``'s broker (by node id, or by
    address) made or answered after its last failed attempt."""
    return answered_since(client, outage.node, outage.addr, outage.last_attempt)


def _tell(notes: list[_Note]) -> None:
    for level, msg, args in notes:
        _outage_log.log(level, msg, *args)


def _rewrite(record: logging.LogRecord, level: int, msg: str, args: tuple[Any, ...]) -> bool:
    record.levelno, record.levelname = level, logging.getLevelName(level)
    record.msg, record.args = msg, args
    record.exc_info = record.exc_text = None
    return True
