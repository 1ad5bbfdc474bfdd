"""docs/connectors.md stays true: the example connector runs, the settings tables of the
built-in connectors (ParquetSink, HangSink, EchoSink) match their declarations."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest

from daemon.connectors import ConfigDef, TaskId, TopicPartition
from daemon.connectors.delta.settings import CONFIG_DEF as DELTA_DEF
from daemon.connectors.iceberg.settings import CONFIG_DEF as ICEBERG_DEF
from daemon.connectors.parquet.sink import CONFIG_DEF
from daemon.connectors.testing import EchoSinkConnector, HangSinkConnector, sample_batch
from daemon.runtime.incarnation.context import TaskContext

DOC = Path(__file__).resolve().parents[3] / "docs" / "connectors.md"


def doc() -> str:
    return DOC.read_text()


def example_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (code,) = re.findall(r'```python\n("""mypackage/jsonlines\.py.*?)```', doc(), re.S)
    (tmp_path / "jsonlines_example.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("jsonlines_example")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, float, dict[str, Any]]] = []

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        self.calls.append((fn, 0 if batch is None else batch.num_rows, timeout, kwargs))
        return 0 if batch is None else batch.num_rows


async def test_the_example_connector_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = example_module(tmp_path, monkeypatch)
    connector = example.JsonLinesSinkConnector()
    assert [p.key for p in connector.validate({})] == ["path"]
    assert [p.key for p in connector.validate({"path": "/x", "compression": "lz4"})] == [
        "compression"
    ]
    config = {"path": "/data/events", "compression": "gzip", "task.write.timeout.ms": "5000"}
    runner = Recorder()
    ctx = TaskContext(TaskId("events", 0), 1, config, runner)
    task = connector.task_class()()
    tp = TopicPartition("t", 0)
    await task.start(config, ctx)
    ctx.set_assignment([tp])
    await task.open([tp])
    await task.put(sample_batch("t", 0, 0, 10))
    await task.put(sample_batch("t", 0, 10, 0))
    assert await task.pre_commit({tp: 10}) == {tp: 10}
    await task.stop()
    assert task.written == 10
    assert runner.calls == [
        (
            "jsonlines_example:append_json",
            10,
            5.0,
            {"path": "/data/events", "compression": "gzip"},
        )
    ]
    batch = mock.MagicMock(num_rows=3)
    assert example.append_json(None, batch, path="/p", compression="none") == 3
    batch.df.write.mode.assert_called_once_with("append")
    batch.df.write.mode().option().json.assert_called_once_with("/p")


def table_of(section: str) -> dict[str, str]:
    """``{setting: default}`` of the settings table under ``### section``."""
    text = doc().split(f"### {section}\n", 1)[1]
    text = re.split(r"\n##+ ", text, maxsplit=1)[0]
    return dict(re.findall(r"^\| `([a-z.]+)` \| ([^|]*) \|", text, re.M))


def declared_default(cdef: ConfigDef, key: str) -> str:
    value = cdef.keys[key].default
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.parametrize(
    ("section", "cdef", "extra"),
    [
        ("ParquetSink", CONFIG_DEF, {"task.write.timeout.ms"}),
        ("DeltaSink", DELTA_DEF, {"task.write.timeout.ms"}),
        ("IcebergSink", ICEBERG_DEF, {"task.write.timeout.ms"}),
        ("HangSink", HangSinkConnector().config_def(), set()),
        ("EchoSink", EchoSinkConnector().config_def(), set()),
    ],
)
def test_settings_tables_match_the_declarations(
    section: str, cdef: ConfigDef, extra: set[str]
) -> None:
    documented = table_of(section)
    assert set(documented) == set(cdef.keys) | extra
    for key, default in documented.items():
        shown = re.fullmatch(r"`(.*)`", default.strip())
        if shown and key in cdef.keys:  # a literal default: it must be the declared one
            assert shown.group(1) == declared_default(cdef, key), key
