"""The dead-letter queue's bookkeeping: what a dead letter carries, and which records are there.

A record that fails conversion or the sink's ``reject`` under ``errors.tolerance=all`` with
``errors.deadletterqueue.topic.name`` set is produced to that topic as it came (key, value,
timestamp and headers unchanged, as Kafka Connect's ``DeadLetterQueueReporter`` does), with
Connect's ``__connect.errors.*`` context headers when
``errors.deadletterqueue.context.headers.enable`` is true. Every header value is UTF-8 text,
numbers in decimal, as in Connect. Without context headers a dead letter still carries one
header, ``__connectd.errors.origin`` (``topic/partition/offset``), so it can be found again.

Exactly once in the dead-letter topic, across kills — the argument:

1. A batch's dead letters are produced and acknowledged (idempotent producer, ``acks=all``)
   before the batch is given to ``put``; the sink commits a batch's offset range only in or
   after that ``put``. So a source offset the sink has committed is already in the topic if it
   was a dead letter: a kill never loses one.
2. A kill after the acknowledgement and before the sink's commit makes the next incarnation
   read those source offsets again. Before it delivers a partition's first batch after any
   discontinuity (assignment, seek, retry), it reads the dead-letter topic from a lower bound
   to its end offsets and indexes every dead letter whose origin is that partition at or after
   the batch's start; those are not produced again, and the index records what it produces from
   then on (one incarnation owns a partition at a time, so nobody else adds any).
3. The lower bound: with each consumer-group commit of a partition's offset ``C`` the runtime
   stores, as the offset's metadata, per dead-letter partition the smallest offset of a dead
   letter it knows with origin ``≥ C`` — or, if none, the smallest offset a future dead letter
   can take (one past the last it produced, or the end offset it saw when it read the topic).
   Every dead letter with origin ``≥ C`` therefore sits at or after the bound. The group offset
   ``C`` only trails what the sink committed (it is the sink's durable offset, committed later),
   and the sink's offset is where the next incarnation starts, so the bound stored with ``C`` —
   or with any earlier commit, should the last group commit have failed — covers every dead
   letter the next incarnation could meet. No metadata (first run, another tool, a changed
   topic name): the bound is the topic's beginning.
4. Left open: resetting a connector's offsets backwards (REST) re-processes on purpose; the
   records before the old group offset may then be dead-lettered again.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from daemon.connectors.records import TopicPartition

PREFIX = "__connect.errors."
H_TOPIC = PREFIX + "topic"
H_PARTITION = PREFIX + "partition"
H_OFFSET = PREFIX + "offset"
H_CONNECTOR = PREFIX + "connector.name"
H_TASK = PREFIX + "task.id"
H_STAGE = PREFIX + "stage"
H_CLASS = PREFIX + "class.name"
H_EXCEPTION = PREFIX + "exception.class.name"
H_MESSAGE = PREFIX + "exception.message"
H_STACKTRACE = PREFIX + "exception.stacktrace"
#: Added when the context headers are off, so that a dead letter can still be found again.
H_ORIGIN = "__connectd.errors.origin"
#: Key of the bound in a consumer-group offset's metadata.
METADATA_KEY = "connectd.dlq"

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Failure:
    """One record that failed, with what Connect's context headers report about it.

    ``stage`` is Connect's stage name (``KEY_CONVERTER``, ``VALUE_CONVERTER``, ``TRANSFORMATION``,
    ``TASK_PUT``);
    ``class_name`` the class that was running (the converter, the transform, or the sink task).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: Headers
    stage: str
    class_name: str
    exception_class: str
    message: str
    stacktrace: str

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def where(self) -> str:
        return f"topic {self.topic} partition {self.partition} offset {self.offset}"


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def describe_exception(exc: BaseException) -> tuple[str, str, str]:
    """(class name, message, stack trace) of an exception, for a ``Failure``."""
    trace = "".join(traceback.format_exception(exc))
    return qualified_name(type(exc)), str(exc), trace


def _text(value: object) -> bytes:
    return str(value).encode("utf-8")


def dead_letter_headers(failure: Failure, connector: str, task: int, *, context: bool) -> Headers:
    """The dead letter's headers: the original ones, then Connect's context headers (or, without
    them, ``__connectd.errors.origin``)."""
    extra: list[tuple[str, bytes | None]]
    if context:
        extra = [
            (H_TOPIC, _text(failure.topic)),
            (H_PARTITION, _text(failure.partition)),
            (H_OFFSET, _text(failure.offset)),
            (H_CONNECTOR, _text(connector)),
            (H_TASK, _text(task)),
            (H_STAGE, _text(failure.stage)),
            (H_CLASS, _text(failure.class_name)),
            (H_EXCEPTION, _text(failure.exception_class)),
            (H_MESSAGE, _text(failure.message)),
            (H_STACKTRACE, _text(failure.stacktrace)),
        ]
    else:
        extra = [(H_ORIGIN, _text(f"{failure.topic}/{failure.partition}/{failure.offset}"))]
    return (*failure.headers, *extra)


