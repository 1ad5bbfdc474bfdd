"""A task's own ``<side>.converter.*`` keys reach its converters (ParquetSink's value.fields)."""

from __future__ import annotations

import json

from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.records import RawBatch
from daemon.runtime.incarnation.pipeline import task_converter_options


def test_task_keys_override_the_connectors_and_other_keys_are_ignored() -> None:
    base = {"schemas.enable": "false", "mode": "text"}
    task = {
        "value.converter.mode": "fields",
        "value.converter.fields": "a,b",
        "key.converter.schemas.enable": "true",
        "value.converter": "json",
        "path": "/tables/t",
    }
    assert task_converter_options(base, task, "value") == {
        "schemas.enable": "false",
        "mode": "fields",
        "fields": "a,b",
    }
    assert task_converter_options(base, task, "key") == {"schemas.enable": "true", "mode": "text"}


def test_value_fields_from_the_task_config_become_columns() -> None:
    options = task_converter_options(
        {"schemas.enable": "false"},
        {"value.converter.mode": "fields", "value.converter.fields": "a,b"},
        "value",
    )
    key, value = (
        make_converter("string", {}, is_key=True),
        make_converter("json", options, is_key=False),
    )
    raw = RawBatch(
        topics=["t", "t"],
        partitions=[0, 0],
        offsets=[0, 1],
        timestamps=[0, 0],
        keys=[None, None],
        values=[json.dumps({"a": 1, "b": "x", "c": 2}).encode(), json.dumps({"a": 2}).encode()],
    )
    result = convert_poll(raw, key, value)
    assert result.bad == []
    names = result.batch.table.column_names
    assert "a" in names and "b" in names and "c" not in names
    assert result.batch.table.column("a").to_pylist() == [1, 2]
