"""``/admin/loggers``: Python log levels read and changed at run time, in Connect's terms."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from support.fake_worker import Client

from daemon.logs.levels import level_name, parse_level


@pytest.fixture(autouse=True)
def _restore_levels() -> Iterator[None]:
    names = ["connectd.testlog", "connectd.testlog.child", "connectd.testlog.child.deep"]
    saved = {n: logging.getLogger(n).level for n in names}
    root = logging.getLogger().level
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logging.getLogger().setLevel(root)


def test_level_names_both_ways() -> None:
    assert parse_level("warn") == logging.WARNING
    assert parse_level("WARNING") == logging.WARNING
    assert parse_level("fatal") == logging.CRITICAL
    assert parse_level("TRACE") == 5
    assert parse_level("loud") is None
    assert level_name(logging.WARNING) == "WARN"
    assert level_name(logging.CRITICAL) == "FATAL"
    assert level_name(5) == "TRACE"
    assert level_name(logging.CRITICAL + 10) == "OFF"


async def test_set_namespace_sets_children_and_reports_them(client: Client) -> None:
    logging.getLogger("connectd.testlog.child.deep")
    answer = await client.call("PUT", "/admin/loggers/connectd.testlog", json={"level": "DEBUG"})
    assert answer.status == 200
    assert answer.json == [
        "connectd.testlog",
        "connectd.testlog.child",
        "connectd.testlog.child.deep",
    ]
    assert logging.getLogger("connectd.testlog.child.deep").level == logging.DEBUG
    one = (await client.get("/admin/loggers/connectd.testlog.child")).json
    assert one["level"] == "DEBUG"
    assert isinstance(one["last_modified"], int)
    listed = (await client.get("/admin/loggers")).json
    assert listed["connectd.testlog"]["level"] == "DEBUG"
    assert set(listed["root"]) == {"level", "last_modified"}


async def test_get_unknown_logger_is_404(client: Client) -> None:
    message = (await client.get("/admin/loggers/no.such.logger.anywhere")).error(404)
    assert message == "Logger no.such.logger.anywhere not found."


async def test_root_is_known(client: Client) -> None:
    answer = await client.get("/admin/loggers/root")
    assert answer.status == 200
    assert answer.json["level"] in {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"}


async def test_cluster_scope_is_204(client: Client) -> None:
    answer = await client.call(
        "PUT", "/admin/loggers/connectd.testlog?scope=cluster", json={"level": "ERROR"}
    )
    assert answer.status == 204
    assert logging.getLogger("connectd.testlog").level == logging.ERROR
    (
        await client.call(
            "PUT", "/admin/loggers/connectd.testlog?scope=galaxy", json={"level": "ERROR"}
        )
    ).error(400)


async def test_bad_levels(client: Client) -> None:
    path = "/admin/loggers/connectd.testlog"
    message = (await client.call("PUT", path, json={"level": "LOUD"})).error(404)
    assert message == "invalid log level 'LOUD'."
    message = (await client.call("PUT", path, json={"other": "x"})).error(400)
    assert message == "Desired 'level' parameter was not specified in request."
    (await client.call("PUT", path, json={"level": 10})).error(400)
