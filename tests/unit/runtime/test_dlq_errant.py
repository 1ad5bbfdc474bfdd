"""errors.tolerance, errors.log.*, the sink's reject hook, and exactly-once dead letters across
kills — with a fake dead-letter topic and consumer group (no broker)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest
from support.converters import PollConverter

from daemon.config import parse_connector, parse_worker
from daemon.config.connector import ConnectorConfig
from daemon.connectors.api import TaskId
from daemon.connectors.converters import make_converter
from daemon.connectors.records import OffsetRange, RawBatch, TopicPartition
from daemon.errors import ConversionError, RecordRejected
from daemon.runtime.deadletter.index import Failure, Headers, decode_bound, origin
from daemon.runtime.deadletter.policy import ErrantRecords, apply_tolerance, without_rows

TP = TopicPartition("t", 0)
ID = TaskId("c", 0)


def config(**extra: str) -> ConnectorConfig:
    base = {"name": "c", "connector.class": "x.y:Z", "topics": "t"}
    return parse_connector({**base, **extra}).config


def fail(offset: int, stage: str = "VALUE_CONVERTER") -> Failure:
    return Failure(
        "t", 0, offset, None, None, b"{x", (), stage, "Conv", "E", f"bad {offset}", "trace"
    )


def test_tolerance_none_fails_naming_topic_partition_offset() -> None:
    with pytest.raises(ConversionError, match="topic t partition 0 offset 42") as info:
        apply_tolerance(config(), ID, [fail(42), fail(43)])
    assert "2 record(s)" in str(info.value) and "errors.tolerance=all" in str(info.value)
    with pytest.raises(RecordRejected, match="refused by the sink; the first, at topic t"):
        apply_tolerance(config(), ID, [fail(7, "TASK_PUT")])
    apply_tolerance(config(), ID, [])  # nothing bad: nothing happens


def test_log_lines_name_the_task_and_record_and_content_only_when_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = config(**{"errors.tolerance": "all"})
    with caplog.at_level(logging.INFO):
        apply_tolerance(quiet, ID, [fail(42)])
    assert "skipped 1 record(s)" in caplog.text and "Error in connector" not in caplog.text
    caplog.clear()
    logged = config(**{"errors.tolerance": "all", "errors.log.enable": "true"})
    with caplog.at_level(logging.INFO):
        apply_tolerance(logged, ID, [fail(42)])
    assert "Error in connector c task 0: stage VALUE_CONVERTER" in caplog.text
    assert "topic t partition 0 offset 42" in caplog.text and "{x" not in caplog.text
    caplog.clear()
    full = config(
        **{
            "errors.tolerance": "all",
            "errors.log.enable": "true",
            "errors.log.include.messages": "true",
        }
    )
    with caplog.at_level(logging.INFO):
        apply_tolerance(full, ID, [fail(42)])
    assert "value=b'{x'" in caplog.text


@dataclass
class Rec:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


def json_converter() -> PollConverter:
    return PollConverter(
        make_converter("string", {}, is_key=True),
        make_converter("json", {"schemas.enable": "false"}, is_key=False),
    )


def test_sift_drops_rejected_rows_and_keeps_the_original_bytes() -> None:
    records = [Rec("t", 0, o, 1000 + o, 0, b"k%d" % o, b'{"n": %d}' % o) for o in range(4)]
    records[1].value = b"{broken"
    converter = json_converter()
    result = converter.convert(RawBatch.from_records(records))
    assert len(result.bad) == 1
    batch = result.batch.with_ranges([OffsetRange("t", 0, 0, 4)])
    errant = ErrantRecords(ID, config(), parse_worker({}).config, "connect-c", converter)
    # Row 1 of the converted table is offset 2 (offset 1 was rejected by the converter).
    sifted, failures = errant.sift(
        {TP: records}, result.bad, batch, {1: ValueError("n must be odd")}, object
    )
    assert sifted.table.column("kafka_offset").to_pylist() == [0, 3]
    assert sifted.ranges == batch.ranges  # still covers every record
    assert [(f.offset, f.stage) for f in failures] == [(1, "VALUE_CONVERTER"), (2, "TASK_PUT")]
    assert failures[1].value == b'{"n": 2}' and failures[1].timestamp == 1002
    assert failures[1].exception_class == "builtins.ValueError"
    assert failures[0].class_name.endswith("JsonConverter")
    assert len(without_rows(batch, [])) == len(batch)


# ---- exactly once across kills, with a fake topic and group ----


@dataclass
class FakeKafka:
    """A one-partition dead-letter topic and a consumer group's offsets with metadata."""

    letters: list[tuple[int, Headers]] = field(default_factory=list)  # (dlq offset, headers)
    group: dict[TopicPartition, tuple[int, str]] = field(default_factory=dict)
    reads_from: list[int] = field(default_factory=list)


