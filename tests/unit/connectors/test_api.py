"""The sink connector API: settings, the task context, defaults, the connector registry."""

from __future__ import annotations

import asyncio
import logging
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pytest

from daemon.config.definitions import ConfigKey, ConnectorConfigDef
from daemon.connectors import (
    REQUIRED,
    ConfigDef,
    ConfigType,
    ConnectorRegistry,
    Importance,
    RecordBatch,
    SinkConnector,
    SinkTask,
    SinkTaskContext,
    TaskId,
    TopicPartition,
    in_range,
    one_of,
)
from daemon.errors import ConnectorNotFound, InvalidConfig
from daemon.runtime.incarnation.context import TaskContext

TP0, TP1, TP2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


# --- ConfigDef ---------------------------------------------------------------------------


def _def() -> ConfigDef:
    return (
        ConfigDef()
        .define("path", ConfigType.STRING, REQUIRED, Importance.HIGH, "Where the table is.")
        .define("flush.size", ConfigType.INT, 1000, validator=in_range(1, 10**6))
        .define("format", ConfigType.STRING, "parquet", validator=one_of("parquet", "orc"))
        .define("partition.by", ConfigType.LIST, [])
        .define("compact", ConfigType.BOOLEAN, False)
        .define("rotate.interval.ms", ConfigType.MS, 60000)
        .define("ratio", ConfigType.DOUBLE, 0.5)
        .define("secret", ConfigType.PASSWORD, None)
    )


def test_configdef_parse_gives_typed_values_with_defaults() -> None:
    values = _def().parse({"path": "/t", "partition.by": "a, b", "compact": "TRUE", "ratio": "2"})
    assert values == {
        "path": "/t",
        "flush.size": 1000,
        "format": "parquet",
        "partition.by": ["a", "b"],
        "compact": True,
        "rotate.interval.ms": 60000,
        "ratio": 2.0,
        "secret": None,
    }


def test_configdef_validate_reports_every_problem_and_never_raises() -> None:
    problems = _def().validate(
        {
            "flush.size": "0",
            "format": "csv",
            "compact": "maybe",
            "rotate.interval.ms": "-1",
            "other": "x",
        }
    )
    by_key = {p.key: p for p in problems}
    assert set(by_key) == {"path", "flush.size", "format", "compact", "rotate.interval.ms"}
    assert "missing" in by_key["path"].message and "Where the table is." in by_key["path"].message
    assert by_key["compact"].expected == "true or false"
    assert all(p.is_error for p in problems)
    with pytest.raises(InvalidConfig) as e:
        _def().parse({})
    assert "path" in str(e.value)


def test_configdef_implements_the_config_layers_protocol() -> None:
    definition: ConnectorConfigDef = _def()  # mypy checks the protocol here
    keys = definition.keys
    assert keys["path"] == ConfigKey(
        "path", ConfigType.STRING, REQUIRED, Importance.HIGH, "Where the table is."
    )
    assert keys["path"].required and not keys["flush.size"].required
    assert keys["flush.size"].type is ConfigType.INT and keys["flush.size"].default == 1000
    assert keys["secret"].type is ConfigType.PASSWORD and keys["secret"].default is None
    with pytest.raises(ValueError, match="defined twice"):
        _def().define("path", ConfigType.STRING)


# --- the task context ---------------------------------------------------------------------


class Runner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, float, dict[str, Any]]] = []

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        self.calls.append((fn, batch, timeout, kwargs))
        return "done"


def _context() -> tuple[TaskContext, Runner]:
    runner = Runner()
    ctx = TaskContext(TaskId("sink", 3), 7, {"a": "b"}, runner)
    ctx.set_assignment([TP0, TP1])
    return ctx, runner


def test_context_identity() -> None:
    ctx, _ = _context()
    as_protocol: SinkTaskContext = ctx
    assert str(as_protocol.task_id) == "sink-3" and ctx.epoch == 7 and ctx.config == {"a": "b"}
    assert ctx.assignment() == {TP0, TP1}


def test_context_seeks_are_collected_for_assigned_partitions() -> None:
    ctx, _ = _context()
    ctx.offset(TP0, 5)
    ctx.offset({TP1: 9, TP0: 6})
    assert ctx.take_seeks() == {TP0: 6, TP1: 9}
    assert ctx.take_seeks() == {}
    ctx.offset(TP1, 3)
    ctx.set_assignment([TP0])  # TP1 revoked: its pending seek is dropped
    assert ctx.take_seeks() == {}
    with pytest.raises(ValueError, match="offset"):
        ctx.offset(TP0, -1)
    with pytest.raises(TypeError):
        ctx.offset()  # type: ignore[call-overload]


def test_context_pause_resume_only_assigned() -> None:
    ctx, _ = _context()
    ctx.pause(TP0, TP1)
    ctx.resume(TP1)
    assert ctx.paused() == {TP0}
    with pytest.raises(ValueError, match="t-2 not assigned"):
        ctx.pause(TP2)
    ctx.set_assignment([TP1])
    assert ctx.paused() == set()


def test_context_commit_request_and_closing() -> None:
    ctx, _ = _context()
    assert not ctx.take_commit_request()
    ctx.request_commit()
    assert ctx.take_commit_request() and not ctx.take_commit_request()
    assert not ctx.is_closing
    with ctx.closing():
        assert ctx.is_closing
    assert not ctx.is_closing
    with pytest.raises(RuntimeError), ctx.closing():
        raise RuntimeError("pre_commit failed")
    assert not ctx.is_closing


