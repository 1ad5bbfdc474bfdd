"""IcebergSink's table operations inside an executor, through Iceberg's Java API (py4j).

The compare-and-set (why a commit of a zombie cannot land): Iceberg's plain append re-applies
itself on the newest metadata at commit time and validates nothing, so a stale writer's append
always lands (docs/research/table-formats.md). ``publish`` therefore never appends to
``main``. It

1. reads the state (``state``) from ``main``'s head snapshot S and decides (refuse or go on);
2. points a branch of its own at S, and writes the rows to that branch (Spark's Iceberg
   write; its snapshot's summary carries the new state), or appends the files of an earlier
   attempt / no files (Java ``FastAppend``);
3. fast-forwards ``main`` to the branch and drops the branch, in one ``ManageSnapshots``
   commit. That update is built on the metadata it read and committed with that metadata as
   its base: the catalog's commit is itself a compare-and-set (Hadoop catalog: an exclusive
   create of ``v<N+1>.metadata.json``; REST: the ref assertions; Hive: the metastore lock),
   so it fails (``CommitFailedException``) if anything else committed since, and Iceberg does
   not retry it on newer metadata. ``fastForwardBranch`` also refuses outright when ``main``
   is no longer S (``main is not an ancestor``).

So ``main`` moves only from S to a child of S whose state was decided on S: a fence (a newer
epoch's ``open_table``) or any other commit between 1 and 3 makes 3 fail, and the loop starts
again from 1, where the zombie meets its ``ZombieEpoch``. Measured here: a zombie's branch
fast-forward after a fence fails with "main is not an ancestor"; a ManageSnapshots built
before an unrelated property change fails with "Table metadata refresh is required".

Any other commit in between (a sibling task, compaction) costs a retry: the written files are
re-appended to a new branch at the new head (no rewrite).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from daemon.connectors.iceberg import state as state_module
from daemon.connectors.iceberg.catalog import Catalog
from daemon.connectors.tables import sparktypes
from daemon.connectors.tables.names import quote
from daemon.connectors.tables.timeparts import transform_of

#: Attempts of ``publish`` when other commits keep landing between its read and its swap.
ATTEMPTS = 20
_MISSING = ("NoSuchTableException", "TABLE_OR_VIEW_NOT_FOUND")
_RACES = ("CommitFailedException", "Cannot fast-forward", "Ref does not exist")


def load(spark: Any, catalog: Catalog) -> Any | None:
    """The ``org.apache.iceberg.Table`` (fresh metadata), or ``None`` if it does not exist."""
    jvm = spark._jvm
    try:
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, catalog.table
        )
    except Exception as exc:
        if any(hint in str(exc) for hint in _MISSING):
            return None
        raise
    table.refresh()
    return table


def create(spark: Any, catalog: Catalog, df: Any, partition_by: list[str]) -> Any:
    """Create the table with ``df``'s columns, partitioned by ``partition_by`` (identity, or
    Iceberg's hidden ``years``/``months``/``days``/``hours`` for ``year(col)``…), if it does
    not exist yet (another task may create it first: that one is used). The table always has
    a snapshot on ``main`` afterwards, for ``publish`` to branch from."""

    table = load(spark, catalog)
    if table is None:
        if catalog.conf.get(f"spark.sql.catalog.{catalog.name}.type") != "hadoop":
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.{quote(catalog.namespace)}")
        # accept-any-schema: lets a write with ``merge-schema`` add columns.
        writer = (
            df.limit(0)
            .writeTo(catalog.table)
            .using("iceberg")
            .tableProperty("write.spark.accept-any-schema", "true")
        )
        if partition_by:
            writer = writer.partitionedBy(*[_partition_expression(c) for c in partition_by])
        try:
            writer.create()
        except Exception as exc:
            if "already exists" not in str(exc).lower():
                raise
        table = load(spark, catalog)
        assert table is not None
    if table.currentSnapshot() is None:
        table.newFastAppend().commit()
        table.refresh()
    return table


def _partition_expression(item: str) -> Any:
    """A column, or Iceberg's hidden transform of one for ``day(col)`` and the like."""
    from pyspark.sql import functions as F

    found = transform_of(item)
    if found is None:
        return F.col(item)
    transform, column = found
    # Spark 4 moved the partition transforms to functions.partitioning (the old names warn).
    functions = getattr(F, "partitioning", F)
    return getattr(functions, f"{transform}s")(F.col(column))


def _newest(table: Any, key: str) -> tuple[str | None, int]:
    """The value of ``key`` in the newest snapshot of ``main`` that carries it, and how many
    snapshots back that one is (0: the head)."""
    snap = table.currentSnapshot()
    depth = 0
    while snap is not None:
        value = snap.summary().get(key)
        if value is not None:
            return str(value), depth
        parent = snap.parentId()
        snap = None if parent is None else table.snapshot(parent)
        depth += 1
    return None, depth


def read_state(table: Any, connector: str) -> tuple[state_module.State, int]:
    """``connector``'s state from the newest snapshot of ``main`` that carries it, and how
    many snapshots back that one is (0: the head)."""
    value, depth = _newest(table, state_module.key(connector))
    return state_module.decode(value), depth


