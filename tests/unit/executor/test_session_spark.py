"""``SessionFormats``' half for ``spark_on_demand``: whether executors open a SparkSession,
and which executors are replaced when that changes (the process side is in
tests/integration/executor/test_formats.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.executor.formats import SessionFormats
from daemon.executor.info import ExecutorState


@dataclass
class Executor:
    ident: int
    state: ExecutorState
    spark: bool = False
    formats: frozenset[str] = frozenset()


@dataclass
class Owner:
    executors: list[Executor]
    recycled: list[tuple[int, str, str | None]] = field(default_factory=list)

    def live(self) -> list[Executor]:
        return self.executors

    def recycle(self, ex: Executor, reason: str, *, when: str | None = None) -> None:
        self.recycled.append((ex.ident, reason, when))


def test_asking_for_spark_replaces_idle_and_starting_executors_now() -> None:
    idle, starting, busy = (
        Executor(1, ExecutorState.IDLE),
        Executor(2, ExecutorState.STARTING),
        Executor(3, ExecutorState.BUSY),
    )
    owner = Owner([idle, starting, busy])
    sessions = SessionFormats(frozenset(), owner, spark=False)  # type: ignore[arg-type]
    assert not sessions.spark and not sessions.lacks(idle)  # type: ignore[arg-type]

    sessions.load(frozenset())  # a write that needs no session: nothing changes
    assert owner.recycled == [] and not sessions.spark

    sessions.load(frozenset(), spark=True)
    assert sessions.spark
    assert [i for i, _, _ in owner.recycled] == [1, 2]  # the busy one when its write ends
    assert owner.recycled[0][1:] == ("it opened no SparkSession", "to open SparkSessions")
    assert sessions.lacks(busy)  # type: ignore[arg-type]
    assert not sessions.lacks(Executor(4, ExecutorState.IDLE, spark=True))  # type: ignore[arg-type]

    sessions.load(frozenset(), spark=True)  # once is enough
    assert len(owner.recycled) == 2


def test_a_table_format_implies_a_session() -> None:
    owner = Owner([Executor(1, ExecutorState.IDLE)])
    sessions = SessionFormats(frozenset(), owner, spark=False)  # type: ignore[arg-type]
    sessions.load(frozenset({"delta"}))
    assert sessions.spark and sessions.wanted == {"delta"}
    assert owner.recycled == [
        (1, "it opened no SparkSession (nor table format delta)", "to open SparkSessions")
    ]
    assert SessionFormats(frozenset({"iceberg"}), owner, spark=False).spark  # type: ignore[arg-type]


def test_a_pool_without_spark_never_asks_for_it() -> None:
    owner = Owner([Executor(1, ExecutorState.IDLE)])
    sessions = SessionFormats(frozenset(), owner, spark=True, able=False)  # type: ignore[arg-type]
    sessions.load(frozenset({"delta"}), spark=True)
    assert not sessions.spark and sessions.wanted == {"delta"}
    # Only the format is missing: that one is still replaced, as before.
    assert owner.recycled == [(1, "its session lacks table format delta", "to load table formats")]
