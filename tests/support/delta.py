"""Delta tables from a test, never through the daemon: a plain-Python read of the log's commit
info (progress while a test runs), delta-rs (``deltalake``) for the rows, and a session pool
whose executors carry the Delta jars (Spark's own reader, and the jobs run directly)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.spark import ThreadedPool


class DeltaCommits:
    """Next offset per connectd app id (``connectd/<connector>/<topic>/<partition>``) as the
    table's JSON commits record them in ``commitInfo.userMetadata`` (newest wins). Each call
    reads only the commits written since the last one (a long run's log is read once); a
    commit file is complete once it exists (Delta publishes it whole)."""

    def __init__(self, table: Path) -> None:
        self.log = table / "_delta_log"
        self.read: set[str] = set()
        self.offsets: dict[str, int | None] = {}

    def __call__(self) -> dict[str, int | None]:
        if not self.log.is_dir():
            return self.offsets
        for path in sorted(self.log.glob("[0-9]" * 20 + ".json")):
            if path.name in self.read:
                continue
            try:
                lines = path.read_text().splitlines()
            except OSError:
                continue
            self.read.add(path.name)
            for line in lines:
                info = json.loads(line).get("commitInfo") if line.strip() else None
                if not info or not info.get("userMetadata"):
                    continue
                try:
                    meta = json.loads(info["userMetadata"])
                except ValueError:
                    continue
                for app, (_, offset) in meta.get("partitions", {}).items():
                    self.offsets[app] = offset
        return self.offsets

    def committed(self) -> int:
        """Offsets committed so far, summed over partitions (each starting at 0)."""
        return sum(o or 0 for o in self().values())


def committed_offsets(table: Path) -> dict[str, int | None]:
    """``DeltaCommits`` read once, from the first commit."""
    return DeltaCommits(table)()


def committed(table: Path) -> int:
    """Offsets committed so far, summed over partitions (each starting at 0)."""
    return DeltaCommits(table).committed()


def rows_with_deltalake(table: Path, columns: list[str]) -> Any:
    """The table's rows as a pyarrow table, read by delta-rs (not Spark)."""
    from deltalake import DeltaTable

    return DeltaTable(str(table)).to_pyarrow_table(columns=columns)


def spark_count(spark: Any, batch: Any, *, path: str, where: str = "") -> dict[str, int]:
    """In an executor: rows and distinct (topic, partition, offset) of a Delta table, by Spark,
    and with ``where`` (Spark SQL) the rows it holds for."""
    df = spark.read.format("delta").load(path)
    out = {
        "rows": df.count(),
        "distinct": df.select("kafka_topic", "kafka_partition", "kafka_offset").distinct().count(),
    }
    if where:
        out["where"] = df.filter(where).count()
    return out


@pytest.fixture(scope="session")
def delta_pool(formats_pool: ThreadedPool) -> ThreadedPool:
    """Executors whose sessions have Delta's jars and extensions (the session's formats pool)."""
    return formats_pool


def zombie_in_flight(
    spark: Any, batch: Any, *, path: str, connector: str, state: dict[str, int]
) -> Any:
    """In an executor: a commit of ``batch`` with epoch 1 whose transaction has begun (its
    data files are being written) when epoch 2 fences the partition from another thread.
    Returns both jobs' results: the zombie's must be a refusal."""
    import threading
    import time

    from daemon.connectors.delta import jobs

    before = {p.name for p in Path(path).rglob("*.parquet")}
    out: dict[str, Any] = {}

    def zombie() -> None:
        out["zombie"] = jobs.commit(
            spark,
            batch,
            path=path,
            connector=connector,
            task=0,
            epoch=1,
            ranges=[["t", 0, 100, 100 + batch.num_rows]],
            state=state,
        )

    thread = threading.Thread(target=zombie)
    thread.start()
    deadline = time.monotonic() + 120
    # Its transaction started once its first data file exists.
    while not ({p.name for p in Path(path).rglob("*.parquet")} - before) and thread.is_alive():
        if time.monotonic() > deadline:
            raise TimeoutError("the zombie's write never started")
        time.sleep(0.01)
    out["fence"] = jobs.open_table(
        spark, None, path=path, connector=connector, task=1, epoch=2, partitions=[["t", 0]]
    )
    thread.join()
    return out


def owners(spark: Any, batch: Any, *, path: str) -> list[list[Any]]:
    """In an executor: every partition's owner as the jobs see it (``delta.txns.owners``)."""
    from daemon.connectors.delta import log, txns

    snapshot = log.latest(spark, log.delta_log(spark, path))
    found = txns.owners(log.transactions(snapshot))
    return [[t, p, c] for (t, p), c in sorted(found.items())]


def racing_first_commits(spark: Any, batch: Any, *, path: str) -> dict[str, Any]:
    """In an executor: connectors ``a`` and ``b`` commit ``batch`` (partition 0 of ``t``, from
    offset 0) into the table at ``path`` that does not exist yet, from two threads started
    together. Both results, by connector."""
    import threading

    from daemon.connectors.delta import jobs

    out: dict[str, Any] = {}
    start = threading.Barrier(2)

    def commit(connector: str) -> None:
        start.wait()
        out[connector] = jobs.commit(
            spark,
            batch,
            path=path,
            connector=connector,
            task=0,
            epoch=1,
            ranges=[["t", 0, 0, batch.num_rows]],
            state={},
        )

    threads = [threading.Thread(target=commit, args=(c,)) for c in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def in_zone(spark: Any, batch: Any, *, zone: str, job: str, **kwargs: Any) -> Any:
    """In an executor: the Delta job ``job`` (a name in ``daemon.connectors.delta.jobs``) run
    with the session's time zone set to ``zone``, then set back."""
    from daemon.connectors.delta import jobs

    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        return getattr(jobs, job)(spark, batch, **kwargs)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def append_leaving_out(
    spark: Any, batch: Any, *, path: str, columns: list[str], zone: str
) -> dict[str, int]:
    """In an executor: a plain Spark append of ``batch`` without ``columns`` (a Delta table's
    generated columns, which Delta then computes) in session time zone ``zone``."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        batch.df.drop(*columns).write.format("delta").mode("append").save(path)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    return {"rows": int(batch.num_rows)}
