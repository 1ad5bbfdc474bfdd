"""Where the connectors' states sit on ``main``'s snapshots (fakes of Iceberg's Java objects,
as py4j shows them: ``summary().keySet().toArray()``, ``timestampMillis()``, ``parentId()``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daemon.connectors.iceberg import state, table


@dataclass
class _Keys:
    names: list[str]

    def toArray(self) -> list[str]:
        return self.names


class _Summary(dict[str, str]):
    def keySet(self) -> _Keys:
        return _Keys(list(self))


@dataclass
class _Snapshot:
    ident: int
    at: int
    parent: int | None
    summary_: dict[str, str] = field(default_factory=dict)

    def summary(self) -> _Summary:
        return _Summary(self.summary_)

    def timestampMillis(self) -> int:
        return self.at

    def parentId(self) -> int | None:
        return self.parent


class _Table:
    def __init__(self, snapshots: list[_Snapshot]) -> None:
        self.by_id = {s.ident: s for s in snapshots}
        self.head = snapshots[-1]

    def currentSnapshot(self) -> _Snapshot:
        return self.head

    def snapshot(self, ident: int) -> Any:
        return self.by_id.get(ident)


def test_each_connectors_newest_carrier_with_its_depth_and_time() -> None:
    a, b = state.key("a"), state.key("b")
    snaps = [
        _Snapshot(1, 1000, None, {a: "old", b: "old"}),
        _Snapshot(2, 2000, 1, {a: "new"}),
        _Snapshot(3, 3000, 2, {"total-data-files": "4"}),  # a compaction: no state
    ]
    assert table.state_carriers(_Table(snaps)) == {a: (1, 2000), b: (2, 1000)}
    expired = _Table(snaps)
    del expired.by_id[1]  # the walk ends where the history was expired
    assert table.state_carriers(expired) == {a: (1, 2000)}