async def test_context_runs_in_the_executor() -> None:
    ctx, runner = _context()
    table = pa.table({"x": [1]})
    assert await ctx.run_in_executor("pkg.mod:write", table, timeout=3.0, path="/t") == "done"
    assert runner.calls == [("pkg.mod:write", table, 3.0, {"path": "/t"})]


# --- task and connector defaults -----------------------------------------------------------


class Task(SinkTask):
    def __init__(self) -> None:
        self.flushed: list[Mapping[TopicPartition, int]] = []
        self.closing_seen: list[bool] = []

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.context = context

    async def put(self, batch: RecordBatch) -> None:
        pass

    async def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.closing_seen.append(self.context.is_closing)
        self.flushed.append(offsets)

    async def stop(self) -> None:
        pass


class Connector(SinkConnector):
    def task_class(self) -> type[SinkTask]:
        return Task


async def test_default_pre_commit_flushes_then_returns_the_offsets() -> None:
    ctx, _ = _context()
    task = Task()
    await task.start({}, ctx)
    await task.open([TP0])
    with ctx.closing():
        assert await task.pre_commit({TP0: 10}) == {TP0: 10}
    assert task.flushed == [{TP0: 10}] and task.closing_seen == [True]
    await task.close([TP0])
    assert task.version() == "unknown"


async def test_connector_defaults() -> None:
    c = Connector()
    assert c.validate({"anything": "x"}) == []
    await c.start({"name": "x", "topics": "t"})
    assert c.task_configs(2) == [{"name": "x", "topics": "t"}] * 2
    assert c.task_class() is Task
    await c.stop()


# --- the registry --------------------------------------------------------------------------


@pytest.fixture
def plugin_module() -> Iterator[str]:
    """A throw-away module holding a connector class, importable by name."""
    name = "connectd_test_plugin"
    module = types.ModuleType(name)
    module.__version__ = "1.2.3"  # type: ignore[attr-defined]
    Connector.__module__ = name
    module.Good = Connector  # type: ignore[attr-defined]
    module.NotAConnector = Task  # type: ignore[attr-defined]
    sys.modules[name] = module
    yield name
    del sys.modules[name]
    Connector.__module__ = __name__


def test_registry_resolves_aliases_paths_and_connector_suffix(plugin_module: str) -> None:
    reg = ConnectorRegistry({"GoodSink": f"{plugin_module}:Good"})
    assert reg.resolve("GoodSink") is Connector
    assert reg.resolve("goodsink") is Connector
    assert reg.resolve("GoodSinkConnector") is Connector
    assert reg.resolve(f"{plugin_module}:Good") is Connector
    assert reg.resolve(f"{plugin_module}.Good") is Connector
    definition = reg.config_def("GoodSink")
    assert definition is not None and definition.keys == {}
    assert reg.config_def("Nope") is None


def test_registry_lazy_aliases_to_missing_modules_are_fine_until_used(plugin_module: str) -> None:
    reg = ConnectorRegistry()
    reg.register_alias("ParquetSink", "connectd_not_written_yet.parquet:ParquetSinkConnector")
    reg.register_alias("GoodSink", f"{plugin_module}:Good")
    with pytest.raises(ConnectorNotFound) as e:
        reg.resolve("ParquetSink")
    assert "ModuleNotFoundError" in str(e.value) and "GoodSink, ParquetSink" in str(e.value)
    plugins = reg.list_plugins()  # the broken alias is left out, the good one listed
    assert [p.to_rest() for p in plugins] == [
        {"class": f"{plugin_module}.Connector", "type": "sink", "version": "1.2.3"}
    ]
    assert plugins[0].aliases == ("GoodSink",)


def test_registry_errors(plugin_module: str) -> None:
    reg = ConnectorRegistry({"GoodSink": f"{plugin_module}:Good"})
    with pytest.raises(
        ConnectorNotFound, match="no connector class or alias 'Unknown'; known aliases: GoodSink"
    ):
        reg.resolve("Unknown")
    with pytest.raises(ConnectorNotFound, match="not a SinkConnector"):
        reg.resolve(f"{plugin_module}:NotAConnector")
    with pytest.raises(ConnectorNotFound, match="AttributeError"):
        reg.resolve(f"{plugin_module}:Missing")
    with pytest.raises(ValueError, match="already points"):
        reg.register_alias("GoodSink", "other:Class")
    reg.register_alias("GoodSink", "other:Class", replace=True)
    with pytest.raises(ValueError, match=r"package\.module:Class"):
        reg.register_alias("X", "no_colon")


async def test_background_work_ends_with_the_incarnation(caplog: pytest.LogCaptureFixture) -> None:
    """``end_background`` (the runtime calls it as the incarnation ends) cancels what the task
    started beside its callbacks and returns only once it has ended; a failure nobody
    collected is logged, not lost."""
    ctx, _ = _context()
    ended: list[str] = []

    async def writer() -> None:
        try:
            await asyncio.Event().wait()  # a write in flight
        finally:
            await asyncio.sleep(0)  # its clean-up takes a step, and is waited for
            ended.append("writer")

    async def crashes() -> None:
        raise RuntimeError("lost its table")

    ctx.start_background(writer(), "writer")
    crashed = ctx.start_background(crashes(), "upkeep")
    await asyncio.wait([crashed])
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(ctx.end_background(), 5)
    assert ended == ["writer"]
    assert "sink-3 upkeep failed: RuntimeError('lost its table')" in caplog.text
    await ctx.end_background()  # nothing left: a no-op
