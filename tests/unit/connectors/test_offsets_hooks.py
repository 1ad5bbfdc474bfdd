"""The offsets hooks are declared on ``SinkConnector``: defaults that keep nothing."""

from __future__ import annotations

from daemon.connectors.api import SinkConnector, SinkTask
from daemon.connectors.parquet import ParquetSinkConnector
from daemon.structs import TopicPartition


class Plain(SinkConnector):
    def task_class(self) -> type[SinkTask]:
        raise NotImplementedError


async def test_a_connector_without_its_own_offsets_leaves_them_to_the_group() -> None:
    connector = Plain()
    assert await connector.read_offsets({"name": "c"}) is None
    assert await connector.alter_offsets({}, {TopicPartition("t", 0): 5}) is None
    assert await connector.reset_offsets({}, run_in_executor=None) is None


def test_parquet_sink_keeps_its_own() -> None:
    for hook in ("read_offsets", "alter_offsets", "reset_offsets"):
        assert getattr(ParquetSinkConnector, hook) is not getattr(SinkConnector, hook)
