"""The group protocol's bytes: round trips, and hostile bytes that must end in ProtocolError."""

from __future__ import annotations

import contextlib
import json
import random

import pytest

from daemon.cluster.protocol import (
    Allocation,
    Assignment,
    AssignmentError,
    MemberMetadata,
    ProtocolError,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from daemon.structs import TaskId

ALLOC = Allocation.of(["s3", "pg"], [TaskId("s3", 0), TaskId("s3", 11), TaskId("pg", 2)])


def test_metadata_round_trips() -> None:
    meta = MemberMetadata("http://w1:8083", 42, ALLOC)
    assert decode_metadata(encode_metadata(meta)) == meta
    said = MemberMetadata("http://w1:8083", 42, ALLOC, ("configs", "offsets", "status"))
    assert decode_metadata(encode_metadata(said)) == said


def test_assignment_round_trips() -> None:
    a = Assignment(
        AssignmentError.NONE, "m-1", "http://w1:8083", 7, ALLOC, Allocation.of(["x"]), 3000
    )
    assert decode_assignment(encode_assignment(a)) == a
    mismatch = Assignment(AssignmentError.CONFIG_MISMATCH, "m-1", "http://w1:8083", 9)
    assert decode_assignment(encode_assignment(mismatch)) == mismatch
    foreign = Assignment(
        AssignmentError.FOREIGN_STORAGE, "m-1", "u", 9, storage=("configs", "offsets", "status")
    )
    assert decode_assignment(encode_assignment(foreign)) == foreign


def _meta(**change: object) -> bytes:
    body = json.loads(encode_metadata(MemberMetadata("u", 1, ALLOC)))
    body.update(change)
    return json.dumps(body).encode()


def _assignment(**change: object) -> bytes:
    a = Assignment(AssignmentError.NONE, "m", "u", 1, ALLOC)
    body = json.loads(encode_assignment(a))
    body.update(change)
    return json.dumps(body).encode()


HOSTILE = [
    b"",
    b"\x00\x01\x02",
    b"\xff\xfe not utf-8",
    b"[1, 2]",
    b"null",
    b"[" * 100_000,  # deep nesting: RecursionError inside json
    _meta(version=2),
    _meta(version=True),
    _meta(url=5),
    _meta(url="x" * 5000),
    _meta(config_offset=-1),
    _meta(config_offset=1.5),
    _meta(config_offset=True),
    _meta(allocation=None),
    _meta(allocation={"connectors": "abc", "tasks": []}),
    _meta(allocation={"connectors": [], "tasks": [["c", -1]]}),
    _meta(allocation={"connectors": [], "tasks": [["c"]]}),
    _meta(allocation={"connectors": [], "tasks": [[1, 2]]}),
    _meta(allocation={"connectors": [7], "tasks": []}),
    _meta(allocation={"connectors": ["c"] * 100_001, "tasks": []}),
    _meta(storage="configs"),
    _meta(storage=["a", "b", "c", "d"]),
    _meta(storage=[1, 2, 3]),
    _meta(storage=["x" * 5000]),
]


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_metadata_raises_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_metadata(data)


HOSTILE_ASSIGNMENTS = [
    b"",
    b"{}",
    _assignment(error="REBALANCE_NEEDED"),
    _assignment(error=None),
    _assignment(leader=None),
    _assignment(delay_ms=-5),
    _assignment(assigned=[]),
    _assignment(revoked={"connectors": []}),
    _meta(),  # metadata is not an assignment
]


@pytest.mark.parametrize("data", HOSTILE_ASSIGNMENTS, ids=range(len(HOSTILE_ASSIGNMENTS)))
def test_hostile_assignment_raises_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_assignment(data)


def test_random_bytes_never_raise_anything_else() -> None:
    rng = random.Random(14)
    good = encode_metadata(MemberMetadata("u", 1, ALLOC))
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        for decode in (decode_metadata, decode_assignment):
            with contextlib.suppress(ProtocolError):
                decode(bytes(data))
