"""DeltaSink's fence and commit inside an executor: one Delta transaction each, deciding on
the transactions it read (``jobs.py`` says what exactly once rests on; ``txns.py`` what the
transactions say). Imports only the standard library and ``daemon`` modules at import time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemon import errors
from daemon.connectors.delta import log as dlog
from daemon.connectors.delta import txns as dtxns
from daemon.connectors.delta.txns import EPOCH_SHIFT, app_id, epoch_of, parse_app_id
from daemon.connectors.tables import sparktypes
from daemon.connectors.tables.jobs import partitions_owned
from daemon.storage.logstate import OffsetsDiverged, TableLost, ZombieEpoch

#: Commits that lost a race against another task's schema change or table creation are
#: written again this many times (their files were never part of the table).
RETRIES = 3
_CONFLICTS = (
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)


def now_ms() -> int:
    return int(time.time() * 1000)


def owned(txns: Sequence[dtxns.Txn], connector: str) -> dict[str, int]:
    """``connector``'s app ids and versions of the partitions it owns."""
    mine = {t.app: t.version for t in txns if parse_app_id(t.app, connector)}
    owned = dtxns.owners(txns)
    return {a: v for a, v in mine.items() if owned.get(parse_app_id(a, connector)) == connector}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Claimed:
    """What a transaction found about its partitions: those taken over from a connector in
    ``takeover`` (and from whom), and the next version of each partition's claim app id."""

    taken: dict[tuple[str, int], str]
    serials: dict[str, int]

    def sets(self, when: int) -> dict[str, tuple[int, int]]:
        return {app: (version, when) for app, version in self.serials.items()}


def claim(
    txn: Any,
    txns: Sequence[dtxns.Txn],
    connector: str,
    tps: Collection[tuple[str, int]],
    takeover: Collection[str],
    where: str,
) -> Claimed:
    """Refuse ``tps`` if another connector, not in ``takeover``, owns one
    (``PartitionsOwned``). Reads, inside ``txn``, every connector's transaction of ``tps``
    and their claim app ids (``txns.claim_app``), which the commit sets again: any other
    fence or commit of them meanwhile makes Delta refuse ``txn``."""
    for held in dtxns.of_partitions(txns, tps).values():
        for _, t in held:
            txn.txnVersion(t.app)
    serials = {}
    for tp in tps:
        app = dtxns.claim_app(*tp)
        serials[app] = max(int(txn.txnVersion(app)), -1) + 1
    taken = {}
    for tp, owner in dtxns.owners(txns, tps).items():
        if owner == connector:
            continue
        if owner not in takeover:
            raise partitions_owned(connector, *tp, owner, where)
        taken[tp] = owner
    return Claimed(taken, serials)


def _conflict(exc: Exception) -> bool:
    """Another transaction set an app id this one read (see ``claim``)."""
    text = str(exc)
    return "ConcurrentTransactionException" in text or "DELTA_CONCURRENT_TRANSACTION" in text


