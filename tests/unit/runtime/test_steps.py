"""Offset ranges of a poll, errors.tolerance, and callback deadlines."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pytest

from daemon.config import parse_connector
from daemon.connectors.records import BadRecord, OffsetRange, TopicPartition
from daemon.errors import ConversionError, TaskTimeout
from daemon.runtime.steps import TaskSettings, check_bad_records, offset_ranges, with_deadline

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


@dataclass
class Rec:
    offset: int


def test_ranges_start_at_the_position_not_the_first_record() -> None:
    polled = {TP0: [Rec(12), Rec(13)], TP1: [Rec(5)]}
    ranges = offset_ranges(polled, {TP0: 10})
    assert sorted(ranges) == [OffsetRange("t", 0, 10, 14), OffsetRange("t", 1, 5, 6)]


def test_a_position_past_the_first_record_is_not_trusted(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert offset_ranges({TP0: [Rec(3)]}, {TP0: 7}) == [OffsetRange("t", 0, 3, 4)]
    assert "comes before the position" in caplog.text


def _config(**extra: str):  # type: ignore[no-untyped-def]
    return parse_connector({"name": "c", "connector.class": "x.y:Z", "topics": "t", **extra}).config


BAD = [
    BadRecord("t", 1, 42, "value conversion failed: not JSON", "json.JSONDecodeError", "value"),
    BadRecord("t", 1, 43, "value conversion failed: not JSON", "json.JSONDecodeError", "value"),
]


def test_tolerance_none_fails_naming_topic_partition_offset() -> None:
    with pytest.raises(ConversionError, match="topic t partition 1 offset 42") as info:
        check_bad_records(_config(), BAD)
    assert "2 record(s)" in str(info.value) and "errors.tolerance=all" in str(info.value)
    check_bad_records(_config(), [])  # nothing bad: nothing happens


def test_tolerance_all_skips_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    config = _config(**{"errors.tolerance": "all", "errors.log.enable": "true"})
    with caplog.at_level(logging.WARNING):
        check_bad_records(config, BAD)
    assert "Skipped 2 record(s)" in caplog.text
    assert "offset 43" in caplog.text


async def test_deadline_names_the_step() -> None:
    with pytest.raises(TaskTimeout, match=r"put\(\) did not return within 0\.05 s"):
        await with_deadline("task c-0: put()", asyncio.sleep(5), 0.05)
    assert await with_deadline("x", asyncio.sleep(0, result=7), 1.0) == 7


async def test_a_timeout_raised_inside_passes_through() -> None:
    async def inner() -> None:
        raise TimeoutError("the sink's own")

    with pytest.raises(TimeoutError, match="the sink's own"):
        await with_deadline("x", inner(), 1.0)


def test_callback_deadline_covers_two_writes() -> None:
    assert TaskSettings(write_timeout=10.0).callback_timeout == 50.0
