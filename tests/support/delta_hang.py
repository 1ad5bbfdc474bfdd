"""A DeltaSink whose first commit hangs inside its Spark job: a Python UDF over the batch's
``value`` sleeps forever, after Delta's transaction has started. Used by the hang test: the
write is killed at its deadline and nothing of it may reach the table's history.

``$CONNECTD_HANG_MARKER`` names a file the UDF writes its pid to; once it exists, commits run
normally (the restarted task writes everything once)."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from daemon.connectors.delta import jobs
from daemon.connectors.delta.jobs import alter_offsets, open_table, read_offsets, upkeep
from daemon.connectors.delta.sink import DELTA, DeltaSinkConnector, DeltaSinkTask, delta_format

__all__ = ["alter_offsets", "open_table", "read_offsets", "upkeep"]


class _Hanging:
    def __init__(self, batch: Any, marker: str) -> None:
        self._batch, self._marker = batch, marker
        self.num_rows = batch.num_rows
        self.table = batch.table

    @property
    def df(self) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType

        def stall(value, where=self._marker):  # type: ignore[no-untyped-def]
            import os
            import time

            with open(f"{where}.tmp", "w") as out:
                out.write(str(os.getpid()))
            os.replace(f"{where}.tmp", where)
            while True:
                time.sleep(3600)

        return self._batch.df.withColumn("value", F.udf(stall, StringType())("value"))


def commit(spark: Any, batch: Any, **kwargs: Any) -> Any:
    marker = os.environ["CONNECTD_HANG_MARKER"]
    if batch is not None and not os.path.exists(marker):
        batch = _Hanging(batch, marker)
    return jobs.commit(spark, batch, **kwargs)


class HangOnceDeltaTask(DeltaSinkTask):
    table_format = functools.partial(
        delta_format, kind=dataclasses.replace(DELTA, jobs="support.delta_hang")
    )


class HangOnceDeltaSink(DeltaSinkConnector):
    task_type = HangOnceDeltaTask
