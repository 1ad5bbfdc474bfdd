"""Write functions for tests/integration/executor/test_formats.py (imported in the executor as
``integration.executor.format_jobs``: ``tests`` is on the executors' import path)."""

from __future__ import annotations

import os
from typing import Any


def session(spark: Any, batch: Any) -> dict[str, Any]:
    """What the session loaded, and which process answers."""
    return {
        "pid": os.getpid(),
        "extensions": spark.conf.get("spark.sql.extensions", ""),
        "catalog": spark.conf.get("spark.sql.catalog.spark_catalog", ""),
        "jars": spark.conf.get("spark.jars", ""),
    }


def delta_round_trip(spark: Any, batch: Any, path: str) -> dict[str, Any]:
    """A tiny Delta append and its read-back, with what the session loaded."""
    rows = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id INT, v STRING")
    rows.write.format("delta").mode("append").save(path)
    back = spark.read.format("delta").load(path)
    return {
        **session(spark, batch),
        "rows": back.count(),
        "ids": sorted(r.id for r in back.collect()),
    }
