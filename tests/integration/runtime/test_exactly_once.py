"""Exactly once under faults: 20,000 records in 3 partitions into a Parquet table (written by
pyarrow in the executors, the default ``write.engine=auto``), while the daemon is SIGKILLed
three times (and restarted) and two executors are SIGKILLed from outside (the Spark-cluster
audit kills JVMs under Spark writes). Once it has caught up, the table — read with pyarrow,
which skips the underscore-prefixed staging and log directories as every reader does — holds
exactly 20,000 rows and 20,000 distinct (kafka_partition, kafka_offset) pairs
(``support.exactly_once``), each as a chain of six of Connect's transforms leaves it (a router
among them: the rows hold the routed topic, the commit log the topic read).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from support.daemon import ProcessFactory
from support.exactly_once import PARTITIONS, RECORDS, TRANSFORMED, audit
from support.kafka_fixtures import TopicFactory

pytestmark = [pytest.mark.integration, pytest.mark.spark_line]


async def test_twenty_thousand_records_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=PARTITIONS)

    async def check(table: Path) -> None:
        data = ds.dataset(table, format="parquet").to_table()
        assert data.num_rows == RECORDS
        pairs = data.group_by(["kafka_partition", "kafka_offset"]).aggregate([])
        assert pairs.num_rows == RECORDS
        lines = pc.utf8_slice_codeunits(data.column("line"), 0, 8)
        assert pc.count_distinct(lines).as_py() == RECORDS  # every record, none twice
        assert set(data.column("kafka_topic").to_pylist()) == {"audited"}  # routed
        offsets = data.column("kafka_offset").cast("string")
        assert pc.all(pc.equal(data.column("off"), offsets)).as_py()
        assert set(data.column("part").to_pylist()) == {0}  # masked

    await audit(
        daemon_process, kafka_bootstrap, topic, tmp_path, sink_extra=TRANSFORMED, check=check
    )
