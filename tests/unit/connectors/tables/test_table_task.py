"""The one table sink task on a fake job format (``support.fake_table_jobs``, no Spark): an
``open`` whose jobs outlast ``OPEN_WAIT`` returns (it runs inside the consumer's rebalance
callback) and ``put`` finishes it: seeks to the committed offsets, leaves out the records
until then."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from daemon.connectors import TaskId, TopicPartition
from daemon.connectors.delta.settings import DeltaSettings
from daemon.connectors.records import OffsetRange, RecordBatch
from daemon.connectors.tables import opening
from daemon.connectors.tables.jobtables import JobFormat, JobKind
from daemon.connectors.tables.settings import Target
from daemon.connectors.tables.task import TableSinkTask
from daemon.connectors.testing import LocalRunner
from daemon.runtime.incarnation.context import TaskContext

TP = TopicPartition("t", 0)


class FakeSettings:
    def __init__(self, config: Mapping[str, str]) -> None:
        self.inner = DeltaSettings.from_config(config)
        self.delay = float(config.get("fake.delay", "0"))

    @property
    def table(self) -> Any:
        return self.inner.table

    @property
    def compaction(self) -> Any:
        return self.inner.compaction

    @property
    def template(self) -> str:
        return self.inner.template

    def target(self, topic: str) -> Target:
        path = self.inner.target(topic).kwargs["path"]
        return Target(path, {"path": path, "delay": self.delay})


FAKE = JobKind(format="delta", jobs="support.fake_table_jobs", key="path", owners=lambda t: None)


def fake_format(config: Mapping[str, str]) -> JobFormat:
    return JobFormat(FAKE, FakeSettings(config))


class FakeTask(TableSinkTask):
    table_format = fake_format


def batch(start: int, n: int) -> RecordBatch:
    table = pa.table(
        {
            "kafka_topic": ["t"] * n,
            "kafka_partition": pa.array([0] * n, pa.int32()),
            "kafka_offset": pa.array(range(start, start + n), pa.int64()),
            "value": ["v"] * n,
        }
    )
    return RecordBatch(table, (OffsetRange("t", 0, start, start + n),))


async def test_a_slow_open_returns_and_put_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opening, "OPEN_WAIT", 0.05)
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"t/0": 5}))
    config = {"path": str(table), "fake.delay": "0.5", "flush.linger.ms": "0"}
    ctx = TaskContext(TaskId("c", 0), 1, config, LocalRunner())
    task = FakeTask()
    await task.start(config, ctx)
    ctx.set_assignment([TP])
    await task.open([TP])
    assert ctx.take_seeks() == {}  # not known yet: open returned before its job ended
    assert task.committed == {}
    await task.put(batch(0, 10))  # fetched from the group's offset, before the seek
    assert ctx.take_seeks() == {TP: 5}
    assert task.buffered == 0  # left out: they come again from offset 5
    await task.put(batch(5, 5))
    await task.quiet()
    assert json.loads(table.read_text()) == {"t/0": 10}
    assert task.committed == {TP: 10}
    await task.stop()


async def test_a_quick_open_seeks_at_once(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"t/0": 3}))
    config = {"path": str(table)}
    ctx = TaskContext(TaskId("c", 0), 1, config, LocalRunner())
    task = FakeTask()
    await task.start(config, ctx)
    ctx.set_assignment([TP])
    await task.open([TP])
    assert ctx.take_seeks() == {TP: 3}
    await task.stop()


async def test_close_cancels_an_opening_of_its_partitions_and_lets_a_wider_one_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opening, "OPEN_WAIT", 0.01)
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"t/0": 5, "t/1": 7}))
    config = {"path": str(table), "fake.delay": "0.3"}
    ctx = TaskContext(TaskId("c", 0), 1, config, LocalRunner())
    task = FakeTask()
    await task.start(config, ctx)
    other = TopicPartition("t", 1)
    ctx.set_assignment([TP, other])
    await task.open([TP, other])
    await task.close([TP])  # the opening also holds t-1, which stays: it finishes
    assert task.committed == {other: 7}
    assert ctx.take_seeks() == {other: 7}
    await task.open([TP])
    await task.close([TP])  # an opening of closed partitions only: cancelled
    assert task.committed == {other: 7}
    await task.stop()
