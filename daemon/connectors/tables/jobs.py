"""What every table format's executor jobs share: how a job reports an error with a meaning.

The pool reports any exception a job raises as a retriable ``WriteFailed`` (the executor may
have been left in a bad state). A refusal means more than that: ``ZombieEpoch`` must not be
retried, ``RecordRejected`` names records, ``ConfigError`` a setting. So a job runs its work
through ``job``, which returns such an error as ``{"error": [class name, message]}``, and the
task's side turns it back into its class with ``raise_for``.

Executor processes import this module (Parquet's Hadoop jobs, Delta's, Iceberg's): standard
library and ``daemon.errors`` (with the ``daemon.structs`` it imports) only at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from daemon import errors
from daemon.structs import TopicPartition


def job(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()``'s result, or the ``daemon.errors.ConnectdError`` it raised as
    ``{"error": [class name, message]}`` (any other exception propagates: the pool reports
    it as a retriable ``WriteFailed`` and replaces the executor if need be)."""
    try:
        return work()
    except errors.ConnectdError as exc:
        return {"error": [type(exc).__name__, str(exc)]}


def raise_for(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """``result`` of a job, or the error it returned raised as its ``daemon.errors`` class."""
    error = result.get("error")
    if error is None:
        return result
    name, message = error
    # The commit log's refusals (``ZombieEpoch`` …) are subclasses of ``CommitRejected`` that
    # live beside its state; their class decides whether a restart may help.
    from daemon.storage import logstate

    cls = getattr(errors, name, None) or getattr(logstate, name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.ConnectdError)):
        cls = errors.WriteFailed
    raise cls(message)


def partitions_owned(
    connector: str, topic: str, partition: int, other: str, where: str
) -> errors.ConnectdError:
    """The refusal of a claim or commit of a partition another connector owns in a table
    (``daemon.storage.logstate.PartitionsOwned``, worded as the commit log words it)."""
    from daemon.storage.logstate import PartitionsOwned

    return PartitionsOwned(
        f"{connector} may not write {topic}-{partition} to table {where}: connector {other!r} "
        "owns it; two connectors must not write the same partitions of one table: give one "
        f"its own table, or, if {connector} replaces {other!r}, set takeover={other} on "
        f"{connector}"
    )


def offsets_out(offsets: Mapping[TopicPartition, int | None]) -> list[list[Any]]:
    """Offsets as jobs take and return them: ``[[topic, partition, offset], ...]``."""
    return [[tp.topic, tp.partition, o] for tp, o in sorted(offsets.items())]


def offsets_in(items: Iterable[Sequence[Any]]) -> dict[TopicPartition, int]:
    """``offsets_out``'s form back, without the partitions that have none."""
    return {TopicPartition(str(t), int(p)): int(o) for t, p, o in items if o is not None}