def again_on_conflict(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()`` (one Delta transaction), done again when it lost a race to another
    transaction of its partitions (``claim``): the next one decides on what that committed."""
    for attempt in range(RETRIES + 1):
        try:
            return work()
        except Exception as exc:
            if attempt == RETRIES or not _conflict(exc):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def fence(
    spark: Any,
    path: str | None,
    connector: str,
    task: int,
    epoch: int,
    partitions: Sequence[Sequence[Any]],
    takeover: Collection[str],
) -> dict[str, Any]:
    """``partitions`` fenced with ``epoch`` in one transaction (none on a table that does not
    exist yet), their offsets read back."""
    apps = {app_id(connector, str(t), int(p)): (str(t), int(p)) for t, p in partitions}
    log = None if path is None else dlog.delta_log(spark, path)
    if log is None or path is None or not log.tableExists():
        return {
            "newest_epoch": -1,
            "fenced": False,
            "exists": False,
            "offsets": [[t, p, None] for t, p in apps.values()],
            "state": dict.fromkeys(apps, -1),
            "schema": None,
            "partition_by": None,
        }
    txn = log.startTransaction()
    txns = dlog.transactions(txn.snapshot())
    claimed = claim(txn, txns, connector, list(apps.values()), takeover, path)
    versions = {app: int(txn.txnVersion(app)) for app in apps}
    newest = max((epoch_of(v) for v in versions.values()), default=-1)
    if newest > epoch:
        return {"newest_epoch": newest, "fenced": False}
    # A partition taken over continues from its owner's offsets (a commit of the owner in
    # flight read the claim app id this fence sets: Delta refuses it).
    theirs, taken = {t.app: t for t in txns}, claimed.taken
    previous = {a: theirs[app_id(taken[tp], *tp)] for a, tp in apps.items() if tp in taken}
    lookup = {a: v for a, v in versions.items() if v >= 0 and a not in previous}
    lookup.update({t.app: t.version for t in previous.values()})
    found = dlog.committed_offsets(spark, log, path, lookup)
    offsets = {a: found.get(previous[a].app if a in previous else a) for a in apps}
    fenced = {a: v if epoch_of(v) == epoch else epoch << EPOCH_SHIFT for a, v in versions.items()}
    changed = {
        a: [fenced[a], offsets.get(a)] for a in apps if fenced[a] != versions[a] or a in previous
    }
    if changed:
        when = dtxns.stamp(txns, list(apps.values()), now_ms())
        sets = {**{a: (fenced[a], when) for a in changed}, **claimed.sets(when)}
        meta = dtxns.metadata(connector, task, epoch, "fence", changed)
        dlog.commit_actions(spark, txn, [], sets, meta, partition_by=None)
    metadata = txn.metadata()
    return {
        "newest_epoch": newest,
        "fenced": bool(changed),
        "exists": True,
        "offsets": [[t, p, offsets.get(a)] for a, (t, p) in apps.items()],
        "state": fenced,
        "schema": dlog.schema_of_struct(metadata.schema()),
        "partition_by": list(dlog.to_list(metadata.partitionColumns())),
    }


def commit_rows(
    spark: Any,
    batch: Any,
    path: str,
    connector: str,
    task: int,
    epoch: int,
    ranges: Sequence[Sequence[Any]],
    state: Mapping[str, int],
    partition_by: Sequence[str],
    merge_schema: bool,
    kind: str,
    extra: Mapping[str, Any],
    generated: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    began = time.monotonic()
    apps = {app_id(connector, str(t), int(p)): (str(t), int(p), int(e)) for t, p, _, e in ranges}
    tps = [(t, p) for t, p, _ in apps.values()]
    rows = 0 if batch is None else int(batch.num_rows)
    df = batch.df if rows else None
    for attempt in range(RETRIES + 1):
        log = dlog.delta_log(spark, path)
        expected = any(int(v) >= 0 for v in state.values())
        # DeltaLog.forTable is cached: its tableExists() answers from the last snapshot read,
        # so the table's state is read anew before deciding it is gone.
        if expected and int(dlog.latest(spark, log).version()) < 0:
            raise TableLost(
                f"the Delta table at {path} is gone (its _delta_log was deleted) while this"
                " task had committed to it; creating it again would start it over silently;"
                " nothing was committed"
            )
        if df is not None:
            _create_or_evolve(spark, log, path, df, partition_by, merge_schema, generated)
            log = dlog.delta_log(spark, path)
        elif not log.tableExists():
            # Nothing to write and no table to hold the offsets: they stay in the task only
            # (the records they cover are read and left out again after a restart).
            return {"state": dict(state), "rows": 0, "files": 0, "seconds": 0.0, "schema": None}
        txn = log.startTransaction()
        txns = dlog.transactions(txn.snapshot())
        claimed = claim(txn, txns, connector, tps, (), path)
        versions = {app: int(txn.txnVersion(app)) for app in apps}
        _refuse_newer(versions, epoch, {a: v[:2] for a, v in apps.items()})
        for app, version in versions.items():
            if version != int(state.get(app, -1)):
                t, p, _ = apps[app]
                raise OffsetsDiverged(
                    f"{t}-{p}: the Delta table's transaction for this partition is at version "
                    f"{version}, this task expected {state.get(app, -1)}: another commit landed "
                    "since the task read the table; it must read its offsets again"
                )
        new = {a: dtxns.next_version(v, epoch) for a, v in versions.items()}
        entries = {a: [new[a], apps[a][2]] for a in apps}
        meta = dtxns.metadata(connector, task, epoch, kind, entries, **extra)
        when = dtxns.stamp(txns, tps, now_ms())
        try:
            actions = [] if df is None else dlog.to_list(txn.writeFiles(_aligned(spark, df, txn)))
            sets = {**{a: (v, when) for a, v in new.items()}, **claimed.sets(when)}
            version = dlog.commit_actions(
                spark, txn, actions, sets, meta, partition_by=partition_by
            )
        except Exception as exc:
            # Another fence or commit of these partitions landed meanwhile: decide again on
            # it (a newer epoch, another connector, moved offsets are refused by name).
            if attempt < RETRIES and (_conflict(exc) or any(c in str(exc) for c in _CONFLICTS)):
                continue
            if _conflict(exc):
                raise ZombieEpoch(
                    f"{_names(apps)}: another incarnation committed these partitions while this "
                    f"commit (epoch {epoch}) was in flight; refused"
                ) from None
            raise
        return {
            "state": {**state, **new},
            "rows": rows,
            "files": sum(1 for a in actions if a.dataChange()),
            "seconds": time.monotonic() - began,
            "schema": dlog.schema_of_struct(txn.metadata().schema()),
            "snapshot": int(version),
        }
    raise AssertionError("unreachable")  # pragma: no cover


def _refuse_newer(
    versions: Mapping[str, int], epoch: int, apps: Mapping[str, tuple[str, int]]
) -> None:
    newer = {a: epoch_of(v) for a, v in versions.items() if epoch_of(v) > epoch}
    if newer:
        owned = ", ".join(
            f"{apps[a][0]}-{apps[a][1]} (epoch {e})" for a, e in sorted(newer.items())
        )
        raise ZombieEpoch(
            f"a newer incarnation owns {owned} in the Delta table; this one has epoch {epoch}: "
            "refused, the table is unchanged"
        )


def _create_or_evolve(
    spark: Any,
    log: Any,
    path: str,
    df: Any,
    partition_by: Sequence[str],
    merge_schema: bool,
    generated: Mapping[str, Sequence[str]],
) -> None:
    """Create the table from the batch's schema (``dlog.create_table``), or add the batch's
    new columns (schema evolution on); both are metadata-only commits."""
    if not log.tableExists():
        dlog.create_table(spark, df, partition_by, generated, path=path)
        return
    empty = df.limit(0).write.format("delta").mode("append")
    metadata = dlog.latest(spark, log).metadata()
    table_parts = list(dlog.to_list(metadata.partitionColumns()))
    if partition_by and list(partition_by) != table_parts:
        raise errors.ConfigError(
            f"partition.by: the Delta table at {path} is partitioned by {table_parts or 'nothing'},"
            f" not {list(partition_by)}; partitioning cannot change"
        )
    table_types = dict(dlog.schema_of_struct(metadata.schema()))
    batch = dlog.schema_of_df(df.schema)
    differences = [
        sparktypes.difference(c, t, table_types[c]) for c, t in batch if c in table_types
    ]
    mismatched = [
        f"{d.other[0]}: {d.other[1]} in the batch, {d.other[2]} in the table"
        for d in differences
        if d.other is not None
    ]
    if mismatched:
        raise errors.RecordRejected(
            "column types differ from the Delta table's (a column's type never changes; a"
            " struct may only gain fields): " + "; ".join(mismatched)
        )
    new = [c for c, _ in batch if c not in table_types]
    new += [path for d in differences for path in d.new]
    if not new:
        return
    if not merge_schema:
        raise errors.RecordRejected(
            f"columns {new} are not in the Delta table and schema.evolution=false"
        )
    empty.option("mergeSchema", "true").save(path)


def _aligned(spark: Any, df: Any, txn: Any) -> Any:
    """``df`` with the table's columns in the table's order; columns it lacks are null, and
    so are the fields its structs lack (``sparktypes.aligned``)."""
    from pyspark.sql.types import StructType

    table = StructType.fromJson(json.loads(txn.metadata().schema().json()))
    return sparktypes.aligned(df, table)._jdf


def _names(apps: Mapping[str, Sequence[Any]]) -> str:
    return ", ".join(f"{v[0]}-{v[1]}" for v in apps.values())