def origin(headers: Iterable[tuple[str, bytes | None]]) -> tuple[TopicPartition, int] | None:
    """The source partition and offset a dead letter came from, read from its headers (the
    last value of each header wins: a record dead-lettered twice by a chain of connectors
    carries the latest). ``None`` if it does not say."""
    found: dict[str, bytes | None] = {}
    for key, value in headers:
        if key in (H_TOPIC, H_PARTITION, H_OFFSET, H_ORIGIN):
            found[key] = value
    try:
        if all(found.get(k) is not None for k in (H_TOPIC, H_PARTITION, H_OFFSET)):
            topic = found[H_TOPIC].decode()  # type: ignore[union-attr]
            partition = int(found[H_PARTITION])  # type: ignore[arg-type]
            offset = int(found[H_OFFSET])  # type: ignore[arg-type]
            return TopicPartition(topic, partition), offset
        text = found.get(H_ORIGIN)
        if text is not None:
            topic, partition_text, offset_text = text.decode().rsplit("/", 2)
            return TopicPartition(topic, int(partition_text)), int(offset_text)
    except (ValueError, UnicodeDecodeError):
        return None
    return None


def encode_bound(topic: str, bound: Mapping[int, int]) -> str:
    """Consumer-group offset metadata holding a dead-letter bound (see the module docstring)."""
    return json.dumps(
        {METADATA_KEY: {"topic": topic, "from": {str(p): o for p, o in sorted(bound.items())}}},
        separators=(",", ":"),
    )


def decode_bound(metadata: str | None, topic: str) -> dict[int, int] | None:
    """The bound in ``metadata`` if it is one for ``topic``; ``None`` otherwise (no metadata,
    another tool's, or a bound for another dead-letter topic)."""
    if not metadata:
        return None
    try:
        doc = json.loads(metadata)[METADATA_KEY]
        if doc["topic"] != topic:
            return None
        return {int(p): int(o) for p, o in doc["from"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass
class _Known:
    """The dead letters of one source partition at or after ``start``."""

    start: int
    letters: dict[int, tuple[int, int]] = field(default_factory=dict)  # offset → (dlq p, o)


class DeadLetterIndex:
    """Which source offsets are in the dead-letter topic, per source partition; pure logic.

    A partition is *indexed* from a start offset: every dead letter whose origin is that
    partition at or after the start is known (from a read of the topic, then from what this
    incarnation produced). ``expected`` is where the partition's next batch must start for the
    index to stay complete; a batch starting elsewhere (a seek) needs a new read.
    """

    def __init__(self) -> None:
        self._known: dict[TopicPartition, _Known] = {}
        self._expected: dict[TopicPartition, int] = {}
        self._floor: dict[int, int] = {}  # dlq partition → lowest offset a new letter can take

    def needs_read(self, starts: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Of the batch's partitions (→ the batch's start offset), those to read again."""
        return {
            tp: start
            for tp, start in starts.items()
            if tp not in self._known or self._expected.get(tp) != start
        }

    def load(
        self,
        tp: TopicPartition,
        start: int,
        letters: Mapping[int, tuple[int, int]],
    ) -> None:
        """The result of a read: the dead letters of ``tp`` at or after ``start``."""
        self._known[tp] = _Known(start, {o: at for o, at in letters.items() if o >= start})
        self._expected[tp] = start

    def saw_end(self, ends: Mapping[int, int]) -> None:
        """End offsets of the dead-letter partitions seen by a read: no new letter goes below."""
        for p, end in ends.items():
            self._floor[p] = max(self._floor.get(p, 0), end)

    def contains(self, tp: TopicPartition, offset: int) -> bool:
        known = self._known.get(tp)
        return known is not None and offset in known.letters

    def produced(
        self, tp: TopicPartition, offset: int, dlq_partition: int, dlq_offset: int
    ) -> None:
        known = self._known.setdefault(tp, _Known(offset))
        known.letters[offset] = (dlq_partition, dlq_offset)
        self._floor[dlq_partition] = max(self._floor.get(dlq_partition, 0), dlq_offset + 1)

    def advanced(self, tp: TopicPartition, end: int) -> None:
        """A batch of ``tp`` ending (exclusive) at ``end`` was delivered."""
        if tp in self._known:
            self._expected[tp] = end

    def forget(self, tp: TopicPartition) -> None:
        """Read ``tp`` again before its next batch (after a failure, or a revocation)."""
        self._known.pop(tp, None)
        self._expected.pop(tp, None)

    def bound(self, tp: TopicPartition, committed: int) -> dict[int, int] | None:
        """The bound to store with the group commit of ``committed`` for ``tp`` (module
        docstring, point 3), and the letters below ``committed`` are dropped from memory.
        ``None`` when ``tp`` is not indexed (store no bound: the old one stays valid)."""
        known = self._known.get(tp)
        if known is None or committed < known.start:
            return None
        bound = dict(self._floor)
        for offset, (p, o) in known.letters.items():
            if offset >= committed:
                bound[p] = min(bound.get(p, o), o)
        known.letters = {k: v for k, v in known.letters.items() if k >= committed}
        known.start = committed
        return bound


def lowest(bounds: Sequence[Mapping[int, int] | None], partitions: Iterable[int]) -> dict[int, int]:
    """Where to start reading each dead-letter partition to cover every bound (a partition a
    bound does not mention, or a missing bound, means from the beginning: offset 0, which the
    reader raises to the partition's first offset)."""
    start: dict[int, int] = {}
    for p in partitions:
        values = [b.get(p, 0) if b is not None else 0 for b in bounds]
        start[p] = min(values) if values else 0
    return start
