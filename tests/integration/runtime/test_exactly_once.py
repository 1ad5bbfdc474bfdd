"""Exactly once under faults: 20,000 records in 3 partitions into a Parquet table (written by
pyarrow in the executors, the default ``write.engine=auto``), while the daemon is SIGKILLed
three times (and restarted) and two executors are SIGKILLed from outside (the Spark-cluster
audit kills JVMs under Spark writes). Once it has caught up, the table — read with pyarrow,
which skips the underscore-prefixed staging and log directories as every reader does — holds
exactly 20,000 rows and 20,000 distinct (kafka_partition, kafka_offset) pairs
(``support.exactly_once``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.daemon import ProcessFactory
from support.exactly_once import PARTITIONS, audit
from support.kafka_fixtures import TopicFactory

pytestmark = pytest.mark.integration


async def test_twenty_thousand_records_exactly_once_through_kills(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    kafka_topic: TopicFactory,
    tmp_path: Path,
) -> None:
    topic = await kafka_topic(partitions=PARTITIONS)
    await audit(daemon_process, kafka_bootstrap, topic, tmp_path)
