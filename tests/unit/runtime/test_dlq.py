"""Dead letters: Connect's context headers, finding a letter's origin, the bound stored with group
offsets, and the index that keeps a record from being dead-lettered twice."""

from __future__ import annotations

from daemon.connectors.records import TopicPartition
from daemon.runtime.deadletter.index import (
    H_ORIGIN,
    DeadLetterIndex,
    Failure,
    dead_letter_headers,
    decode_bound,
    describe_exception,
    encode_bound,
    lowest,
    origin,
)

TP = TopicPartition("orders", 2)


def failure(offset: int = 41, headers: tuple[tuple[str, bytes | None], ...] = ()) -> Failure:
    return Failure(
        "orders",
        2,
        offset,
        1_700_000_000_000,
        b"k",
        b"{not json",
        headers,
        "VALUE_CONVERTER",
        "daemon.connectors.converters.JsonConverter",
        "json.decoder.JSONDecodeError",
        "value conversion failed: Expecting property name",
        "json.decoder.JSONDecodeError: value conversion failed: Expecting property name",
    )


def test_context_headers_are_connects_names_and_utf8_text_after_the_originals() -> None:
    headers = dead_letter_headers(failure(headers=(("trace", b"abc"),)), "sink", 3, context=True)
    assert headers[0] == ("trace", b"abc")  # the record's own headers come first, unchanged
    assert dict(headers[1:]) == {
        "__connect.errors.topic": b"orders",
        "__connect.errors.partition": b"2",
        "__connect.errors.offset": b"41",
        "__connect.errors.connector.name": b"sink",
        "__connect.errors.task.id": b"3",
        "__connect.errors.stage": b"VALUE_CONVERTER",
        "__connect.errors.class.name": b"daemon.connectors.converters.JsonConverter",
        "__connect.errors.exception.class.name": b"json.decoder.JSONDecodeError",
        "__connect.errors.exception.message": b"value conversion failed: Expecting property name",
        "__connect.errors.exception.stacktrace": (
            b"json.decoder.JSONDecodeError: value conversion failed: Expecting property name"
        ),
    }
    assert origin(headers) == (TP, 41)


def test_without_context_headers_only_the_origin_marker_is_added() -> None:
    headers = dead_letter_headers(failure(), "sink", 0, context=False)
    assert headers == ((H_ORIGIN, b"orders/2/41"),)
    assert origin(headers) == (TP, 41)
    assert origin([("other", b"x")]) is None
    assert origin([("__connect.errors.offset", b"nope")]) is None


def test_a_sink_rejection_carries_its_traceback() -> None:
    try:
        raise ValueError("amount is negative")
    except ValueError as exc:
        cls, message, trace = describe_exception(exc)
    assert cls == "builtins.ValueError" and message == "amount is negative"
    assert "Traceback" in trace and "amount is negative" in trace


def test_bound_metadata_round_trips_and_ignores_other_topics_and_tools() -> None:
    text = encode_bound("dlq", {0: 17, 1: 4})
    assert decode_bound(text, "dlq") == {0: 17, 1: 4}
    assert decode_bound(text, "another-dlq") is None
    assert decode_bound("", "dlq") is None
    assert decode_bound("some other tool's metadata", "dlq") is None
    assert decode_bound('{"connectd.dlq": 5}', "dlq") is None
    # Where to start reading: the lowest bound; a missing one means the beginning.
    assert lowest([{0: 17, 1: 4}, {0: 9}], [0, 1]) == {0: 9, 1: 0}
    assert lowest([{0: 17}, None], [0]) == {0: 0}


def test_index_knows_letters_from_a_read_and_from_producing() -> None:
    index = DeadLetterIndex()
    assert index.needs_read({TP: 100}) == {TP: 100}
    index.saw_end({0: 50})
    index.load(TP, 100, {99: (0, 10), 105: (0, 30)})
    assert not index.contains(TP, 99)  # before the start: not this incarnation's business
    assert index.contains(TP, 105)
    index.produced(TP, 120, 0, 50)
    assert index.contains(TP, 120)
    index.advanced(TP, 130)
    assert index.needs_read({TP: 130}) == {}  # continues where the last batch ended
    assert index.needs_read({TP: 100}) == {TP: 100}  # a seek back: read again
    index.forget(TP)
    assert index.needs_read({TP: 130}) == {TP: 130}


def test_bound_is_the_lowest_letter_at_or_after_the_commit_else_the_floor() -> None:
    index = DeadLetterIndex()
    index.saw_end({0: 50, 1: 7})
    index.load(TP, 100, {105: (0, 30)})
    index.produced(TP, 120, 0, 50)
    index.advanced(TP, 130)
    # Committed 104: the letters of 105 (at 30) and 120 (at 50) must stay above the bound.
    assert index.bound(TP, 104) == {0: 30, 1: 7}
    # Committed 110: only 120 is left; partition 0's bound is its offset, 50.
    assert index.bound(TP, 110) == {0: 50, 1: 7}
    # Committed 130: no letter left; the floor — one past the last produced — bounds new ones.
    assert index.bound(TP, 130) == {0: 51, 1: 7}
    assert not index.contains(TP, 120)  # dropped from memory once below the commit
    assert index.bound(TopicPartition("orders", 9), 5) is None  # not indexed: no bound