def read_owners(table: Any) -> state_module.Owners:
    """Which connector owns each partition, as ``main``'s head has it (``state.owners_of``)."""

    def summaries() -> Iterator[dict[str, str]]:
        snap = table.currentSnapshot()
        while snap is not None:
            summary = snap.summary()
            yield {str(k): str(summary.get(k)) for k in summary.keySet().toArray()}
            parent = snap.parentId()
            snap = None if parent is None else table.snapshot(parent)

    return state_module.owners_of(summaries())


def state_carriers(table: Any) -> dict[str, tuple[int, int]]:
    """Per state key found on ``main``: how many snapshots back its newest carrier is, and that
    snapshot's commit time (epoch milliseconds)."""
    found: dict[str, tuple[int, int]] = {}
    snap, depth = table.currentSnapshot(), 0
    while snap is not None:
        for name in list(snap.summary().keySet().toArray()):
            if str(name).startswith(state_module.KEY_PREFIX):
                found.setdefault(str(name), (depth, int(snap.timestampMillis())))
        parent = snap.parentId()
        snap = None if parent is None else table.snapshot(parent)
        depth += 1
    return found


def _aligned(spark: Any, df: Any, table: Any) -> Any:
    """``df`` as ``table``'s schema takes it (``sparktypes.aligned``): Iceberg refuses a write
    whose columns come in another order, and a struct must be written whole."""
    from pyspark.sql.types import StructType

    struct = spark._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(table.schema())
    return sparktypes.aligned(df, StructType.fromJson(json.loads(struct.json())))


def publish(
    spark: Any,
    catalog: Catalog,
    table: Any,
    *,
    decide: Callable[[Any], Mapping[str, str]],
    df: Any = None,
    merge_schema: bool = False,
    hook: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Publish one snapshot on ``main`` whose summary properties are ``decide(table)``,
    decided on ``main``'s head (``read_state``, ``read_owners``), and whose data is ``df``'s
    rows (none without), by compare-and-set (module docstring). ``decide`` raises to refuse.
    ``hook``: called once just before the first swap (tests put a newer incarnation's fence
    there). ``{"snapshot": id, "attempts": n, "files": n}``."""
    # The name carries its birth time, so upkeep can tell a killed commit's branch from a
    # live one (``stale_branches``).
    branch = f"connectd_{int(time.time() * 1000)}_{uuid.uuid4().hex[:8]}"
    written: Any = None  # the snapshot of the Spark write (its files are re-used on a retry)
    files: list[Any] = []
    for attempt in range(1, ATTEMPTS + 1):
        table.refresh()
        head = table.currentSnapshot().snapshotId()
        try:
            decided = decide(table)
        except BaseException:
            _drop_branch(table, branch)
            raise
        try:
            if written is not None and not files:
                # Read only when needed: listing a snapshot's files reads its manifests.
                files = list(written.addedDataFiles(table.io()))
            manage = table.manageSnapshots()
            if table.refs().containsKey(branch):
                manage.replaceBranch(branch, head).commit()
            else:
                manage.createBranch(branch, head).commit()
            if written is None and df is not None:
                writer = _aligned(spark, df, table).writeTo(f"{catalog.table}.branch_{branch}")
                for key, value in decided.items():
                    writer = writer.option(f"snapshot-property.{key}", value)
                if merge_schema:
                    writer = writer.option("merge-schema", "true")
                writer.append()
                table.refresh()
                written = table.snapshot(table.refs().get(branch).snapshotId())
            else:
                append = table.newFastAppend().toBranch(branch)
                for key, value in decided.items():
                    append = append.set(key, value)
                for data_file in files:
                    append.appendFile(data_file)
                append.commit()
            if hook is not None:
                hook()
                hook = None
            table.refresh()
            published = int(table.refs().get(branch).snapshotId())
            table.manageSnapshots().fastForwardBranch("main", branch).removeBranch(branch).commit()
        except Exception as exc:
            if not any(race in str(exc) for race in _RACES):
                _drop_branch(table, branch)
                raise
            continue
        added = 0 if written is None else int(written.summary().get("added-data-files") or 0)
        return {"snapshot": published, "attempts": attempt, "files": added}
    _drop_branch(table, branch)
    raise RuntimeError(
        f"{catalog.table}: {ATTEMPTS} attempts to publish lost to other commits; retrying"
    )


def _drop_branch(table: Any, branch: str) -> None:
    """Best effort: a branch left by a failed attempt keeps its snapshots from expiry."""
    try:
        table.refresh()
        if table.refs().containsKey(branch):
            table.manageSnapshots().removeBranch(branch).commit()
    except Exception:  # the next upkeep drops it (``stale_branches``)
        pass


def stale_branches(table: Any, older_than_ms: int) -> list[str]:
    """The sink's branches (``connectd_<born ms>_*``) older than ``older_than_ms``: left by
    commits killed before their swap."""
    now = int(time.time() * 1000)
    out = []
    for name in map(str, table.refs().keySet().toArray()):
        parts = name.split("_")
        born = parts[1] if len(parts) == 3 and parts[0] == "connectd" else ""
        if born.isdigit() and now - int(born) > older_than_ms:
            out.append(name)
    return out
