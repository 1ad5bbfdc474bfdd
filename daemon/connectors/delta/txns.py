"""connectd's application transactions in a Delta table (``SetTransaction``: app id, version,
``lastUpdated``), and what they say: offsets' versions, epochs, and which connector owns a
partition. Pure data: the jobs read them through Delta (``log.py``), ``existing.py`` from the
log's files, without Spark.

- app id ``connectd/<connector>/<topic>/<partition>``: per partition, not per task, because a
  rebalance moves partitions between tasks and the fence must follow the partition;
- version ``epoch << 40 | n``: it grows with the incarnation's epoch first, then with each of
  its commits, so a newer owner's versions are above every older owner's;
- ``lastUpdated`` (milliseconds): every transaction the sink sets for a partition is stamped
  later than every other connector's of that partition (``stamp``), so the partition's owner
  is the connector whose transaction has the newest stamp (``owners``): the one that fenced
  or committed it last, as in ParquetSink's commit log;
- ``connectd-partition/<topic>/<partition>`` (``claim_app``), one per partition whatever the
  connector: every fence and commit of the partition reads it and sets it (a counter), so any
  two of them that overlap in time conflict in Delta, and the later one decides again on what
  the earlier one committed. Without it, the first commits of two connectors into a new table
  would be blind appends that Delta lets both land.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

EPOCH_SHIFT = 40
PREFIX = "connectd/"

TP = tuple[str, int]


@dataclass(frozen=True)
class Txn:
    """One application transaction of the table's snapshot."""

    app: str
    version: int
    updated: int  # lastUpdated, milliseconds (0: none)


def app_id(connector: str, topic: str, partition: int) -> str:
    return f"{PREFIX}{connector}/{topic}/{partition}"


def split_app_id(app: str) -> tuple[str, str, int] | None:
    """``(connector, topic, partition)`` of any connector's app id, else None (a topic has no
    ``/``; a connector's name may)."""
    if not app.startswith(PREFIX):
        return None
    rest, _, partition = app[len(PREFIX) :].rpartition("/")
    connector, _, topic = rest.rpartition("/")
    if not connector or not topic or not partition.isdigit():
        return None
    return connector, topic, int(partition)


def parse_app_id(app: str, connector: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of one of ``connector``'s app ids, else None."""
    found = split_app_id(app)
    return None if found is None or found[0] != connector else (found[1], found[2])


def claim_app(topic: str, partition: int) -> str:
    return f"connectd-partition/{topic}/{partition}"


def epoch_of(version: int) -> int:
    return version >> EPOCH_SHIFT if version >= 0 else -1


def next_version(version: int, epoch: int) -> int:
    if epoch_of(version) == epoch:
        return version + 1
    return (epoch << EPOCH_SHIFT) + 1


def of_partitions(txns: Iterable[Txn], tps: Collection[TP]) -> dict[TP, list[tuple[str, Txn]]]:
    """Per partition of ``tps``, every connector's transaction of it."""
    out: dict[TP, list[tuple[str, Txn]]] = {tp: [] for tp in tps}
    for txn in txns:
        found = split_app_id(txn.app)
        if found is not None and (found[1], found[2]) in out:
            out[(found[1], found[2])].append((found[0], txn))
    return out


def owners(txns: Iterable[Txn], tps: Collection[TP] | None = None) -> dict[TP, str]:
    """Per partition (of ``tps``; all without), the connector that owns it: the one whose
    transaction of it has the newest stamp."""
    best: dict[TP, tuple[int, str, str]] = {}
    for txn in txns:
        found = split_app_id(txn.app)
        if found is None or (tps is not None and (found[1], found[2]) not in tps):
            continue
        tp = (found[1], found[2])
        rank = (txn.updated, txn.app, found[0])
        if tp not in best or rank > best[tp]:
            best[tp] = rank
    return {tp: connector for tp, (_, _, connector) in best.items()}


def stamp(txns: Iterable[Txn], tps: Collection[TP], now_ms: int) -> int:
    """A ``lastUpdated`` later than every transaction of ``tps``' partitions (and ``now``)."""
    newest = max((t.updated for ts in of_partitions(txns, tps).values() for _, t in ts), default=0)
    return max(now_ms, newest + 1)


def metadata(
    connector: str,
    task: int,
    epoch: int,
    kind: str,
    entries: Mapping[str, Sequence[Any]],
    **extra: Any,
) -> str:
    """A commit's ``userMetadata``: every partition's version and next offset (and ``extra``:
    a skip's gap and reason)."""
    return json.dumps(
        {
            "connectd": 1,
            "kind": kind,
            "connector": connector,
            "task": task,
            "epoch": epoch,
            "partitions": {a: list(v) for a, v in sorted(entries.items())},
            **extra,
        },
        separators=(",", ":"),
    )


def parse_metadata(user_metadata: str | None) -> dict[str, tuple[int, Any]]:
    if not user_metadata:
        return {}
    try:
        meta = json.loads(user_metadata)
        return {str(a): (int(v[0]), v[1]) for a, v in meta["partitions"].items()}
    except (ValueError, KeyError, TypeError, IndexError):
        return {}  # another writer's metadata