class FakeTopic:
    def __init__(self, kafka: FakeKafka) -> None:
        self.kafka = kafka
        self.topic = "dlq"
        self.partitions = (0,)

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def produce(self, letters: Sequence[tuple[object, object, object, Headers]]):  # type: ignore[no-untyped-def]
        out = []
        for _k, _v, _ts, headers in letters:
            offset = len(self.kafka.letters)
            self.kafka.letters.append((offset, headers))
            out.append((0, offset))
        return out

    async def bounds(self, group: str, tps: Sequence[TopicPartition]):  # type: ignore[no-untyped-def]
        return {
            tp: decode_bound(self.kafka.group[tp][1], "dlq") if tp in self.kafka.group else None
            for tp in tps
        }

    async def read(self, starts: Mapping[TopicPartition, int], bounds):  # type: ignore[no-untyped-def]
        begin = min((b.get(0, 0) if b is not None else 0) for b in bounds)
        self.kafka.reads_from.append(begin)
        found: dict[TopicPartition, dict[int, tuple[int, int]]] = {tp: {} for tp in starts}
        for offset, headers in self.kafka.letters[begin:]:
            source = origin(headers)
            assert source is not None
            tp, at = source
            if tp in starts and at >= starts[tp]:
                found[tp][at] = (0, offset)
        return found, {0: len(self.kafka.letters)}


BAD_OFFSETS = {3, 8, 9, 15, 22, 23, 24, 31}


def incarnation(kafka: FakeKafka) -> ErrantRecords:
    cfg = config(
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq",
            "errors.deadletterqueue.context.headers.enable": "true",
        }
    )
    errant = ErrantRecords(ID, cfg, parse_worker({}).config, "connect-c", json_converter())
    errant.dlq = FakeTopic(kafka)  # type: ignore[assignment]
    return errant


async def deliver(errant: ErrantRecords, start: int, end: int, generation: int = 0) -> None:
    failures = [fail(o) for o in range(start, end) if o in BAD_OFFSETS]
    await errant.handle(failures, [OffsetRange("t", 0, start, end)], generation)


def group_commit(kafka: FakeKafka, errant: ErrantRecords, offset: int) -> None:
    metadata = errant.metadata({TP: offset})
    assert metadata is not None
    if TP in metadata:
        kafka.group[TP] = (offset, metadata[TP])


async def test_each_bad_record_is_dead_lettered_once_across_kills() -> None:
    kafka = FakeKafka()
    # Incarnation 1: batches of 5; the sink commits up to 10 and the group commit follows;
    # then batches up to 20 are dead-lettered, and it is killed before the sink commits them.
    one = incarnation(kafka)
    for start in range(0, 20, 5):
        await deliver(one, start, start + 5)
        if start + 5 == 10:
            group_commit(kafka, one, 10)
    assert sorted(origin(h)[1] for _, h in kafka.letters) == [3, 8, 9, 15]  # type: ignore[index]
    # Incarnation 2 resumes where the sink committed (10), re-reads 10..20: 15 is there already.
    two = incarnation(kafka)
    for start in range(10, 30, 5):
        await deliver(two, start, start + 5)
        if start + 5 == 25:
            group_commit(kafka, two, 25)
    assert kafka.reads_from == [0, 3]  # the second read started at the bound, past 3, 8 and 9
    # Killed again; the group offset lags the sink (sink at 25, group at 25): resume at 25.
    three = incarnation(kafka)
    for start in range(25, 35, 5):
        await deliver(three, start, start + 5)
    dead = [origin(h)[1] for _, h in kafka.letters]  # type: ignore[index]
    assert sorted(dead) == sorted(BAD_OFFSETS) and len(dead) == len(set(dead))


async def test_a_rebalance_or_a_seek_back_reads_the_topic_again() -> None:
    kafka = FakeKafka()
    errant = incarnation(kafka)
    await deliver(errant, 0, 10)
    await deliver(errant, 10, 20)
    assert len(kafka.reads_from) == 1
    await deliver(errant, 5, 10)  # a retry seeks back: read again, produce nothing twice
    await deliver(errant, 10, 20, generation=1)  # a rebalance happened in between
    assert len(kafka.reads_from) == 3
    dead = [origin(h)[1] for _, h in kafka.letters]  # type: ignore[index]
    assert sorted(dead) == [3, 8, 9, 15]


async def test_without_a_dead_letter_topic_nothing_is_produced_or_stored() -> None:
    errant = ErrantRecords(
        ID, config(**{"errors.tolerance": "all"}), parse_worker({}).config, "g", json_converter()
    )
    assert errant.dlq is None
    await errant.handle([fail(3)], [OffsetRange("t", 0, 0, 5)], 0)
    assert errant.metadata({TP: 5}) is None
