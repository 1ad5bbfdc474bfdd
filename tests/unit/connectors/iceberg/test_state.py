"""IcebergSink's state in snapshot summaries: encoding, fences, commits, offsets changes."""

from __future__ import annotations

import pytest

from daemon.connectors.iceberg import state
from daemon.connectors.iceberg.state import Entry
from daemon.storage.logstate import OffsetsDiverged, ZombieEpoch


def test_round_trip_keeps_every_partition() -> None:
    s = {("a", 0): Entry(10, 2), ("a", 1): Entry(None, 3), ("b.c", 7): Entry(0, 1)}
    assert state.decode(state.encode(s, epoch=3, task=1)) == s
    assert state.decode(None) == {}


def test_commit_continues_and_refuses_gaps_overlaps_and_older_epochs() -> None:
    s = state.commit({}, 1, [["a", 0, 5, 10]], "t")  # no offset yet: any start
    assert s == {("a", 0): Entry(10, 1)}
    s = state.commit(s, 1, [["a", 0, 10, 20]], "t")
    assert s[("a", 0)] == Entry(20, 1)
    with pytest.raises(OffsetsDiverged, match="next offset is 20, this commit starts at 25"):
        state.commit(s, 1, [["a", 0, 25, 30]], "t")
    with pytest.raises(OffsetsDiverged, match="overlap"):
        state.commit(s, 1, [["a", 0, 15, 30]], "t")
    fenced = state.fence(s, 2, [["a", 0]], "t")
    assert fenced[("a", 0)] == Entry(20, 2)
    with pytest.raises(ZombieEpoch, match=r"a-0 is owned by epoch 2; .* epoch 1"):
        state.commit(fenced, 1, [["a", 0, 20, 30]], "t")
    with pytest.raises(ZombieEpoch):
        state.fence(fenced, 1, [["a", 0]], "t")


def test_alter_sets_and_forgets() -> None:
    s = {("a", 0): Entry(20, 2)}
    s = state.alter(s, 2, [["a", 0, None], ["a", 1, 7]], "t")
    assert s == {("a", 0): Entry(None, 2), ("a", 1): Entry(7, 2)}
    assert state.offsets_out(s, [["a", 1], ["a", 9]]) == [["a", 1, 7], ["a", 9, None]]
    with pytest.raises(ZombieEpoch):
        state.alter(s, 1, [["a", 0, 3]], "t")
